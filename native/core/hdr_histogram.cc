#include "core/hdr_histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace tailscope {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Smallest m with 2^m >= x (x >= 1).
int ceil_log2(int64_t x) {
  int m = 0;
  while ((int64_t{1} << m) < x) ++m;
  return m;
}

}  // namespace

HdrHistogram::HdrHistogram(int64_t lowest_discernible_value, int64_t highest_trackable_value, int significant_figures)
    : lowest_(lowest_discernible_value), highest_(highest_trackable_value), significant_figures_(significant_figures) {
  if (lowest_ < 1) {
    throw std::invalid_argument("HdrHistogram: lowest_discernible_value must be >= 1, got " + std::to_string(lowest_));
  }
  if (highest_ / 2 < lowest_) {
    throw std::invalid_argument("HdrHistogram: highest_trackable_value must be >= 2 * lowest_discernible_value, got " +
                                std::to_string(highest_) + " for lowest " + std::to_string(lowest_));
  }
  if (significant_figures_ < 0 || significant_figures_ > 5) {
    throw std::invalid_argument("HdrHistogram: significant_figures must be in 0..5, got " +
                                std::to_string(significant_figures_));
  }
  // Values below 2 * 10^digits must keep unit resolution, so a bucket holds
  // the next power of two above that many sub-buckets.
  int64_t largest_value_with_single_unit_resolution = 2;
  for (int i = 0; i < significant_figures_; ++i) largest_value_with_single_unit_resolution *= 10;
  const int sub_bucket_count_magnitude = ceil_log2(largest_value_with_single_unit_resolution);
  sub_bucket_half_count_magnitude_ = std::max(sub_bucket_count_magnitude, 1) - 1;
  unit_magnitude_ = 63 - __builtin_clzll(static_cast<uint64_t>(lowest_));
  if (unit_magnitude_ + sub_bucket_half_count_magnitude_ > 61) {
    throw std::invalid_argument("HdrHistogram: lowest_discernible_value too large for the requested precision");
  }
  sub_bucket_count_ = int64_t{1} << (sub_bucket_half_count_magnitude_ + 1);
  sub_bucket_half_count_ = sub_bucket_count_ / 2;
  sub_bucket_mask_ = static_cast<uint64_t>(sub_bucket_count_ - 1) << unit_magnitude_;
  leading_zero_count_base_ = 64 - unit_magnitude_ - (sub_bucket_half_count_magnitude_ + 1);

  // Buckets needed so that the range reaches past highest_trackable_value.
  int64_t smallest_untrackable_value = sub_bucket_count_ << unit_magnitude_;
  int buckets_needed = 1;
  while (smallest_untrackable_value <= highest_) {
    if (smallest_untrackable_value > kInt64Max / 2) {
      ++buckets_needed;
      break;
    }
    smallest_untrackable_value <<= 1;
    ++buckets_needed;
  }
  bucket_count_ = buckets_needed;
  counts_.assign(static_cast<size_t>(bucket_count_ + 1) * static_cast<size_t>(sub_bucket_half_count_), 0);
  min_value_ = kInt64Max;
  max_value_ = 0;
}

HdrHistogram HdrHistogram::for_latency_ns() { return HdrHistogram(1, 3'600'000'000'000, 3); }

bool HdrHistogram::record_n(int64_t value, int64_t count) noexcept {
  if (count <= 0) return count == 0;
  if (static_cast<uint64_t>(value) > static_cast<uint64_t>(highest_)) {
    out_of_range_ += count;
    return false;
  }
  counts_[counts_index_for(value)] += count;
  total_count_ += count;
  min_value_ = std::min(min_value_, value);
  max_value_ = std::max(max_value_, value);
  return true;
}

bool HdrHistogram::record_corrected(int64_t value, int64_t expected_interval) noexcept {
  if (!record(value)) return false;
  if (expected_interval <= 0 || value - expected_interval < expected_interval) return true;
  // The synthetic samples are the arithmetic progression
  // first, first + interval, ..., last = value - interval with first >= interval.
  const int64_t last = value - expected_interval;
  const int64_t synthetic_count = last / expected_interval;
  int64_t current = last - (synthetic_count - 1) * expected_interval;
  int64_t remaining = synthetic_count;
  while (remaining > 0) {
    // All progression members up to the top of current's bucket share its count slot.
    const int64_t bucket_top = std::min(highest_equivalent_value(current), last);
    const int64_t in_bucket = (bucket_top - current) / expected_interval + 1;
    record_n(current, in_bucket);
    current += in_bucket * expected_interval;
    remaining -= in_bucket;
  }
  return true;
}

