// What tracing costs per span, part by part (issue 30, "Tracing cost ≤ 2 %").
//
// Every benchmark iteration is one span, so a part's time per iteration is
// its ns/span. The parts are what a handler pays for a traced request —
//   clock_reads      the span's start and end stamps (two vDSO clock reads)
//   probe_stamps     the async probe's five stamps (async/deferred calls only)
//   sample_decision  the front's sampling decision (once per request)
//   id_generation    one span id (the front draws two more for the trace id)
//   build_record     filling the SpanRecord from the request
//   record_buffer    Tracer::record into the thread's buffer (a spiller drains it)
//   otlp_handoff     the live exporter's queue hand-off (OtlpExporter::offer)
// — and what runs off the handler's thread, per span:
//   spill_binary     one binary spill record + write(2) of 64 KiB blocks (the
//                    spiller's work during the run, span_spill.h)
//   encode           one NDJSON line (append_span_line, the file's format)
//   spill_write      encode + write(2) of 64 KiB blocks to a file (what the
//                    spiller did during the run before the binary spill)
// and, once per span when the service stops:
//   convert_at_stop  reading the binary spill back and encoding its NDJSON
//                    lines (convert_span_spill into an AtomicFileWriter)
// and the whole handler path of a front server span as runtime.cc does it, at
// 100 % and 1 % sampling, with a live spiller and OTLP exporter attached.
//
// Wall times are noisy on a shared machine: read the summary's ratios (part ÷
// whole path at 100 %), which come from one run. Instruction counts do not
// depend on load: `tracer_benchmark --parts=NAME[,NAME…] --spans=N` runs the
// parts in plain loops, each in its own function, and
// scripts/tracer-callgrind runs them under callgrind and prints instructions
// per span per part (docs/microservices.md, "What a span costs").
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/result_writer.h"
#include "exec/async_probe.h"
#include "svc/otlp_exporter.h"
#include "svc/span_spill.h"
#include "svc/tracer.h"

namespace tailscope::svc {
namespace {

const std::string kService = "compose-post";
const std::string kOperation = "/wrk2-api/post/compose";
constexpr size_t kWriteBlockBytes = 64 * 1024;
constexpr int64_t kSpillPeriodNs = 100'000'000;

std::filesystem::path scratch_dir() {
  return std::filesystem::temp_directory_path() / ("tailscope-tracer-benchmark-" + std::to_string(getpid()));
}

SpanRecord sample_span(uint64_t i) {
  SpanRecord s;
  s.trace_id_high = 0x0123456789abcdefULL ^ i;
  s.trace_id_low = 0xfedcba9876543210ULL + i;
  s.span_id = 0x1111222233334444ULL + i;
  s.parent_span_id = 0x5555666677778888ULL;
  s.service = &kService;
  s.operation = &kOperation;
  s.role = SpanRole::kClient;
  s.launch = "async";
  s.start_ns = 1'000'000'000 + static_cast<int64_t>(i) * 1000;
  s.end_ns = s.start_ns + 250'000;
  s.has_probe = true;
  s.probe = {s.start_ns - 5000, s.start_ns, s.end_ns, s.end_ns + 100, s.end_ns + 3000, false};
  return s;
}

// The parts, each over n spans. noinline: callgrind's --toggle-collect names
// them (scripts/tracer-callgrind), and the benchmarks below call the same code.
#define TRACER_PART __attribute__((noinline))

TRACER_PART void part_clock_reads(int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    benchmark::DoNotOptimize(monotonic_ns());
    benchmark::DoNotOptimize(monotonic_ns());
  }
}

TRACER_PART void part_probe_stamps(int64_t n) {
  exec::AsyncProbe p;
  for (int64_t i = 0; i < n; ++i) {
    p.stamp_trigger();
    p.stamp_fn_start();
    p.stamp_fn_end();
    p.stamp_request();
    p.stamp_received();
    benchmark::DoNotOptimize(p);
  }
}

TRACER_PART void part_sample_decision(int64_t n) {
  for (int64_t i = 0; i < n; ++i) benchmark::DoNotOptimize(Tracer::sample_root());
}

TRACER_PART void part_id_generation(int64_t n) {
  for (int64_t i = 0; i < n; ++i) benchmark::DoNotOptimize(Tracer::new_id());
}

TRACER_PART void part_build_record(int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    SpanRecord s;
    benchmark::DoNotOptimize(&s);
    s.trace_id_high = static_cast<uint64_t>(i);
    s.trace_id_low = static_cast<uint64_t>(i) + 1;
    s.parent_span_id = 7;
    s.span_id = static_cast<uint64_t>(i) + 2;
    s.service = &kService;
    s.operation = &kOperation;
    s.role = SpanRole::kServer;
    s.start_ns = i;
    s.end_ns = i + 1;
    s.status = net::RpcStatus::kOk;
    benchmark::DoNotOptimize(s);
  }
}

