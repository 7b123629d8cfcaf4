// HdrHistogram: a fixed-memory, fixed-precision histogram of non-negative
// integer values (our latencies, in nanoseconds).
//
// The bucket layout is the one of Gil Tene's HdrHistogram, so that our counts
// array can be exchanged with the Java/C/Python implementations (V2 encoding,
// .hlog files) index for index:
//
//   * a value v lands in "bucket" b = floor(log2(v | sub_bucket_mask)) -
//     (unit_magnitude + sub_bucket_count_magnitude - 1); bucket 0 covers
//     [0, sub_bucket_count << unit_magnitude) with unit resolution, every later
//     bucket doubles the range and halves the resolution;
//   * inside bucket b, v >> (b + unit_magnitude) is the sub-bucket; only the
//     upper half of each bucket after the first is stored (the lower half is
//     the previous bucket), hence the (bucket_count + 1) * sub_bucket_half_count
//     counts.
//
// With 3 significant figures sub_bucket_count = 2048, so every value is stored
// with a relative error below 1/1024 (~0.1 %).
//
// record() is the hot path: one range check, one count-leading-zeros, two
// shifts, one increment. No allocation, no locks: a histogram belongs to one
// thread; merge() combines per-thread histograms afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tailscope {

struct PercentileStep {
  double percentile;          // the percentile level iterated to, 0..100
  int64_t value;              // highest value equivalent to the bucket reached
  int64_t count_at_or_below;  // samples at or below `value`
};

class HdrHistogram {
 public:
  // Throws std::invalid_argument unless lowest_discernible_value >= 1,
  // highest_trackable_value >= 2 * lowest_discernible_value and
  // 0 <= significant_figures <= 5 (HdrHistogram's own limits).
  HdrHistogram(int64_t lowest_discernible_value, int64_t highest_trackable_value, int significant_figures);

  // 1 ns .. 1 hour (3.6e12 ns), 3 significant digits: the lab's latency histogram.
  static HdrHistogram for_latency_ns();

  // False (and counted in out_of_range_count()) when value < 0 or
  // value > highest_trackable_value().
  bool record(int64_t value) noexcept {
    if (static_cast<uint64_t>(value) > static_cast<uint64_t>(highest_)) [[unlikely]] {
      ++out_of_range_;
      return false;
    }
    ++counts_[counts_index_for(value)];
    ++total_count_;
    min_value_ = value < min_value_ ? value : min_value_;
    max_value_ = value > max_value_ ? value : max_value_;
    return true;
  }

  // Records `count` occurrences of value. count == 0 is a no-op; count < 0 is
  // rejected (false) without touching the histogram.
  bool record_n(int64_t value, int64_t count) noexcept;

  // Coordinated-omission correction as in HdrHistogram's
  // recordValueWithExpectedInterval: records value, then value - k*interval
  // for k = 1, 2, ... while that is >= interval. The synthetic samples are
  // added bucket by bucket, so the cost is bounded by the number of buckets
  // even when value / interval is huge. interval <= 0 means no correction.
  bool record_corrected(int64_t value, int64_t expected_interval) noexcept;

  // Adds other's counts. With the same layout this is an element-wise sum;
  // otherwise each of other's buckets is recorded at its lowest value, and
  // buckets above this histogram's range are counted as out of range.
  void merge(const HdrHistogram& other);

  void reset() noexcept;

  int64_t total_count() const noexcept { return total_count_; }
  int64_t out_of_range_count() const noexcept { return out_of_range_; }

  // Both 0 when empty. As in HdrHistogram, min() is the lowest value of the
  // smallest recorded value's bucket and max() the highest value of the
  // largest one's, so a decoded histogram reports exactly what the original did.
  int64_t min() const noexcept;
  int64_t max() const noexcept;

  // Over bucket midpoints (HdrHistogram's medianEquivalentValue); 0 when empty.
  double mean() const noexcept;
  double stddev() const noexcept;

  // The smallest recorded value v (to bucket precision) such that at least
  // percentile % of the samples are <= v, i.e. the sample of rank
  // ceil(percentile/100 * total_count) (at least 1). Reported as the highest
  // value of its bucket, except percentile 0 which reports the lowest value
  // (the conventions of HdrHistogram). 0 when empty; percentile is clamped to
  // [0, 100].
  int64_t value_at_percentile(double percentile) const noexcept;