void HdrHistogram::merge(const HdrHistogram& other) {
  out_of_range_ += other.out_of_range_;
  if (other.total_count_ == 0) return;
  if (same_layout(other)) {
    for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
    total_count_ += other.total_count_;
    min_value_ = std::min(min_value_, other.min_value_);
    max_value_ = std::max(max_value_, other.max_value_);
    return;
  }
  other.for_each_recorded([this](int64_t value, int64_t count) { record_n(value, count); });
}

void HdrHistogram::reset() noexcept {
  std::fill(counts_.begin(), counts_.end(), 0);
  total_count_ = 0;
  out_of_range_ = 0;
  min_value_ = kInt64Max;
  max_value_ = 0;
}

bool HdrHistogram::add_at_index(size_t index, int64_t count) noexcept {
  if (index >= counts_.size() || count < 0) return false;
  if (count == 0) return true;
  int64_t new_total;
  if (__builtin_add_overflow(total_count_, count, &new_total)) return false;
  int64_t new_count;
  if (__builtin_add_overflow(counts_[index], count, &new_count)) return false;
  counts_[index] = new_count;
  total_count_ = new_total;
  const int64_t value = value_from_index(index);
  min_value_ = std::min(min_value_, value);
  max_value_ = std::max(max_value_, value);
  return true;
}

int64_t HdrHistogram::min() const noexcept {
  if (total_count_ == 0) return 0;
  return lowest_equivalent_value(min_value_);
}

int64_t HdrHistogram::max() const noexcept {
  if (max_value_ == 0) return 0;
  return highest_equivalent_value(max_value_);
}

double HdrHistogram::mean() const noexcept {
  if (total_count_ == 0) return 0.0;
  double sum = 0.0;
  for_each_recorded([&](int64_t value, int64_t count) {
    sum += static_cast<double>(median_equivalent_value(value)) * static_cast<double>(count);
  });
  return sum / static_cast<double>(total_count_);
}

double HdrHistogram::stddev() const noexcept {
  if (total_count_ == 0) return 0.0;
  const double m = mean();
  double sum_sq = 0.0;
  for_each_recorded([&](int64_t value, int64_t count) {
    const double d = static_cast<double>(median_equivalent_value(value)) - m;
    sum_sq += d * d * static_cast<double>(count);
  });
  return std::sqrt(sum_sq / static_cast<double>(total_count_));
}

int64_t HdrHistogram::value_at_percentile(double percentile) const noexcept {
  if (total_count_ == 0) return 0;
  double p = percentile;
  if (!(p > 0.0)) p = 0.0;  // also maps NaN to 0
  if (p > 100.0) p = 100.0;
  // Rank ceil(p/100 * n). A product that is an integer up to floating-point
  // noise (99.9 % of 1000 = 999.0000000000001) is taken as that integer, so
  // that the rank does not jump one sample up; HdrHistogram (Java) removes
  // one ulp from the percentile for the same reason.
  const double fp_rank = p / 100.0 * static_cast<double>(total_count_);
  const double nearest = std::nearbyint(fp_rank);
  const double rank = std::fabs(fp_rank - nearest) <= 1e-9 * std::max(1.0, fp_rank) ? nearest : std::ceil(fp_rank);
  const int64_t value = value_at_rank(static_cast<int64_t>(rank));
  return p == 0.0 ? lowest_equivalent_value(value) : highest_equivalent_value(value);
}

int64_t HdrHistogram::value_at_rank(int64_t rank) const noexcept {
  if (total_count_ == 0) return 0;
  const int64_t target = std::clamp<int64_t>(rank, 1, total_count_);
  int64_t cumulative = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i];
    if (cumulative >= target) return value_from_index(i);
  }
  return 0;  // unreachable while total_count_ matches the counts
}