TRACER_PART void part_record_buffer(int64_t n, const SpanRecord& span) {
  for (int64_t i = 0; i < n; ++i) Tracer::record(span);
}

TRACER_PART void part_otlp_handoff(int64_t n, OtlpExporter& exporter, const SpanRecord& span) {
  for (int64_t i = 0; i < n; ++i) exporter.offer(span);
}

TRACER_PART void part_encode(int64_t n, const std::vector<SpanRecord>& spans, std::string* text) {
  for (int64_t i = 0; i < n; ++i) {
    if (text->size() >= kWriteBlockBytes) text->clear();
    append_span_line(text, spans[static_cast<size_t>(i) % spans.size()]);
  }
}

TRACER_PART void part_spill_write(int64_t n, const std::vector<SpanRecord>& spans, std::string* text, int fd) {
  for (int64_t i = 0; i < n; ++i) {
    append_span_line(text, spans[static_cast<size_t>(i) % spans.size()]);
    if (text->size() >= kWriteBlockBytes) {
      if (::write(fd, text->data(), text->size()) < 0) std::abort();
      text->clear();
    }
  }
}

// Appends n spans to the block open in `bytes`, writing each 64 KiB block out
// and opening the next; the caller opens the first and writes the last
// (finish_spill_blocks).
TRACER_PART void part_spill_binary(int64_t n, const std::vector<SpanRecord>& spans, SpillEncoder* encoder,
                                   std::string* bytes, int fd) {
  for (int64_t i = 0; i < n; ++i) {
    encoder->append(bytes, spans[static_cast<size_t>(i) % spans.size()]);
    if (bytes->size() >= kWriteBlockBytes) {
      encoder->end_block(bytes);
      if (::write(fd, bytes->data(), bytes->size()) < 0) std::abort();
      bytes->clear();
      encoder->begin_block(bytes, 0);
    }
  }
}

void finish_spill_blocks(SpillEncoder* encoder, std::string* bytes, int fd) {
  encoder->end_block(bytes);
  if (::write(fd, bytes->data(), bytes->size()) < 0) std::abort();
  bytes->clear();
}

// Writes a spill file of n spans (the header, then part_spill_binary's blocks).
bool write_spill_file(const std::string& path, int64_t n, const std::vector<SpanRecord>& spans) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  std::string bytes;
  SpillEncoder encoder;
  SpillEncoder::append_header(&bytes, "bench");
  encoder.begin_block(&bytes, 0);
  part_spill_binary(n, spans, &encoder, &bytes, fd);
  finish_spill_blocks(&encoder, &bytes, fd);
  ::close(fd);
  return true;
}

TRACER_PART int64_t part_convert_at_stop(const std::string& spill_path, const std::string& out_path) {
  AtomicFileWriter out(out_path);
  const int64_t spans = convert_span_spill(spill_path, &out).spans;
  out.commit();
  return spans;
}

