#include "svc/span_spill.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>

#include "core/result_writer.h"

namespace tailscope::svc {
namespace {

constexpr char kMagic[8] = {'T', 'S', 'S', 'P', 'I', 'L', 'L', '1'};
constexpr char kNameTag = 'N';
constexpr char kSpanTag = 'S';
constexpr size_t kBlockHeadBytes = 16;  // payload bytes, Unix offset

// A SpanRecord's fields in fixed-width form, names as refs (0: none).
struct SpillRecord {
  uint64_t trace_id_high, trace_id_low, span_id, parent_span_id;
  uint64_t service, operation, launch, db_system, store_role;
  int64_t followers, start_ns, end_ns;
  int64_t trigger_async_fn_ns, fn_start_ns, fn_end_ns, request_val_ns, val_received_ns;
  uint16_t status;
  uint8_t role, error, cache, has_probe, deferred, unused;
};
// No padding: every byte written is a field's (nothing uninitialised on disk).
static_assert(std::has_unique_object_representations_v<SpillRecord>);
static_assert(sizeof(SpillRecord) == 144);

uint64_t ref_of(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

template <typename T>
void put(char** p, const T& v) {
  std::memcpy(*p, &v, sizeof v);
  *p += sizeof v;
}

// Reads fixed-width values and names out of a block's payload, refusing to
// run past its end.
class PayloadReader {
 public:
  PayloadReader(std::string_view payload, const std::string& path) : rest_(payload), path_(path) {}
  bool done() const { return rest_.empty(); }
  template <typename T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof v).data(), sizeof v);
    return v;
  }
  std::string_view take(size_t n) {
    if (n > rest_.size()) throw std::runtime_error(path_ + ": a span spill block ends inside an entry (corrupt file)");
    const std::string_view head = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return head;
  }

 private:
  std::string_view rest_;
  const std::string& path_;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_spill(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) throw std::runtime_error(path + ": cannot open the span spill: " + std::strerror(errno));
  return file;
}

// Returns the stem; leaves `file` at the first block.
std::string read_header(std::FILE* file, const std::string& path) {
  auto read_exactly = [&](void* into, size_t n) { return std::fread(into, 1, n, file) == n; };
  char magic[sizeof kMagic];
  uint32_t record_bytes = 0, stem_bytes = 0;
  if (!read_exactly(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof kMagic) != 0 ||
      !read_exactly(&record_bytes, sizeof record_bytes) || record_bytes != sizeof(SpillRecord) ||
      !read_exactly(&stem_bytes, sizeof stem_bytes) || stem_bytes > 4096)
    throw std::runtime_error(path + ": not a span spill of this tailscope-svc build");
  std::string stem(stem_bytes, '\0');
  if (!read_exactly(stem.data(), stem_bytes)) throw std::runtime_error(path + ": the span spill's header is cut short");
  return stem;
}

}  // namespace

void SpillEncoder::append_header(std::string* out, std::string_view stem) {
  out->append(kMagic, sizeof kMagic);
  const uint32_t record_bytes = sizeof(SpillRecord), stem_bytes = static_cast<uint32_t>(stem.size());
  out->append(reinterpret_cast<const char*>(&record_bytes), sizeof record_bytes);
  out->append(reinterpret_cast<const char*>(&stem_bytes), sizeof stem_bytes);
  out->append(stem);
}

void SpillEncoder::begin_block(std::string* out, int64_t unix_offset_ns) {
  block_start_ = out->size();
  block_has_span_ = false;
  out->resize(block_start_ + kBlockHeadBytes);
  std::memcpy(out->data() + block_start_ + 8, &unix_offset_ns, sizeof unix_offset_ns);
}

void SpillEncoder::end_block(std::string* out) {
  if (!block_has_span_) {
    out->resize(block_start_);
    return;
  }
  const uint64_t payload_bytes = out->size() - block_start_ - kBlockHeadBytes;
  std::memcpy(out->data() + block_start_, &payload_bytes, sizeof payload_bytes);
}