  // The bucket holding the sample of 1-based rank `rank` in value order (rank
  // clamped to [1, total_count]), as its lowest value (value_from_index): pass
  // it to lowest_/highest_equivalent_value for the bucket's bounds. 0 when
  // empty. value_at_percentile and the order-statistic intervals
  // (core/latency_summary.h) read ranks through it.
  int64_t value_at_rank(int64_t rank) const noexcept;

  // HdrHistogram's percentile iteration (outputPercentileDistribution):
  // starts at 0 %, takes ticks_per_half_distance equal steps in each half of
  // the remaining distance to 100 %, and ends with one step at exactly 100 %.
  // Empty when the histogram is empty.
  std::vector<PercentileStep> percentiles(int ticks_per_half_distance = 5) const;

  // The "Value Percentile TotalCount 1/(1-Percentile)" table printed by
  // HdrHistogram's outputPercentileDistribution and wrk2 --latency, values
  // divided by value_unit_scale (1000: ns -> us), with the
  // #[Mean ...] / #[Max ...] / #[Buckets ...] footer.
  std::string percentile_spectrum_text(double value_unit_scale = 1000.0, int ticks_per_half_distance = 5) const;

  int64_t lowest_discernible_value() const { return lowest_; }
  int64_t highest_trackable_value() const { return highest_; }
  int significant_figures() const { return significant_figures_; }
  int bucket_count() const { return bucket_count_; }
  int sub_bucket_count() const { return sub_bucket_count_; }

  // Value-space helpers; negative arguments are treated as 0.
  bool values_equivalent(int64_t a, int64_t b) const;  // same bucket
  int64_t lowest_equivalent_value(int64_t v) const;
  int64_t highest_equivalent_value(int64_t v) const;
  int64_t median_equivalent_value(int64_t v) const;
  int64_t size_of_equivalent_value_range(int64_t v) const;

  // Calls f(value_from_index, count) for every non-empty bucket, in value order.
  template <class F>
  void for_each_recorded(F&& f) const {
    for (size_t i = 0; i < counts_.size(); ++i) {
      if (counts_[i] != 0) f(value_from_index(i), counts_[i]);
    }
  }

  // Raw counts array access, for the V2 codec (hlog.cc) and tests.
  size_t counts_array_length() const noexcept { return counts_.size(); }
  int64_t count_at_index(size_t index) const noexcept { return counts_[index]; }
  int64_t value_from_index(size_t index) const noexcept;
  // Index of value's bucket; value must be in [0, highest_trackable_value()].
  size_t counts_index_for(int64_t value) const noexcept {
    const int bucket = leading_zero_count_base_ - __builtin_clzll(static_cast<uint64_t>(value) | sub_bucket_mask_);
    const int64_t sub_bucket = value >> (bucket + unit_magnitude_);
    return (static_cast<size_t>(bucket + 1) << sub_bucket_half_count_magnitude_) +
           static_cast<size_t>(sub_bucket - sub_bucket_half_count_);
  }
  // Adds count (> 0) at a counts index as a decoder does; false if index is
  // out of the array or the total would overflow.
  bool add_at_index(size_t index, int64_t count) noexcept;

  // Same parameters => same counts array layout.
  bool same_layout(const HdrHistogram& other) const noexcept {
    return lowest_ == other.lowest_ && highest_ == other.highest_ && significant_figures_ == other.significant_figures_;
  }

 private:
  int bucket_index(uint64_t v) const noexcept {
    return leading_zero_count_base_ - __builtin_clzll(v | sub_bucket_mask_);
  }

  int64_t lowest_;
  int64_t highest_;
  int significant_figures_;
  int unit_magnitude_;
  int sub_bucket_half_count_magnitude_;
  int64_t sub_bucket_count_;
  int64_t sub_bucket_half_count_;
  uint64_t sub_bucket_mask_;
  int bucket_count_;
  int leading_zero_count_base_;

  std::vector<int64_t> counts_;
  int64_t total_count_ = 0;
  int64_t out_of_range_ = 0;
  int64_t min_value_;  // smallest recorded value (raw), INT64_MAX when empty
  int64_t max_value_;  // largest recorded value (raw), 0 when empty
};

}  // namespace tailscope