// One front server span as runtime.cc's begin()/finish() make it: the
// sampling decision and the start stamp for every request; the trace and
// span ids, the end stamp and the record only for sampled ones (an unsampled
// request carries no ids: nothing downstream records or reads them).
TRACER_PART void part_whole_path(int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    SpanRecord s;
    const bool sampled = Tracer::sample_root();
    if (sampled) {
      s.trace_id_high = Tracer::new_id();
      s.trace_id_low = Tracer::new_id();
      s.span_id = Tracer::new_id();
    }
    s.service = &kService;
    s.operation = &kOperation;
    s.role = SpanRole::kServer;
    s.start_ns = monotonic_ns();
    if (sampled) {
      s.end_ns = monotonic_ns();
      s.status = net::RpcStatus::kOk;
      Tracer::record(s);
    }
    benchmark::DoNotOptimize(s);
  }
}

std::vector<SpanRecord> sample_spans() {
  std::vector<SpanRecord> spans;
  for (uint64_t i = 0; i < 256; ++i) spans.push_back(sample_span(i));
  return spans;
}

// The tracer as tailscope-svc runs it with --traces and --otlp-endpoint: a
// spiller draining the buffers to a file, an exporter whose queue holds the
// run's spans (not started: the benchmark times the hand-off, not HTTP).
struct LiveTracer {
  explicit LiveTracer(double sample_rate, size_t queue_spans) {
    Tracer::configure(sample_rate);
    Tracer::clear();
    OtlpExporterOptions options;
    options.queue_capacity_spans = queue_spans;
    exporter = std::make_unique<OtlpExporter>(parse_otlp_endpoint("http://127.0.0.1:9"), options);
    spiller = std::make_unique<SpanSpiller>(scratch_dir().string(), "bench", kSpillPeriodNs);
    Tracer::set_sink(exporter.get());
  }
  ~LiveTracer() {
    Tracer::set_sink(nullptr);
    spiller->finish();
    exporter->stop();
    Tracer::configure(0.0);
    Tracer::clear();
  }
  std::unique_ptr<OtlpExporter> exporter;
  std::unique_ptr<SpanSpiller> spiller;
};

// Iterations are fixed so that the exporter's queue (sized to them) never
// drops: a dropped span would time the cheap path.
constexpr int64_t kIterations = 1 << 18;

void BM_ClockReads(benchmark::State& state) {
  for (auto _ : state) part_clock_reads(1);
}
void BM_ProbeStamps(benchmark::State& state) {
  for (auto _ : state) part_probe_stamps(1);
}
void BM_SampleDecision1Percent(benchmark::State& state) {
  Tracer::configure(0.01);
  for (auto _ : state) part_sample_decision(1);
  Tracer::configure(0.0);
}
void BM_IdGeneration(benchmark::State& state) {
  for (auto _ : state) part_id_generation(1);
}
void BM_BuildRecord(benchmark::State& state) {
  for (auto _ : state) part_build_record(1);
}
void BM_RecordBuffer(benchmark::State& state) {
  Tracer::configure(1.0);
  Tracer::clear();
  SpanSpiller spiller(scratch_dir().string(), "bench-buffer", kSpillPeriodNs);
  const SpanRecord span = sample_span(1);
  for (auto _ : state) part_record_buffer(1, span);
  spiller.finish();
  Tracer::configure(0.0);
}
void BM_OtlpHandoff(benchmark::State& state) {
  OtlpExporterOptions options;
  options.queue_capacity_spans = static_cast<size_t>(state.max_iterations);
  OtlpExporter exporter(parse_otlp_endpoint("http://127.0.0.1:9"), options);
  const SpanRecord span = sample_span(1);
  for (auto _ : state) part_otlp_handoff(1, exporter, span);
  exporter.stop();
}
void BM_Encode(benchmark::State& state) {
  const auto spans = sample_spans();
  std::string text;
  text.reserve(2 * kWriteBlockBytes);
  int64_t i = 0;
  for (auto _ : state) {
    if (text.size() >= kWriteBlockBytes) text.clear();
    append_span_line(&text, spans[static_cast<size_t>(i++) % spans.size()]);
  }
}
void BM_SpillWrite(benchmark::State& state) {
  const auto spans = sample_spans();
  std::filesystem::create_directories(scratch_dir());
  const std::string path = (scratch_dir() / "spill-write.jsonl").string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    state.SkipWithError(("open " + path + ": " + std::strerror(errno)).c_str());
    return;
  }
  std::string text;
  text.reserve(2 * kWriteBlockBytes);
  for (auto _ : state) part_spill_write(1, spans, &text, fd);
  ::close(fd);
  std::filesystem::remove(path);
}
void BM_SpillBinary(benchmark::State& state) {
  const auto spans = sample_spans();
  std::filesystem::create_directories(scratch_dir());
  const std::string path = (scratch_dir() / "spill-binary.spill").string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    state.SkipWithError(("open " + path + ": " + std::strerror(errno)).c_str());
    return;
  }
  std::string bytes;
  bytes.reserve(2 * kWriteBlockBytes);
  SpillEncoder encoder;
  encoder.begin_block(&bytes, 0);
  for (auto _ : state) part_spill_binary(1, spans, &encoder, &bytes, fd);
  finish_spill_blocks(&encoder, &bytes, fd);
  ::close(fd);
  std::filesystem::remove(path);
}
void BM_WholePath(benchmark::State& state) {
  LiveTracer live(static_cast<double>(state.range(0)) / 100.0, static_cast<size_t>(state.max_iterations));
  for (auto _ : state) part_whole_path(1);
}

