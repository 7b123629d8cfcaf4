// The order-statistic intervals of core/latency_summary: the ranks against
// exact binomial values, and their read-back from a histogram.
#include "core/latency_summary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace tailscope {
namespace {

// Ranks from the definition, by an independent route: every binomial
// probability from log-gamma, the CDF summed from 0 (no window, no recurrence).
std::optional<OrderStatisticRanks> ranks_by_definition(int64_t n, double q, double level) {
  const long double tail = (1.0L - level) / 2.0L, nd = static_cast<long double>(n), ql = q;
  std::vector<long double> cdf;  // cdf[k] = P(B <= k)
  long double sum = 0.0L;
  for (int64_t k = 0; k <= n; ++k) {
    const long double kd = static_cast<long double>(k);
    sum += std::exp(std::lgamma(nd + 1) - std::lgamma(kd + 1) - std::lgamma(nd - kd + 1) + kd * std::log(ql) +
                    (nd - kd) * std::log1p(-ql));
    cdf.push_back(sum);
  }
  int64_t lower = 0, upper = 0;
  for (int64_t k = 1; k <= n; ++k)
    if (cdf[static_cast<size_t>(k - 1)] <= tail) lower = k;
  for (int64_t k = n; k >= 1; --k)
    if (1.0L - cdf[static_cast<size_t>(k - 1)] <= tail) upper = k;
  if (lower == 0 || upper == 0) return std::nullopt;
  // P(lower <= B < upper) = P(B <= upper - 1) - P(B <= lower - 1).
  return OrderStatisticRanks{
      lower, upper, static_cast<double>(cdf[static_cast<size_t>(upper - 1)] - cdf[static_cast<size_t>(lower - 1)])};
}

struct Exact {
  int64_t n;
  double q;
  int64_t lower, upper;  // 0, 0: no interval
  double coverage;
};

TEST(OrderStatisticRanks, MatchExactBinomialValues) {
  // From scipy.stats.binom (cdf/sf), an implementation independent of this one:
  // lower = the largest k >= 1 with cdf(k-1) <= 0.025, upper = the smallest k <= n
  // with sf(k-1) <= 0.025, coverage = cdf(upper-1) - cdf(lower-1).
  const Exact cases[] = {
      {6, 0.5, 1, 6, 0.96875},
      {5, 0.5, 0, 0, 0.0},
      {100, 0.5, 40, 61, 0.9647997997822952},  // the textbook median interval of 100 samples
      {1000, 0.5, 469, 532, 0.9537088026395018},
      {1000, 0.9, 881, 919, 0.9549071811148259},
      {1000, 0.99, 983, 997, 0.976094763497977},
      {368, 0.99, 360, 368, 0.9624158204108587},
      {367, 0.99, 0, 0, 0.0},
      {3688, 0.999, 3680, 3688, 0.9616237518034272},
      {3687, 0.999, 0, 0, 0.0},
      {10000, 0.999, 9983, 9997, 0.9754574618536163},
      {100000, 0.9999, 99983, 99997, 0.9753934511437041},
  };
  for (const Exact& c : cases) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " q=" << c.q);
    const auto r = order_statistic_ranks(c.n, c.q, 0.95);
    if (c.lower == 0) {
      EXPECT_FALSE(r.has_value());
      continue;
    }
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->lower_rank, c.lower);
    EXPECT_EQ(r->upper_rank, c.upper);
    EXPECT_NEAR(r->coverage, c.coverage, 1e-9);
  }
}

TEST(OrderStatisticRanks, AgreeWithTheDefinitionForEverySmallN) {
  int compared = 0;
  for (double q : {0.5, 0.9, 0.99}) {
    for (int64_t n = 1; n <= 600; n += 7) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " q=" << q);
      const auto expected = ranks_by_definition(n, q, 0.95);
      const auto got = order_statistic_ranks(n, q, 0.95);
      ASSERT_EQ(got.has_value(), expected.has_value());
      if (!got) continue;
      ++compared;
      EXPECT_EQ(got->lower_rank, expected->lower_rank);
      EXPECT_EQ(got->upper_rank, expected->upper_rank);
      EXPECT_NEAR(got->coverage, expected->coverage, 1e-9);
      EXPECT_GE(got->coverage, 0.95);
      EXPECT_LT(got->lower_rank, got->upper_rank);
    }
  }
  EXPECT_GT(compared, 150);
}