std::vector<PercentileStep> HdrHistogram::percentiles(int ticks_per_half_distance) const {
  if (ticks_per_half_distance < 1) {
    throw std::invalid_argument("HdrHistogram::percentiles: ticks_per_half_distance must be >= 1");
  }
  std::vector<PercentileStep> steps;
  if (total_count_ == 0) return steps;
  const double total = static_cast<double>(total_count_);
  double level = 0.0;
  int64_t cumulative = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] == 0) continue;
    cumulative += counts_[i];
    const int64_t value = highest_equivalent_value(value_from_index(i));
    if (cumulative == total_count_) {
      // The last recorded bucket: one step at the level reached, then the
      // closing step at exactly 100 % (HdrHistogram's PercentileIterator).
      steps.push_back({level, value, cumulative});
      steps.push_back({100.0, value, cumulative});
      break;
    }
    const double reached = 100.0 * static_cast<double>(cumulative) / total;
    while (reached >= level) {
      steps.push_back({level, value, cumulative});
      // Fixed-size ticks within each half of the remaining distance to 100 %:
      // the tick size halves each time a half-distance is crossed. Same
      // formula as HdrHistogram's, so the printed levels are identical.
      const double gap = 100.0 - level;
      if (!(gap > 0.0)) break;
      const double halvings = std::log(100.0 / gap) / std::log(2.0);
      const int64_t exponent = std::min<int64_t>(static_cast<int64_t>(halvings) + 1, 62);
      const double reporting_ticks =
          static_cast<double>(ticks_per_half_distance) * std::ldexp(1.0, static_cast<int>(exponent));
      level += 100.0 / reporting_ticks;
    }
  }
  return steps;
}

std::string HdrHistogram::percentile_spectrum_text(double value_unit_scale, int ticks_per_half_distance) const {
  std::string out;
  char line[256];
  const auto append = [&](int n) {
    if (n > 0) out.append(line, std::min<size_t>(static_cast<size_t>(n), sizeof(line) - 1));
  };
  append(std::snprintf(line, sizeof(line), "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount",
                       "1/(1-Percentile)"));
  const int digits = significant_figures_;
  for (const PercentileStep& step : percentiles(ticks_per_half_distance)) {
    const double value = static_cast<double>(step.value) / value_unit_scale;
    const double fraction = step.percentile / 100.0;
    const long long count = step.count_at_or_below;
    if (step.percentile != 100.0) {
      append(std::snprintf(line, sizeof(line), "%12.*f %2.12f %10lld %14.2f\n", digits, value, fraction, count,
                           1.0 / (1.0 - fraction)));
    } else {
      append(std::snprintf(line, sizeof(line), "%12.*f %2.12f %10lld\n", digits, value, fraction, count));
    }
  }
  append(std::snprintf(line, sizeof(line), "#[Mean    = %12.*f, StdDeviation   = %12.*f]\n", digits,
                       mean() / value_unit_scale, digits, stddev() / value_unit_scale));
  append(std::snprintf(line, sizeof(line), "#[Max     = %12.*f, Total count    = %12lld]\n", digits,
                       static_cast<double>(max()) / value_unit_scale, static_cast<long long>(total_count_)));
  append(std::snprintf(line, sizeof(line), "#[Buckets = %12d, SubBuckets     = %12lld]\n", bucket_count_,
                       static_cast<long long>(sub_bucket_count_)));
  return out;
}

int64_t HdrHistogram::value_from_index(size_t index) const noexcept {
  int bucket = static_cast<int>(index >> sub_bucket_half_count_magnitude_) - 1;
  int64_t sub_bucket =
      static_cast<int64_t>(index & static_cast<size_t>(sub_bucket_half_count_ - 1)) + sub_bucket_half_count_;
  if (bucket < 0) {
    sub_bucket -= sub_bucket_half_count_;
    bucket = 0;
  }
  return sub_bucket << (bucket + unit_magnitude_);
}

bool HdrHistogram::values_equivalent(int64_t a, int64_t b) const {
  return lowest_equivalent_value(a) == lowest_equivalent_value(b);
}

int64_t HdrHistogram::lowest_equivalent_value(int64_t v) const {
  const uint64_t value = v < 0 ? 0 : static_cast<uint64_t>(v);
  const int shift = bucket_index(value) + unit_magnitude_;
  return static_cast<int64_t>((value >> shift) << shift);
}

int64_t HdrHistogram::size_of_equivalent_value_range(int64_t v) const {
  const uint64_t value = v < 0 ? 0 : static_cast<uint64_t>(v);
  const int bucket = bucket_index(value);
  return int64_t{1} << (unit_magnitude_ + bucket);
}

int64_t HdrHistogram::highest_equivalent_value(int64_t v) const {
  // lowest + (size - 1) cannot overflow: the bucket of INT64_MAX ends at INT64_MAX.
  return lowest_equivalent_value(v) + (size_of_equivalent_value_range(v) - 1);
}

int64_t HdrHistogram::median_equivalent_value(int64_t v) const {
  return lowest_equivalent_value(v) + (size_of_equivalent_value_range(v) >> 1);
}

}  // namespace tailscope