bool SpillEncoder::known(uint64_t ref) const noexcept {
  const size_t mask = seen_.size() - 1;
  for (size_t i = slot(ref, mask);; i = (i + 1) & mask) {
    if (seen_[i] == ref) return true;
    if (seen_[i] == 0) return false;
  }
}

void SpillEncoder::remember(uint64_t ref) {
  if (2 * (seen_count_ + 1) > seen_.size()) {  // keep the table at most half full
    std::vector<uint64_t> old(seen_.size() * 2, 0);
    old.swap(seen_);
    seen_count_ = 0;
    for (const uint64_t r : old)
      if (r != 0) remember(r);
  }
  const size_t mask = seen_.size() - 1;
  size_t i = slot(ref, mask);
  while (seen_[i] != 0) i = (i + 1) & mask;
  seen_[i] = ref;
  ++seen_count_;
}

void SpillEncoder::define_name(std::string* out, const void* address, std::string_view name) {
  const uint64_t ref = ref_of(address);
  remember(ref);
  const uint32_t bytes = static_cast<uint32_t>(name.size());
  const size_t at = out->size();
  out->resize(at + 1 + sizeof ref + sizeof bytes + name.size());
  char* p = out->data() + at;
  put(&p, kNameTag);
  put(&p, ref);
  put(&p, bytes);
  std::memcpy(p, name.data(), name.size());
}

void SpillEncoder::append(std::string* out, const SpanRecord& s) {
  // A name is written before the first span that refers to it, so a reader
  // meets every ref after its definition.
  if (s.service && !known(ref_of(s.service))) define_name(out, s.service, *s.service);
  if (s.operation && !known(ref_of(s.operation))) define_name(out, s.operation, *s.operation);
  if (s.launch && !known(ref_of(s.launch))) define_name(out, s.launch, s.launch);
  if (s.db_system && !known(ref_of(s.db_system))) define_name(out, s.db_system, s.db_system);
  if (s.store_role && !known(ref_of(s.store_role))) define_name(out, s.store_role, s.store_role);
  const SpillRecord r{s.trace_id_high,
                      s.trace_id_low,
                      s.span_id,
                      s.parent_span_id,
                      ref_of(s.service),
                      ref_of(s.operation),
                      ref_of(s.launch),
                      ref_of(s.db_system),
                      ref_of(s.store_role),
                      s.followers,
                      s.start_ns,
                      s.end_ns,
                      s.probe.trigger_async_fn_ns,
                      s.probe.fn_start_ns,
                      s.probe.fn_end_ns,
                      s.probe.request_val_ns,
                      s.probe.val_received_ns,
                      static_cast<uint16_t>(s.status),
                      static_cast<uint8_t>(s.role),
                      s.error,
                      static_cast<uint8_t>(s.cache),
                      s.has_probe,
                      s.probe.deferred,
                      0};
  // One append of the whole entry: a resize would zero the bytes first.
  char entry[1 + sizeof r];
  entry[0] = kSpanTag;
  std::memcpy(entry + 1, &r, sizeof r);
  out->append(entry, sizeof entry);
  block_has_span_ = true;
}

