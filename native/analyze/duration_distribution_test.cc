#include "analyze/duration_distribution.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tailscope::analyze {
namespace {

TEST(DurationDistributionTest, ExactNearestRankPercentiles) {
  DurationDistribution d;
  for (int v = 100; v >= 1; --v) d.add(v);
  EXPECT_TRUE(d.exact());
  EXPECT_EQ(d.count(), 100u);
  EXPECT_EQ(d.percentile(50), 50);
  EXPECT_EQ(d.percentile(90), 90);
  EXPECT_EQ(d.percentile(99), 99);
  EXPECT_EQ(d.percentile(100), 100);
  EXPECT_EQ(d.percentile(0), 1);
  EXPECT_DOUBLE_EQ(d.mean(), 50.5);
  EXPECT_EQ(d.min(), 1);
  EXPECT_EQ(d.max(), 100);
}

TEST(DurationDistributionTest, CoefficientOfVariation) {
  DurationDistribution d;
  d.add(10);
  d.add(30);
  EXPECT_DOUBLE_EQ(d.stddev(), 10.0);
  EXPECT_DOUBLE_EQ(d.cv(), 0.5);
  DurationDistribution zeros;
  zeros.add(0);
  EXPECT_EQ(zeros.cv(), 0.0);
  DurationDistribution empty;
  EXPECT_EQ(empty.percentile(99), 0);
  EXPECT_EQ(empty.mean(), 0.0);
}

TEST(DurationDistributionTest, NegativeValuesCountAsZero) {
  DurationDistribution d;
  d.add(-5);
  EXPECT_EQ(d.min(), 0);
}

TEST(DurationDistributionTest, BucketsKeepRelativeErrorSmallPastTheExactLimit) {
  DurationDistribution d;
  std::vector<std::int64_t> values;
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> latency(13.0, 1.0);  // ~0.4 ms median, in ns
  for (int i = 0; i < 50'000; ++i) {
    values.push_back(static_cast<std::int64_t>(latency(rng)));
    d.add(values.back());
  }
  EXPECT_FALSE(d.exact());
  std::sort(values.begin(), values.end());
  for (double q : {50.0, 90.0, 99.0, 99.9}) {
    const auto rank = static_cast<std::size_t>(std::ceil(q / 100.0 * values.size() - 1e-9));
    const double want = static_cast<double>(values[rank - 1]);
    EXPECT_NEAR(static_cast<double>(d.percentile(q)), want, want * 0.001) << "p" << q;
  }
  EXPECT_EQ(d.percentile(100), values.back());
}

// percentiles() gives, level for level, what percentile() gives, exact and
// bucketed, with ties, at the sizes around the switch to buckets, for the
// document's three levels (selection), the CDF's 104 (a sort or one bucket
// walk) and levels out of order; the moments taken before either are equal.
TEST(DurationDistributionTest, PercentilesAtOnceEqualOneByOne) {
  std::vector<double> cdf;
  for (int p = 0; p < 100; ++p) cdf.push_back(p);
  for (double p : {99.5, 99.9, 99.99, 100.0}) cdf.push_back(p);
  const std::vector<std::vector<double>> level_sets = {{50, 90, 99},      {0, 100}, {100},        {0}, {50, 50, 90},
                                                       {99.99, 100, 100}, cdf,      {99, 50, 90}, {}};
  std::mt19937_64 rng(11);
  for (const std::size_t n : {1, 2, 3, 7, 100, 4'999, 10'000, 10'001, 30'000}) {
    for (const std::int64_t range : {std::int64_t{5}, std::int64_t{1} << 40}) {  // many ties, few
      for (const auto& levels : level_sets) {
        DurationDistribution one_by_one, at_once, moments_first;
        for (std::size_t i = 0; i < n; ++i) {
          const auto v = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(range)) - 1;  // -1: counts as 0
          one_by_one.add(v);
          at_once.add(v);
          moments_first.add(v);
        }
        const double first_mean = moments_first.mean(), first_stddev = moments_first.stddev();
        std::vector<std::int64_t> want;
        for (const double q : levels) want.push_back(one_by_one.percentile(q));
        const double mean = one_by_one.mean(), stddev = one_by_one.stddev();  // asked after: the same
        EXPECT_EQ(at_once.mean(), mean);
        EXPECT_EQ(at_once.stddev(), stddev);
        EXPECT_EQ(first_mean, mean);
        EXPECT_EQ(first_stddev, stddev);
        EXPECT_EQ(at_once.percentiles(levels), want)
            << n << " samples below " << range << ", " << levels.size() << " levels";
        // Asked again (the samples now partly ordered, or sorted): the same.
        EXPECT_EQ(at_once.percentiles(levels), want);
        EXPECT_EQ(at_once.percentiles(cdf).back(), one_by_one.max());
      }
    }
  }
  const DurationDistribution empty;
  EXPECT_EQ(empty.percentiles({50, 99}), (std::vector<std::int64_t>{0, 0}));
}

}  // namespace
}  // namespace tailscope::analyze