TEST(OrderStatisticRanks, LargeNFollowsTheNormalApproximation) {
  // n = 1e9: the window keeps this to ~1e5 steps; the exact ranks sit within a few
  // ranks of n q -/+ 1.96 sqrt(n q (1-q)) (the skew correction is O(1)).
  const int64_t n = 1'000'000'000;
  const double q = 0.99, sd = std::sqrt(1e9 * q * (1 - q));
  const auto r = order_statistic_ranks(n, q, 0.95);
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR(static_cast<double>(r->lower_rank), 1e9 * q - 1.959964 * sd, 5.0);
  EXPECT_NEAR(static_cast<double>(r->upper_rank), 1e9 * q + 1.959964 * sd + 1.0, 5.0);
  EXPECT_GE(r->coverage, 0.95);
  EXPECT_LT(r->coverage, 0.9501);  // at this n the discreteness hardly adds coverage
}

TEST(OrderStatisticRanks, MinimumSamplesIsWhereAnIntervalFirstExists) {
  EXPECT_EQ(min_samples_for_interval(0.5), 6);
  EXPECT_EQ(min_samples_for_interval(0.99), 368);
  EXPECT_EQ(min_samples_for_interval(0.999), 3688);
  EXPECT_EQ(min_samples_for_interval(0.9999), 36887);
  for (const auto& [key, p] : reported_percentiles()) {
    SCOPED_TRACE(key);
    const int64_t n = min_samples_for_interval(p / 100.0);
    EXPECT_TRUE(order_statistic_ranks(n, p / 100.0).has_value());
    EXPECT_FALSE(order_statistic_ranks(n - 1, p / 100.0).has_value());
  }
  EXPECT_EQ(min_samples_for_interval(0.0), 0);
  EXPECT_EQ(min_samples_for_interval(1.0), 0);
  EXPECT_FALSE(order_statistic_ranks(1000, 1.0).has_value());
  EXPECT_FALSE(order_statistic_ranks(0, 0.5).has_value());
}

TEST(PercentileInterval, ReadsTheRanksBackAsValues) {
  // Values 1..1000 once each: below 2048 the histogram is exact, so X_(k) = k.
  HdrHistogram h = HdrHistogram::for_latency_ns();
  for (int64_t v = 1; v <= 1000; ++v) h.record(v);
  const PercentileInterval p50 = percentile_interval(h, 50.0);
  ASSERT_EQ(p50.unavailable, "");
  EXPECT_EQ(p50.lo, 469);
  EXPECT_EQ(p50.hi, 532);
  const PercentileInterval p99 = percentile_interval(h, 99.0);
  EXPECT_EQ(p99.lo, 983);
  EXPECT_EQ(p99.hi, 997);
  const PercentileInterval p9999 = percentile_interval(h, 99.99);
  EXPECT_EQ(p9999.unavailable, "fewer than 36887 samples");
  EXPECT_FALSE(p9999.ranks.has_value());
  EXPECT_EQ(percentile_interval(HdrHistogram::for_latency_ns(), 50.0).unavailable, "no samples recorded");
}

