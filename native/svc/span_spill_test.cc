// The binary span spill: what the spiller writes during a run and converts at
// stop is, byte for byte, the NDJSON the spiller used to write (the lines of
// append_span_line), whatever the span holds, however many blocks it took;
// a spill cut short keeps its whole blocks; a killed service's spill converts.
#include "svc/span_spill.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/result_writer.h"

namespace tailscope::svc {
namespace {

// Names live as long as the spans refer to them (the topology's do).
const std::string kService = "compose-post";
const std::string kOperation = "/wrk2-api/post/compose";
const std::string kEscapes = "op \"quoted\" \\ tab\t newline\n bell\x07 del\x7f";
const std::string kUnicode = "сервис ✓ 服务 \xf0\x9f\x93\x88";
const std::string kEmpty;
const std::string kLong = std::string(5000, 'x') + "\"" + std::string(5000, 'y');

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("tailscope-span-spill-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every form a field takes: names (none, empty, escapes, unicode, long), each
// role and status, error, launch kinds, every tag combination, probes whole,
// partial and deferred, extreme ids and integers.
std::vector<SpanRecord> every_field_form() {
  std::vector<SpanRecord> spans;
  const std::string* names[] = {&kService, &kOperation, &kEscapes, &kUnicode, &kEmpty, &kLong, nullptr};
  const char* launches[] = {nullptr, "async", "deferred", "sync"};
  const char* db_systems[] = {nullptr, "memcached", "redis", "postgresql"};
  const int64_t followers[] = {-1, 0, 913, std::numeric_limits<int64_t>::max()};
  const trace::CacheResult caches[] = {trace::CacheResult::kNone, trace::CacheResult::kHit, trace::CacheResult::kMiss};
  uint64_t i = 0;
  for (const std::string* service : names)
    for (const std::string* operation : names) {
      SpanRecord s;
      ++i;
      s.trace_id_high = i % 3 == 0 ? 0 : 0x0123456789abcdefULL * i;
      s.trace_id_low = i % 5 == 0 ? std::numeric_limits<uint64_t>::max() : 0xfedcba9876543210ULL + i;
      s.span_id = i;
      s.parent_span_id = i % 2 ? 0 : ~i;
      s.service = service;
      s.operation = operation;
      s.role = static_cast<SpanRole>(i % 3);
      s.error = i % 4 == 0;
      s.status = static_cast<net::RpcStatus>(i % 7);
      s.launch = launches[i % 4];
      s.db_system = db_systems[(i / 4) % 4];
      s.store_role = s.db_system && i % 3 == 0 ? "mongodb" : nullptr;
      s.followers = followers[(i / 2) % 4];
      s.cache = caches[i % 3];
      s.start_ns = i % 6 == 0 ? 0 : 1'000'000'000 + static_cast<int64_t>(i) * 12345;
      s.end_ns = i % 11 == 0 ? std::numeric_limits<int64_t>::min() / 2 : s.start_ns + static_cast<int64_t>(i) * 777;
      s.has_probe = i % 2 == 0;
      if (s.has_probe) {
        const int64_t t = s.start_ns + 1;
        s.probe = {t, t + 50, t + 300, i % 8 == 0 ? 0 : t + 200, t + 360, i % 4 == 0};
      }
      spans.push_back(s);
    }
  return spans;
}

std::string direct_lines(const std::vector<SpanRecord>& spans, int64_t unix_offset_ns) {
  std::string lines;
  for (const auto& s : spans) append_span_line(&lines, s, unix_offset_ns);
  return lines;
}

// Writes `blocks` (each with its own Unix offset) as a spill file; returns its path.
std::string write_spill(const std::filesystem::path& dir, const std::vector<std::vector<SpanRecord>>& blocks,
                        const std::vector<int64_t>& offsets_ns) {
  SpillEncoder encoder;
  std::string bytes;
  SpillEncoder::append_header(&bytes, "svc");
  for (size_t b = 0; b < blocks.size(); ++b) {
    encoder.begin_block(&bytes, offsets_ns[b]);
    for (const auto& s : blocks[b]) encoder.append(&bytes, s);
    encoder.end_block(&bytes);
  }
  const auto path = dir / "svc.spill";
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

std::string convert(const std::string& spill_path, const std::filesystem::path& out_path, SpillConversion* c) {
  AtomicFileWriter out(out_path.string());
  *c = convert_span_spill(spill_path, &out);
  out.commit();
  return read_all(out_path);
}

TEST(SpanSpill, EveryFieldFormConvertsToTheDirectLineByteForByte) {
  const auto dir = temp_dir();
  const auto spans = every_field_form();
  ASSERT_EQ(spans.size(), 49U);
  const int64_t offset_ns = 1'764'000'000'000'000'000;  // a Unix epoch offset of 2025
  SpillConversion c;
  const std::string text = convert(write_spill(dir, {spans}, {offset_ns}), dir / "svc.spans.jsonl", &c);
  EXPECT_EQ(c.stem, "svc");
  EXPECT_EQ(c.spans, 49);
  EXPECT_EQ(c.truncated_bytes, 0);
  EXPECT_EQ(text, direct_lines(spans, offset_ns));
  std::filesystem::remove_all(dir);
}

// Names are defined once per spill, not per block: a later block refers to a
// name the first defined. Each block keeps its own Unix offset. More names
// than the encoder's first table holds.
TEST(SpanSpill, ManyBlocksConvertInOrderWithTheirOwnOffsets) {
  const auto dir = temp_dir();
  std::vector<std::string> operations;
  for (int i = 0; i < 300; ++i) operations.push_back("op-" + std::to_string(i));
  std::vector<std::vector<SpanRecord>> blocks(40);
  std::vector<int64_t> offsets_ns;
  std::string expected;
  const auto forms = every_field_form();
  for (size_t b = 0; b < blocks.size(); ++b) {
    offsets_ns.push_back(1'700'000'000'000'000'000 + static_cast<int64_t>(b) * 1000);
    for (size_t k = 0; k < 100; ++k) {
      SpanRecord s = forms[(b * 100 + k) % forms.size()];
      if (k % 2) s.operation = &operations[(b * 7 + k) % operations.size()];
      blocks[b].push_back(s);
    }
    if (b == 5) blocks[b].clear();  // an empty spill period
    expected += direct_lines(blocks[b], offsets_ns[b]);
  }
  SpillConversion c;
  EXPECT_EQ(convert(write_spill(dir, blocks, offsets_ns), dir / "svc.spans.jsonl", &c), expected);
  EXPECT_EQ(c.spans, 39 * 100);
  std::filesystem::remove_all(dir);
}

// The spiller end to end: spans recorded over many spill periods (a 1 ms
// period) land in the file as the lines append_span_line makes of them, in
// the order one thread recorded them.
TEST(SpanSpill, SpillerFileIsTheDirectLines) {
  Tracer::configure(1.0);
  Tracer::clear();
  const auto dir = temp_dir();
  const auto forms = every_field_form();
  std::vector<SpanRecord> recorded;
  SpanSpiller::Summary summary;
  {
    SpanSpiller spiller(dir.string(), "svc", 1'000'000);
    for (int round = 0; round < 20; ++round) {
      for (const auto& s : forms) {
        Tracer::record(s);
        recorded.push_back(s);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    summary = spiller.finish();
  }
  EXPECT_EQ(summary.spans, 20 * 49);
  EXPECT_EQ(summary.spans_encoded, 20 * 49);
  EXPECT_GE(summary.encode_at_stop_ns, 0);
  EXPECT_EQ(read_all(dir / "svc.spans.jsonl"), direct_lines(recorded, Tracer::to_unix_ns(0)));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // the spill is gone
  std::filesystem::remove_all(dir);
  Tracer::clear();
}

TEST(SpanSpill, EmptySpillIsAnEmptyFile) {
  Tracer::configure(1.0);
  Tracer::clear();
  const auto dir = temp_dir();
  {
    SpanSpiller spiller(dir.string(), "svc", 1'000'000);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // a few empty spills
    const auto summary = spiller.finish();
    EXPECT_EQ(summary.spans, 0);
    EXPECT_EQ(summary.spans_encoded, 0);
  }
  ASSERT_TRUE(std::filesystem::exists(dir / "svc.spans.jsonl"));
  EXPECT_EQ(std::filesystem::file_size(dir / "svc.spans.jsonl"), 0U);
  SpillConversion c;  // and a spill with a header only
  EXPECT_EQ(convert(write_spill(dir, {}, {}), dir / "again.jsonl", &c), "");
  EXPECT_EQ(c.spans, 0);
  EXPECT_EQ(c.truncated_bytes, 0);
  std::filesystem::remove_all(dir);
}

// A service killed mid-write: the whole blocks before the cut convert, the
// rest is counted, not guessed at.
TEST(SpanSpill, SpillCutShortKeepsItsWholeBlocks) {
  const auto dir = temp_dir();
  const auto forms = every_field_form();
  const std::string path = write_spill(dir, {forms, forms, forms}, {10, 20, 30});
  const auto whole = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, whole - 100);
  SpillConversion c;
  EXPECT_EQ(convert(path, dir / "svc.spans.jsonl", &c), direct_lines(forms, 10) + direct_lines(forms, 20));
  EXPECT_EQ(c.spans, 2 * 49);
  EXPECT_GT(c.truncated_bytes, 0);
  std::filesystem::resize_file(path, 3);  // not even a header
  AtomicFileWriter out((dir / "x.jsonl").string());
  EXPECT_THROW(convert_span_spill(path, &out), std::runtime_error);
  std::ofstream(path, std::ios::binary) << "{\"trace_id\":\"00\"}\n";  // NDJSON is not a spill
  EXPECT_THROW(convert_span_spill(path, &out), std::runtime_error);
  std::filesystem::remove_all(dir);
}

// A process killed during its run leaves the spill under its temporary name:
// the supervisor's merge converts it (and removes it), and
// `tailscope-svc --decode-spill` converts it by hand — beside a span file of
// the same name (the service restarted and stopped) under the spill's suffix.
TEST(SpanSpill, KilledProcessSpillIsConverted) {
  const auto dir = temp_dir();
  const auto forms = every_field_form();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Tracer::configure(1.0);
    Tracer::clear();
    SpanSpiller spiller(dir.string(), "killed", 1'000'000);
    for (const auto& s : forms) Tracer::record(s);
    // Wait (bounded) until the spill holds the spans, then die without unwinding.
    for (int i = 0; i < 10'000; ++i) {
      for (const auto& e : std::filesystem::directory_iterator(dir))
        if (std::filesystem::file_size(e.path()) > 49 * 145) raise(SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    _exit(3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child never saw its spill on disk";
  std::vector<std::filesystem::path> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) left.push_back(e.path());
  ASSERT_EQ(left.size(), 1U);
  const std::string spill_name = left[0].filename().string();
  EXPECT_TRUE(spill_name.starts_with(".killed.spans.spill.tmp.")) << spill_name;
  EXPECT_TRUE(is_left_spill(spill_name));
  EXPECT_FALSE(is_left_spill("killed.spans.jsonl"));
  const auto by_hand = dir / "by-hand";
  std::filesystem::create_directories(by_hand);
  std::filesystem::copy_file(left[0], by_hand / spill_name);

  const auto merged_dir = dir / "merged";
  std::filesystem::create_directories(merged_dir);
  const auto merged = merge_span_files(dir.string(), merged_dir.string());
  EXPECT_EQ(merged["spans"], 49);
  ASSERT_EQ(merged["recovered_spills"].size(), 1U);
  EXPECT_EQ(merged["recovered_spills"][0]["spans"], 49);
  EXPECT_FALSE(std::filesystem::exists(left[0]));  // converted once, not at every merge
  const std::string text = read_all(dir / "killed.spans.jsonl");
  // The child's Unix offset is its own: read it back from the first span's stamp.
  const std::string key = "\"start_unix_ns\":";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  const int64_t offset_ns = std::stoll(text.substr(at + key.size(), 20)) - forms[0].start_ns;
  EXPECT_EQ(text, direct_lines(forms, offset_ns));

  const auto first = decode_span_spill_file((by_hand / spill_name).string());
  EXPECT_EQ(first["spans"], 49);
  EXPECT_EQ(first["truncated_bytes"], 0);
  EXPECT_EQ(first["path"], (by_hand / "killed.spans.jsonl").string());
  const auto second = decode_span_spill_file((by_hand / spill_name).string());
  const std::string suffix = spill_name.substr(spill_name.rfind('.') + 1);
  EXPECT_EQ(second["path"], (by_hand / ("killed." + suffix + ".spans.jsonl")).string());
  EXPECT_EQ(read_all(second["path"].get<std::string>()), text);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tailscope::svc
