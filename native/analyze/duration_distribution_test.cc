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

}  // namespace
}  // namespace tailscope::analyze