TEST(PercentileInterval, WidensToTheBucketsHoldingTheRanks) {
  // Values k * 1013 ns: above 2048 each lands in a bucket wider than 1 ns.
  HdrHistogram h = HdrHistogram::for_latency_ns();
  std::vector<int64_t> sorted;
  for (int64_t k = 1; k <= 5000; ++k) sorted.push_back(k * 1013);
  for (int64_t v : sorted) h.record(v);
  int checked = 0;
  for (const auto& [key, p] : reported_percentiles()) {
    SCOPED_TRACE(key);
    const PercentileInterval iv = percentile_interval(h, p);
    if (!iv.unavailable.empty()) continue;
    ++checked;
    const int64_t x_lower = sorted[static_cast<size_t>(iv.ranks->lower_rank - 1)];
    const int64_t x_upper = sorted[static_cast<size_t>(iv.ranks->upper_rank - 1)];
    EXPECT_EQ(iv.lo, h.lowest_equivalent_value(x_lower));
    EXPECT_EQ(iv.hi, h.highest_equivalent_value(x_upper));
    EXPECT_LE(iv.lo, x_lower);
    EXPECT_GE(iv.hi, x_upper);
    EXPECT_LE(iv.lo, h.value_at_percentile(p));
    EXPECT_GE(iv.hi, h.value_at_percentile(p));
  }
  EXPECT_EQ(checked, 4);  // 5000 samples: every reported percentile but p99.99
}

TEST(LatencySummary, CarriesIntervalsBesideTheExistingKeys) {
  HdrHistogram h = HdrHistogram::for_latency_ns();
  for (int64_t v = 1; v <= 1000; ++v) h.record(v);
  const nlohmann::json s = latency_summary(h);
  for (const char* key : {"unit", "count", "out_of_range", "min", "mean", "stddev", "max", "percentiles",
                          "tail_samples", "low_confidence"})
    EXPECT_TRUE(s.contains(key)) << key;
  EXPECT_EQ(s["percentile_ci_level"], 0.95);
  EXPECT_EQ(s["percentile_ci"]["50"], nlohmann::json({469, 532}));
  EXPECT_EQ(s["percentile_ci"]["99"], nlohmann::json({983, 997}));
  EXPECT_FALSE(s["percentile_ci"].contains("99.9"));
  EXPECT_EQ(s["percentile_ci_unavailable"]["99.9"], "fewer than 3688 samples");
  EXPECT_EQ(s["percentile_ci_unavailable"]["99.99"], "fewer than 36887 samples");
  // Every reported percentile is in exactly one of the two.
  for (const auto& [key, p] : reported_percentiles())
    EXPECT_NE(s["percentile_ci"].contains(key), s["percentile_ci_unavailable"].contains(key)) << key;

  const nlohmann::json empty = latency_summary(HdrHistogram::for_latency_ns());
  EXPECT_FALSE(empty.contains("percentile_ci"));
  EXPECT_EQ(empty["unavailable"], "no samples recorded");
}

TEST(PercentileIntervalText, PrintsTheIntervalOrWhyNotAndTheLowConfidenceMark) {
  HdrHistogram h = HdrHistogram::for_latency_ns();
  for (int64_t v = 1; v <= 1000; ++v) h.record(v * 1000);  // 1 us .. 1 ms
  const std::string text = percentile_interval_text(latency_summary(h), {"99", "99.9"});
  const std::string p99 = text.substr(0, text.find('\n'));
  const std::string p999 = text.substr(text.find('\n') + 1);
  EXPECT_NE(p99.find("p99 "), std::string::npos) << p99;
  EXPECT_NE(p99.find("95 % CI ["), std::string::npos) << p99;
  EXPECT_NE(p99.find("10.0 samples beyond"), std::string::npos) << p99;
  EXPECT_EQ(p99.find("low confidence"), std::string::npos) << p99;  // exactly 10 beyond is enough
  EXPECT_NE(p999.find("p99.9"), std::string::npos) << p999;
  EXPECT_NE(p999.find("CI unavailable: fewer than 3688 samples"), std::string::npos) << p999;
  EXPECT_NE(p999.find("1.0 samples beyond: low confidence"), std::string::npos) << p999;
  // The printed bounds are the summary's, in microseconds.
  const nlohmann::json s = latency_summary(h);
  char bounds[64];
  std::snprintf(bounds, sizeof bounds, "[%.3f – %.3f] us", s["percentile_ci"]["99"][0].get<double>() / 1000.0,
                s["percentile_ci"]["99"][1].get<double>() / 1000.0);
  EXPECT_NE(p99.find(bounds), std::string::npos) << p99 << " lacks " << bounds;
}

}  // namespace
}  // namespace tailscope
