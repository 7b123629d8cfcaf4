// Cost of HdrHistogram::record(), the call on every timed path of the lab.
// One benchmark iteration = one record, so "Time" is ns per record. The
// baseline is the floor any histogram pays: one increment of a counter
// picked by the value (a 64 Ki-entry table, no bucketing). At the end the
// run prints record() / baseline, measured side by side in this process.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/hdr_histogram.h"
#include "core/hlog.h"

namespace tailscope {
namespace {

constexpr size_t kValueCount = 1 << 16;  // fits in L2 with the counts

// Latency-like values: log-normal around ~60 us with a heavy tail.
const std::vector<int64_t>& latency_values_ns() {
  static const std::vector<int64_t> values = [] {
    std::mt19937_64 rng(7);
    std::lognormal_distribution<double> dist(11.0, 1.2);
    std::vector<int64_t> v(kValueCount);
    for (auto& x : v) x = std::min<int64_t>(static_cast<int64_t>(dist(rng)), 3'600'000'000'000);
    return v;
  }();
  return values;
}

void BM_Baseline_ArrayIncrement(benchmark::State& state) {
  const std::vector<int64_t>& values = latency_values_ns();
  std::vector<int64_t> counts(1 << 16);
  size_t i = 0;
  for (auto _ : state) {
    ++counts[static_cast<size_t>(values[i]) & 0xffff];
    i = (i + 1) & (kValueCount - 1);
  }
  benchmark::DoNotOptimize(counts.data());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_ArrayIncrement);

void BM_Record(benchmark::State& state) {
  const std::vector<int64_t>& values = latency_values_ns();
  HdrHistogram h = HdrHistogram::for_latency_ns();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(h.record(values[i]));
    i = (i + 1) & (kValueCount - 1);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Record);

void BM_RecordCorrected_NoStall(benchmark::State& state) {
  const std::vector<int64_t>& values = latency_values_ns();
  HdrHistogram h = HdrHistogram::for_latency_ns();
  size_t i = 0;
  for (auto _ : state) {
    // Interval above every value: the common case costs one record().
    benchmark::DoNotOptimize(h.record_corrected(values[i], 3'600'000'000'000));
    i = (i + 1) & (kValueCount - 1);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordCorrected_NoStall);

void BM_ValueAtPercentile99(benchmark::State& state) {
  HdrHistogram h = HdrHistogram::for_latency_ns();
  for (int64_t v : latency_values_ns()) h.record(v);
  for (auto _ : state) benchmark::DoNotOptimize(h.value_at_percentile(99.0));
}
BENCHMARK(BM_ValueAtPercentile99);

void BM_EncodeCompressedBase64(benchmark::State& state) {
  HdrHistogram h = HdrHistogram::for_latency_ns();
  for (int64_t v : latency_values_ns()) h.record(v);
  for (auto _ : state) benchmark::DoNotOptimize(encode_compressed_base64(h));
}
BENCHMARK(BM_EncodeCompressedBase64)->Unit(benchmark::kMicrosecond);

// Remembers ns/iteration per benchmark so main() can print the ratio.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration) continue;
      const double to_ns = run.time_unit == benchmark::kMicrosecond   ? 1e3
                           : run.time_unit == benchmark::kMillisecond ? 1e6
                                                                      : 1.0;
      ns_per_iteration[run.benchmark_name()] = run.GetAdjustedCPUTime() * to_ns;
    }
  }
  std::map<std::string, double> ns_per_iteration;
};

}  // namespace
}  // namespace tailscope

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  tailscope::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const auto& ns = reporter.ns_per_iteration;
  const auto record = ns.find("BM_Record");
  const auto baseline = ns.find("BM_Baseline_ArrayIncrement");
  if (record != ns.end() && baseline != ns.end() && baseline->second > 0) {
    std::printf("record(): %.2f ns/record; baseline array increment: %.2f ns; ratio %.2fx\n", record->second,
                baseline->second, record->second / baseline->second);
  }
  benchmark::Shutdown();
  return 0;
}
