#include "analyze/duration_distribution.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tailscope::analyze {

namespace {
constexpr int kSubBucketBits = 11;  // 2048 sub-buckets per power of two
constexpr std::uint64_t kSubBuckets = std::uint64_t{1} << kSubBucketBits;
constexpr std::uint64_t kHalf = kSubBuckets / 2;
}  // namespace

void DurationDistribution::add_to_buckets(std::int64_t ns) {
  ++count_;
  const double x = static_cast<double>(ns);
  if (count_ == 1) {
    shift_ = x;
    min_ = max_ = ns;
  }
  const double d = x - shift_;
  shifted_sum_ += d;
  shifted_squares_ += d * d;
  sum_ += x;
  min_ = std::min(min_, ns);
  max_ = std::max(max_, ns);
  const std::uint32_t bucket = bucket_of(static_cast<std::uint64_t>(ns));
  const std::size_t group = bucket / kGroupSize;
  if (group >= groups_.size()) {
    groups_.resize(group + 1);
    group_counts_.resize(group + 1, 0);
  }
  if (!groups_[group]) groups_[group] = std::make_unique<Group>();
  ++(*groups_[group])[bucket % kGroupSize];
  ++group_counts_[group];
}

void DurationDistribution::move_to_buckets() {
  bucketed_ = true;
  std::vector<std::int64_t> values;
  values.swap(values_);
  for (std::int64_t v : values) add_to_buckets(v);
}

std::uint32_t DurationDistribution::bucket_of(std::uint64_t v) {
  if (v < kSubBuckets) return static_cast<std::uint32_t>(v);
  const int shift = std::bit_width(v) - kSubBucketBits;  // >= 1
  return static_cast<std::uint32_t>(kSubBuckets + static_cast<std::uint64_t>(shift - 1) * kHalf +
                                    ((v >> shift) - kHalf));
}

std::int64_t DurationDistribution::bucket_value(std::uint32_t bucket) {
  if (bucket < kSubBuckets) return bucket;
  const std::uint64_t k = bucket - kSubBuckets;
  const int shift = static_cast<int>(k / kHalf) + 1;
  const std::uint64_t low = (k % kHalf + kHalf) << shift;
  return static_cast<std::int64_t>(low + (std::uint64_t{1} << (shift - 1)));  // bucket middle
}

// Statistics of the exact samples are computed on demand (shifted data, like
// the buckets' running sums).
DurationDistribution::Moments DurationDistribution::compute_moments() const {
  if (values_.empty())
    return Moments{static_cast<double>(count_), shift_, shifted_sum_, shifted_squares_, sum_, min_, max_};
  if (moments_valid_) return moments_;
  Moments m;
  m.n = static_cast<double>(values_.size());
  m.shift = static_cast<double>(values_[0]);
  m.min = m.max = values_[0];
  for (std::int64_t v : values_) {
    const double d = static_cast<double>(v) - m.shift;
    m.shifted_sum += d;
    m.shifted_squares += d * d;
    m.sum += static_cast<double>(v);
    m.min = std::min(m.min, v);
    m.max = std::max(m.max, v);
  }
  moments_ = m;
  moments_valid_ = true;
  return m;
}

double DurationDistribution::mean() const {
  const Moments m = compute_moments();
  return m.n > 0 ? m.shift + m.shifted_sum / m.n : 0.0;
}

double DurationDistribution::stddev() const {
  const Moments m = compute_moments();
  if (m.n <= 0) return 0.0;
  return std::sqrt(std::max(0.0, (m.shifted_squares - m.shifted_sum * m.shifted_sum / m.n) / m.n));
}

std::int64_t DurationDistribution::min() const { return compute_moments().min; }
std::int64_t DurationDistribution::max() const { return compute_moments().max; }
double DurationDistribution::sum() const { return compute_moments().sum; }

double DurationDistribution::cv() const {
  const double mu = mean();
  return mu > 0 ? stddev() / mu : 0.0;
}

