// A distribution of durations (ns) with bounded memory: exact up to
// kExactSamples values, then log-linear buckets with <= 0.05 % relative error
// (HdrHistogram-like, 3 significant digits). Mean and CV are always exact.
//
// Why not core/hdr_histogram, the lab's one histogram type:
//  * Exactness. The analyzer's distributions are mostly small (per service,
//    per RPC edge, per distinct path, over the traces of one export), and
//    their percentiles must be exact nearest-rank values: the conformance
//    fixtures and the report compare them to the per-trace results to the
//    nanosecond. HdrHistogram reports bucket edges (3 significant digits)
//    from the first sample on; this type only buckets past 10 000 samples.
//  * Memory per instance. The aggregator keeps one per operation, service,
//    RPC edge and distinct critical path (up to 10 000 paths). HdrHistogram's
//    counts array is dense over its whole range — about 440 KB for the
//    ±2^62 ns that clamped span times can reach — while these buckets come in
//    8 KB groups allocated per power of two actually used.
// Everything that leaves the engine as a result/1 measurement uses the
// report's conventions (core/latency_summary: percentiles, tail samples,
// low confidence) on top of this type.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace tailscope::analyze {

class DurationDistribution {
 public:
  static constexpr std::size_t kExactSamples = 10'000;

  // Negative values count as 0. While exact, a sample is only appended: the
  // aggregator adds several per span, and the statistics are computed when
  // asked for.
  void add(std::int64_t ns) {
    if (ns < 0) ns = 0;
    moments_valid_ = false;
    if (!bucketed_) {
      values_.push_back(ns);
      sorted_ = false;
      if (values_.size() > kExactSamples) move_to_buckets();
      return;
    }
    add_to_buckets(ns);
  }
  std::uint64_t count() const { return count_ + values_.size(); }
  bool exact() const { return !bucketed_; }
  double mean() const;
  double stddev() const;  // population standard deviation
  double cv() const;      // stddev / mean; 0 when the mean is 0
  std::int64_t min() const;
  std::int64_t max() const;
  double sum() const;
  // Nearest-rank percentile, q in [0, 100]; 0 when empty.
  std::int64_t percentile(double q) const;
  // percentile(q) for every level of `qs` (ascending; otherwise one by one),
  // in one pass: one walk over the buckets; while exact, for a few levels a
  // selection (nth_element) around each rank instead of sorting every sample.
  // tailscope-critpath's result document asks p50, p90 and p99 of ~540
  // per-edge distributions of a few thousand samples each: sorting them was
  // most of the serial work left after the last trace (perf,
  // docs/measurements.md#trace-analyzer). Like percentile(), it takes the
  // moments before it reorders the samples: mean() and stddev() are the same
  // whichever is asked first.
  std::vector<std::int64_t> percentiles(const std::vector<double>& qs) const;

 private:
  struct Moments {
    double n = 0;
    double shift = 0;
    double shifted_sum = 0;
    double shifted_squares = 0;
    double sum = 0;
    std::int64_t min = 0;
    std::int64_t max = 0;
  };
  Moments compute_moments() const;
  // The nearest rank (1-based) of level q among n samples.
  static std::uint64_t rank_of(double q, std::uint64_t n);
  static std::uint32_t bucket_of(std::uint64_t v);
  static std::int64_t bucket_value(std::uint32_t bucket);
  void move_to_buckets();
  void add_to_buckets(std::int64_t ns);
  // The bucket values at `levels` ascending ranks (each in [1, count())), in
  // one walk: percentile() and percentiles() share it.
  void bucket_values(const std::uint64_t* ranks, std::size_t levels, std::int64_t* out) const;

  std::uint64_t count_ = 0;  // samples in buckets (values_ holds the others)
  // Sums of x - shift (the first value) and its squares: the shifted-data
  // variance, accurate without a division per sample.
  double shift_ = 0;
  double shifted_sum_ = 0;
  double shifted_squares_ = 0;
  double sum_ = 0;
  std::int64_t min_ = 0;
  std::int64_t max_ = 0;
  mutable std::vector<std::int64_t> values_;  // sorted lazily by percentile()
  mutable bool sorted_ = true;
  // The exact samples' moments, computed once per change: a result asks for
  // mean, stddev, cv, min, max and the top percentile, each of which would
  // otherwise walk every sample again (7.9 % of a 300 000-span analysis).
  mutable Moments moments_;
  mutable bool moments_valid_ = false;
  // Bucket counts in groups of 1024 (one group per power of two past 2047),
  // allocated when first used: a few groups cover the latencies of a service.
  static constexpr std::size_t kGroupSize = 1024;
  using Group = std::array<std::uint64_t, kGroupSize>;
  std::vector<std::unique_ptr<Group>> groups_;
  // Samples per group: a percentile skips whole groups below its rank (a
  // distribution of latencies up to seconds spans ~40 groups of 1024).
  std::vector<std::uint64_t> group_counts_;
  bool bucketed_ = false;
};

}  // namespace tailscope::analyze
