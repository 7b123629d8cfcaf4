// Turning a histogram into the numbers a result document reports.
//
// Every percentile carries how many samples lie beyond it, and is marked
// low-confidence when fewer than kMinTailSamples do: a p99.9 from 500 samples
// is one sample's worth of tail, and the report says so instead of hiding it.
//
// Every percentile also carries a distribution-free confidence interval from
// order statistics: for the q-quantile of n samples, the ranks l < u with
// P(l <= B < u) >= level for B ~ Binomial(n, q) (B counts the samples below
// the true quantile, whatever the distribution), read back from the histogram
// as values. Exact, no resampling; unavailable (with the reason) when n is
// too small for a two-sided interval at that quantile, never a fake interval.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/hdr_histogram.h"

namespace tailscope {

inline constexpr double kMinTailSamples = 10.0;
inline constexpr double kIntervalLevel = 0.95;

// {"unit":"ns","count":N,"min":..,"mean":..,"stddev":..,"max":..,
//  "percentiles":{"50":..,"90":..,"99":..,"99.9":..,"99.99":..},
//  "tail_samples":{"99.9": 1.2, ...}, "low_confidence":["99.9","99.99"],
//  "percentile_ci":{"50":[lo,hi], ...}, "percentile_ci_level":0.95,
//  "percentile_ci_unavailable":{"99.99":"fewer than 36887 samples"},
//  "out_of_range": n}
nlohmann::json latency_summary(const HdrHistogram& histogram);

// The percentile keys used everywhere (report, store): "50","90","99","99.9","99.99".
const std::vector<std::pair<std::string, double>>& reported_percentiles();

// 1-based ranks of the order statistics X_(lower_rank) <= X_(upper_rank) that
// bound the q-quantile of n samples with probability >= level (equal tails:
// P(B < lower_rank) <= (1-level)/2 and P(B >= upper_rank) <= (1-level)/2, the
// largest lower_rank and the smallest upper_rank that do so). `coverage` is
// the exact P(lower_rank <= B < upper_rank) of the chosen ranks (>= level;
// above it because B is discrete).
struct OrderStatisticRanks {
  int64_t lower_rank;
  int64_t upper_rank;
  double coverage;
};

// nullopt when no two-sided interval exists: n < min_samples_for_interval(q, level),
// or q outside (0, 1), or level outside (0, 1).
std::optional<OrderStatisticRanks> order_statistic_ranks(int64_t n, double q, double level = kIntervalLevel);

// The smallest n with an interval at q: both extreme ranks must be allowed,
// (1-q)^n <= (1-level)/2 for rank 1 and q^n <= (1-level)/2 for rank n
// (p50: 6, p99: 368, p99.9: 3688, p99.99: 36887 at 95 %). 0 when q or level
// is outside (0, 1).
int64_t min_samples_for_interval(double q, double level = kIntervalLevel);

// The interval of a histogram's percentile (0 < percentile < 100), in the
// histogram's values: `lo` is the lowest value of the bucket holding rank
// lower_rank and `hi` the highest value of the bucket holding upper_rank, so
// the bucketing only widens the interval (coverage stays >= level) and
// lo <= value_at_percentile(percentile) <= hi. `unavailable` says why there
// is none ("" when there is one).
struct PercentileInterval {
  int64_t lo = 0;
  int64_t hi = 0;
  std::optional<OrderStatisticRanks> ranks;
  std::string unavailable;
};
PercentileInterval percentile_interval(const HdrHistogram& histogram, double percentile, double level = kIntervalLevel);

// Human-readable lines (one per key, e.g. {"99", "99.9"}) of a latency_summary:
//   "  p99     1234.567 us  95 % CI [1200.191 – 1300.479] us  12.3 samples beyond"
// with "CI unavailable: <reason>" when the summary has none, and "low confidence"
// when fewer than kMinTailSamples lie beyond. Values divided by value_unit_scale
// (1000: ns -> us, the unit of HdrHistogram's spectrum text).
std::string percentile_interval_text(const nlohmann::json& summary, const std::vector<std::string>& keys,
                                     double value_unit_scale = 1000.0, const std::string& unit = "us");

}  // namespace tailscope

namespace tailscope {
// The percentile spectrum as [[value_ns, percentile], ...] (HdrHistogram
// percentile iteration, ~10 points per halving of the tail): what the
// report's latency CDFs are drawn from.
nlohmann::json latency_cdf(const HdrHistogram& histogram, int ticks_per_half_distance = 5);
}  // namespace tailscope