std::uint64_t DurationDistribution::rank_of(double q, std::uint64_t n) {
  q = std::clamp(q, 0.0, 100.0);
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(q / 100.0 * static_cast<double>(n) - 1e-9)));
}

std::int64_t DurationDistribution::percentile(double q) const {
  const std::uint64_t n = count();
  if (n == 0) return 0;
  const std::uint64_t rank = rank_of(q, n);
  if (rank >= n) return max();
  if (!bucketed_) {
    if (!sorted_) {
      // The moments over the samples in the order added: mean() and stddev()
      // (double sums) do not depend on whether a percentile came first.
      compute_moments();
      std::sort(values_.begin(), values_.end());
      sorted_ = true;
    }
    return values_[std::min<std::uint64_t>(rank, values_.size()) - 1];
  }
  std::int64_t value = max_;
  bucket_values(&rank, 1, &value);
  return value;
}

void DurationDistribution::bucket_values(const std::uint64_t* ranks, std::size_t levels, std::int64_t* out) const {
  std::size_t i = 0;
  std::uint64_t seen = 0;
  for (std::size_t group = 0; group < groups_.size() && i < levels; ++group) {
    if (seen + group_counts_[group] < ranks[i]) {  // not in this group: skip its 1024 buckets
      seen += group_counts_[group];
      continue;
    }
    for (std::size_t b = 0; b < kGroupSize && i < levels; ++b) {
      seen += (*groups_[group])[b];
      if (seen < ranks[i]) continue;
      const std::int64_t value =
          std::clamp(bucket_value(static_cast<std::uint32_t>(group * kGroupSize + b)), min_, max_);
      while (i < levels && seen >= ranks[i]) out[i++] = value;
    }
  }
  for (; i < levels; ++i) out[i] = max_;
}

std::vector<std::int64_t> DurationDistribution::percentiles(const std::vector<double>& qs) const {
  std::vector<std::int64_t> out(qs.size(), 0);
  const std::uint64_t n = count();
  if (n == 0) return out;
  if (!std::is_sorted(qs.begin(), qs.end())) {
    for (std::size_t i = 0; i < qs.size(); ++i) out[i] = percentile(qs[i]);
    return out;
  }
  // Past this many levels a sort costs less than a selection per level.
  constexpr std::size_t kMaxSelections = 8;
  if (!bucketed_ && !sorted_ && qs.size() <= kMaxSelections) {
    compute_moments();  // over the samples in the order added, as percentile() does
    // values_[0, from) holds nothing above the ranks already selected: each
    // later (larger) rank lies in [from, end).
    std::size_t from = 0;
    for (std::size_t i = 0; i < qs.size(); ++i) {
      const std::uint64_t rank = rank_of(qs[i], n);
      if (rank >= n) {
        out[i] = max();
        continue;
      }
      const std::size_t at = static_cast<std::size_t>(rank - 1);
      if (at > from || i == 0) {
        std::nth_element(values_.begin() + static_cast<std::ptrdiff_t>(from),
                         values_.begin() + static_cast<std::ptrdiff_t>(at), values_.end());
        from = at;
      }
      out[i] = values_[at];
    }
    return out;
  }
  if (!bucketed_) {
    for (std::size_t i = 0; i < qs.size(); ++i) out[i] = percentile(qs[i]);  // sorts once, then indexes
    return out;
  }
  // One walk over the buckets for every rank, in ascending order; the levels
  // whose rank is the last sample's are the maximum, as in percentile().
  std::size_t levels = qs.size();
  while (levels > 0 && rank_of(qs[levels - 1], n) >= n) out[--levels] = max_;
  std::vector<std::uint64_t> ranks(levels);
  for (std::size_t i = 0; i < levels; ++i) ranks[i] = rank_of(qs[i], n);
  bucket_values(ranks.data(), levels, out.data());
  return out;
}

}  // namespace tailscope::analyze