SpillConversion convert_span_spill(const std::string& spill_path, AtomicFileWriter* out) {
  const File file = open_spill(spill_path);
  struct stat st {};
  const int64_t file_bytes = ::fstat(fileno(file.get()), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  auto read_exactly = [&](void* into, size_t n) { return std::fread(into, 1, n, file.get()) == n; };

  SpillConversion result;
  result.stem = read_header(file.get(), spill_path);
  int64_t at = static_cast<int64_t>(sizeof kMagic + 2 * sizeof(uint32_t) + result.stem.size());

  // unordered_map: its strings stay where they are as it grows, so a decoded
  // span can point at them as a recorded one points at the topology's.
  std::unordered_map<uint64_t, std::string> names;
  auto name = [&](uint64_t ref) -> const std::string* {
    if (ref == 0) return nullptr;
    const auto it = names.find(ref);
    if (it == names.end()) throw std::runtime_error(spill_path + ": a span refers to an undefined name (corrupt file)");
    return &it->second;
  };
  std::string payload, text;
  for (;;) {
    uint64_t payload_bytes = 0;
    int64_t unix_offset_ns = 0;
    const size_t head = std::fread(&payload_bytes, 1, sizeof payload_bytes, file.get());
    if (head == 0 && std::feof(file.get())) break;  // the end, between blocks
    if (head != sizeof payload_bytes || !read_exactly(&unix_offset_ns, sizeof unix_offset_ns) ||
        payload_bytes > static_cast<uint64_t>(file_bytes - at - static_cast<int64_t>(kBlockHeadBytes))) {
      result.truncated_bytes = file_bytes - at;
      break;
    }
    payload.resize(payload_bytes);
    if (!read_exactly(payload.data(), payload.size())) {
      result.truncated_bytes = file_bytes - at;
      break;
    }
    at += static_cast<int64_t>(kBlockHeadBytes + payload_bytes);
    text.clear();
    for (PayloadReader in(payload, spill_path); !in.done();) {
      const char tag = in.get<char>();
      if (tag == kNameTag) {
        const uint64_t ref = in.get<uint64_t>();
        const uint32_t bytes = in.get<uint32_t>();
        names[ref] = std::string(in.take(bytes));
        continue;
      }
      if (tag != kSpanTag) throw std::runtime_error(spill_path + ": unknown entry in a span spill (corrupt file)");
      const auto r = in.get<SpillRecord>();
      SpanRecord s;
      s.trace_id_high = r.trace_id_high;
      s.trace_id_low = r.trace_id_low;
      s.span_id = r.span_id;
      s.parent_span_id = r.parent_span_id;
      s.service = name(r.service);
      s.operation = name(r.operation);
      const std::string* launch = name(r.launch);
      const std::string* db_system = name(r.db_system);
      const std::string* store_role = name(r.store_role);
      s.launch = launch ? launch->c_str() : nullptr;
      s.db_system = db_system ? db_system->c_str() : nullptr;
      s.store_role = store_role ? store_role->c_str() : nullptr;
      s.followers = r.followers;
      s.start_ns = r.start_ns;
      s.end_ns = r.end_ns;
      s.probe = {r.trigger_async_fn_ns, r.fn_start_ns,     r.fn_end_ns,
                 r.request_val_ns,      r.val_received_ns, r.deferred != 0};
      s.status = static_cast<net::RpcStatus>(r.status);
      s.role = static_cast<SpanRole>(r.role);
      s.error = r.error != 0;
      s.cache = static_cast<trace::CacheResult>(r.cache);
      s.has_probe = r.has_probe != 0;
      append_span_line(&text, s, unix_offset_ns);
      ++result.spans;
    }
    out->append(text);
  }
  return result;
}

nlohmann::json decode_span_spill_file(const std::string& spill_path) {
  const std::string stem = read_header(open_spill(spill_path).get(), spill_path);
  if (stem.empty() || stem.find('/') != std::string::npos)
    throw std::runtime_error(spill_path + ": the span spill names no valid service ('" + stem + "')");
  std::filesystem::path dir = std::filesystem::path(spill_path).parent_path();
  if (dir.empty()) dir = ".";
  // NAME.spans.jsonl, unless a process of the same name (restarted after
  // the kill) finished and wrote it: then the spill's own suffix keeps both.
  std::filesystem::path target = dir / (stem + ".spans.jsonl");
  if (std::filesystem::exists(target)) {
    std::string suffix = std::filesystem::path(spill_path).extension().string();  // ".XXXXXX" of mkstemp
    std::erase_if(suffix, [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); });
    target = dir / (stem + "." + (suffix.empty() ? "recovered" : suffix) + ".spans.jsonl");
  }
  AtomicFileWriter out(target.string());
  const SpillConversion c = convert_span_spill(spill_path, &out);
  out.commit();
  return {{"spans", c.spans}, {"truncated_bytes", c.truncated_bytes}, {"path", out.path()}};
}

bool is_left_spill(std::string_view file_name) {
  return file_name.starts_with('.') && file_name.find(".spans.spill.tmp.") != std::string_view::npos;
}

}  // namespace tailscope::svc