BENCHMARK(BM_ClockReads)->Iterations(kIterations);
BENCHMARK(BM_ProbeStamps)->Iterations(kIterations);
BENCHMARK(BM_SampleDecision1Percent)->Iterations(kIterations);
BENCHMARK(BM_IdGeneration)->Iterations(kIterations);
BENCHMARK(BM_BuildRecord)->Iterations(kIterations);
BENCHMARK(BM_RecordBuffer)->Iterations(kIterations);
BENCHMARK(BM_OtlpHandoff)->Iterations(kIterations);
BENCHMARK(BM_Encode)->Iterations(kIterations);
BENCHMARK(BM_SpillWrite)->Iterations(kIterations);
BENCHMARK(BM_SpillBinary)->Iterations(kIterations);
BENCHMARK(BM_WholePath)->Arg(100)->Arg(1)->ArgName("sample_percent")->Iterations(kIterations);

// Prints, after the usual table, each part's CPU ns/span and its ratio to the
// whole handler path at 100 % sampling, both from this run.
class PartsReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs)
      if (!run.error_occurred && run.run_type == Run::RT_Iteration)
        ns_per_span_[run.benchmark_name()] =
            run.GetAdjustedCPUTime() * 1e9 / benchmark::GetTimeUnitMultiplier(run.time_unit);
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    const auto whole = ns_per_span_.find("BM_WholePath/sample_percent:100/iterations:262144");
    std::printf("\nper span (CPU time of the recording thread; ratio to the whole path at 100 %% sampling):\n");
    for (const auto& [name, ns] : ns_per_span_) {
      std::string part = name.substr(0, name.find("/iterations:"));
      if (whole != ns_per_span_.end() && whole->second > 0)
        std::printf("  %-40s %8.1f ns/span  %6.3f of whole\n", part.c_str(), ns, ns / whole->second);
      else
        std::printf("  %-40s %8.1f ns/span  (whole path unavailable)\n", part.c_str(), ns);
    }
  }

 private:
  std::map<std::string, double> ns_per_span_;
};

// --parts=NAME[,NAME…] --spans=N: run the parts in plain loops (for callgrind).
int run_parts(std::string_view names, int64_t spans) {
  const auto all = sample_spans();
  std::string text;
  text.reserve(2 * kWriteBlockBytes);
  std::filesystem::create_directories(scratch_dir());
  auto has = [&](std::string_view part) {
    for (size_t at = 0; at <= names.size();) {
      size_t comma = names.find(',', at);
      if (comma == std::string_view::npos) comma = names.size();
      if (names.substr(at, comma - at) == part || names.substr(at, comma - at) == "all") return true;
      at = comma + 1;
    }
    return false;
  };
  int ran = 0;
  if (has("clock_reads")) ++ran, part_clock_reads(spans);
  if (has("probe_stamps")) ++ran, part_probe_stamps(spans);
  if (has("sample_decision")) {
    ++ran;
    Tracer::configure(0.01);
    part_sample_decision(spans);
    Tracer::configure(0.0);
  }
  if (has("id_generation")) ++ran, part_id_generation(spans);
  if (has("build_record")) ++ran, part_build_record(spans);
  if (has("record_buffer")) {
    ++ran;
    Tracer::configure(1.0);
    SpanSpiller spiller(scratch_dir().string(), "parts-buffer", kSpillPeriodNs);
    part_record_buffer(spans, all[1]);
    spiller.finish();
    Tracer::configure(0.0);
  }
  if (has("otlp_handoff")) {
    ++ran;
    OtlpExporterOptions options;
    options.queue_capacity_spans = static_cast<size_t>(spans);
    OtlpExporter exporter(parse_otlp_endpoint("http://127.0.0.1:9"), options);
    part_otlp_handoff(spans, exporter, all[1]);
    exporter.stop();
  }
  if (has("spill_binary")) {
    ++ran;
    const std::string path = (scratch_dir() / "parts-spill.spill").string();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return std::perror(path.c_str()), 1;
    text.clear();
    SpillEncoder encoder;
    encoder.begin_block(&text, 0);
    part_spill_binary(spans, all, &encoder, &text, fd);
    finish_spill_blocks(&encoder, &text, fd);
    ::close(fd);
  }
  if (has("convert_at_stop")) {
    ++ran;
    const std::string path = (scratch_dir() / "parts-convert.spill").string();
    if (!write_spill_file(path, spans, all)) return std::perror(path.c_str()), 1;
    if (part_convert_at_stop(path, (scratch_dir() / "parts-convert.spans.jsonl").string()) != spans) {
      std::fprintf(stderr, "convert_at_stop: the spill did not convert to %lld spans\n", static_cast<long long>(spans));
      return 1;
    }
  }
  if (has("encode")) ++ran, part_encode(spans, all, &text);
  if (has("spill_write")) {
    ++ran;
    const std::string path = (scratch_dir() / "parts-spill.jsonl").string();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return std::perror(path.c_str()), 1;
    text.clear();
    part_spill_write(spans, all, &text, fd);
    ::close(fd);
  }
  for (const int percent : {100, 1}) {
    if (!has(percent == 100 ? "whole_path_100" : "whole_path_1")) continue;
    ++ran;
    LiveTracer live(percent / 100.0, static_cast<size_t>(spans));
    part_whole_path(spans);
  }
  std::filesystem::remove_all(scratch_dir());
  if (ran == 0) {
    std::fprintf(stderr,
                 "--parts: none of '%.*s' is a part (clock_reads, probe_stamps, sample_decision, id_generation, "
                 "build_record, record_buffer, otlp_handoff, spill_binary, encode, spill_write, convert_at_stop, "
                 "whole_path_100, whole_path_1, "
                 "all)\n",
                 static_cast<int>(names.size()), names.data());
    return 2;
  }
  return 0;
}

}  // namespace
}  // namespace tailscope::svc

int main(int argc, char** argv) {
  std::string_view parts;
  int64_t spans = 100'000;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--parts=")) {
      parts = arg.substr(8);
    } else if (arg.starts_with("--spans=")) {
      char* end = nullptr;
      spans = std::strtoll(argv[i] + 8, &end, 10);
      if (*end != '\0' || spans < 1 || spans > 100'000'000) {
        std::fprintf(stderr, "--spans: expected an integer in 1 … 100000000, got '%s'\n", argv[i] + 8);
        return 2;
      }
    }
  }
  if (!parts.empty()) return tailscope::svc::run_parts(parts, spans);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  tailscope::svc::PartsReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  std::filesystem::remove_all(tailscope::svc::scratch_dir());
  return 0;
}
