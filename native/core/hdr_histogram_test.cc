// Property tests of HdrHistogram against a brute-force oracle: the exact,
// sorted vector of every recorded value.
#include "core/hdr_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace tailscope {
namespace {

// Data sets the oracle is checked on: each a different shape of latency.
enum class Shape { kUniformSmall, kUniformWide, kLogNormal, kPareto, kBimodal, kConstant, kWithZeros };

const char* shape_name(Shape s) {
  switch (s) {
    case Shape::kUniformSmall:
      return "uniform_small";
    case Shape::kUniformWide:
      return "uniform_wide";
    case Shape::kLogNormal:
      return "lognormal";
    case Shape::kPareto:
      return "pareto";
    case Shape::kBimodal:
      return "bimodal";
    case Shape::kConstant:
      return "constant";
    case Shape::kWithZeros:
      return "with_zeros";
  }
  return "?";
}

std::vector<int64_t> make_values(Shape shape, uint64_t seed, size_t n, int64_t highest) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<int64_t> values;
  values.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    double v = 0;
    switch (shape) {
      case Shape::kUniformSmall:
        v = std::floor(unit(rng) * 3000);
        break;
      case Shape::kUniformWide:
        v = std::floor(unit(rng) * static_cast<double>(highest));
        break;
      case Shape::kLogNormal:
        v = std::exp(std::normal_distribution<double>(11.0, 1.5)(rng));
        break;
      case Shape::kPareto:  // alpha = 1.1: a very heavy tail over ~1 us
        v = 1000.0 / std::pow(1.0 - unit(rng), 1.0 / 1.1);
        break;
      case Shape::kBimodal:
        v = unit(rng) < 0.98 ? 50'000 + unit(rng) * 5'000 : 5e7 + unit(rng) * 1e7;
        break;
      case Shape::kConstant:
        v = 123'456;
        break;
      case Shape::kWithZeros:
        v = unit(rng) < 0.3 ? 0 : std::floor(unit(rng) * 1e6);
        break;
    }
    values.push_back(std::clamp<int64_t>(static_cast<int64_t>(v), 0, highest));
  }
  return values;
}

// Percentiles in thousandths of a percent, so the oracle's rank is exact integer math.
std::vector<int64_t> percentile_grid_milli(uint64_t seed) {
  std::vector<int64_t> grid = {0,     1,     100,   1000,  10000, 25000, 50000, 75000,
                               90000, 95000, 99000, 99500, 99900, 99990, 99999, 100000};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 200; ++i) grid.push_back(static_cast<int64_t>(rng() % 100001));
  return grid;
}

struct Case {
  Shape shape;
  uint64_t seed;
  size_t n;
};

class OracleTest : public ::testing::TestWithParam<Case> {};

TEST_P(OracleTest, PercentilesMinMaxMeanStddevMatchExactWithinPrecision) {
  const Case c = GetParam();
  HdrHistogram h = HdrHistogram::for_latency_ns();
  std::vector<int64_t> values = make_values(c.shape, c.seed, c.n, h.highest_trackable_value());
  for (int64_t v : values) ASSERT_TRUE(h.record(v));
  std::vector<int64_t> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  const int64_t n = static_cast<int64_t>(sorted.size());
  ASSERT_EQ(h.total_count(), n);
  ASSERT_EQ(h.out_of_range_count(), 0);

  for (int64_t p_milli : percentile_grid_milli(c.seed)) {
    const double p = static_cast<double>(p_milli) / 1000.0;
    // Rank of the p-th percentile: the smallest k with k/n >= p/100.
    const int64_t rank = std::max<int64_t>(1, (p_milli * n + 99'999) / 100'000);
    const int64_t exact = sorted[static_cast<size_t>(rank - 1)];
    const int64_t got = h.value_at_percentile(p);
    ASSERT_TRUE(h.values_equivalent(got, exact)) << "p=" << p << " exact=" << exact << " got=" << got;
    ASSERT_EQ(got, p_milli == 0 ? h.lowest_equivalent_value(exact) : h.highest_equivalent_value(exact)) << "p=" << p;
    // The bucket's precision: 3 significant digits.
    ASSERT_LE(std::abs(got - exact), std::max<int64_t>(1, exact / 1000)) << "p=" << p;
  }

  EXPECT_EQ(h.min(), h.lowest_equivalent_value(sorted.front()));
  EXPECT_EQ(h.max(), sorted.back() == 0 ? 0 : h.highest_equivalent_value(sorted.back()));

  long double sum = 0, sum_sq_values = 0;
  for (int64_t v : sorted) {
    sum += v;
    sum_sq_values += static_cast<long double>(v) * v;
  }
  const double exact_mean = static_cast<double>(sum / n);
  long double dev = 0;
  for (int64_t v : sorted) dev += (v - static_cast<long double>(exact_mean)) * (v - exact_mean);
  const double exact_stddev = static_cast<double>(std::sqrt(dev / n));
  // Each value moves by at most 1/1024 of itself (to its bucket's midpoint),
  // so the mean moves at most that much, and the stddev at most by the RMS of
  // those moves (triangle inequality on the centred vectors).
  const double rms_value = static_cast<double>(std::sqrt(sum_sq_values / n));
  EXPECT_NEAR(h.mean(), exact_mean, exact_mean / 1024.0 + 1.0);
  EXPECT_NEAR(h.stddev(), exact_stddev, rms_value / 1024.0 + 1.0);
}

std::vector<Case> oracle_cases() {
  std::vector<Case> cases;
  const Shape shapes[] = {Shape::kUniformSmall, Shape::kUniformWide, Shape::kLogNormal, Shape::kPareto,
                          Shape::kBimodal,      Shape::kConstant,    Shape::kWithZeros};
  for (Shape s : shapes) {
    for (uint64_t seed : {1u, 2u, 3u}) cases.push_back({s, seed, 20'000});
    cases.push_back({s, 17, 1});
    cases.push_back({s, 18, 7});
    cases.push_back({s, 19, 1000});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, OracleTest, ::testing::ValuesIn(oracle_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(shape_name(info.param.shape)) + "_seed" +
                                  std::to_string(info.param.seed) + "_n" + std::to_string(info.param.n);
                         });

TEST(HdrHistogramLayout, LatencyLayoutMatchesHdrHistogram) {
  // Numbers from HdrHistogram (Python package) for (1, 3.6e12, 3).
  const HdrHistogram h = HdrHistogram::for_latency_ns();
  EXPECT_EQ(h.lowest_discernible_value(), 1);
  EXPECT_EQ(h.highest_trackable_value(), 3'600'000'000'000);
  EXPECT_EQ(h.significant_figures(), 3);
  EXPECT_EQ(h.sub_bucket_count(), 2048);
  EXPECT_EQ(h.bucket_count(), 32);
  EXPECT_EQ(h.counts_array_length(), 33'792u);
  EXPECT_EQ(h.highest_equivalent_value(3'600'000'000'000), 3'601'330'077'695);
  EXPECT_EQ(h.highest_equivalent_value(5000), 5003);
  EXPECT_EQ(h.highest_equivalent_value(123'456), 123'519);
  EXPECT_EQ(h.highest_equivalent_value(2047), 2047);
  EXPECT_EQ(h.lowest_equivalent_value(2049), 2048);
  EXPECT_TRUE(h.values_equivalent(2048, 2049));
  EXPECT_FALSE(h.values_equivalent(2047, 2048));
}

TEST(HdrHistogramLayout, CoarseLayoutMatchesHdrHistogram) {
  const HdrHistogram h(1000, 10'000'000'000, 2);  // unit 512, 256 sub-buckets
  EXPECT_EQ(h.bucket_count(), 18);
  EXPECT_EQ(h.counts_array_length(), 2432u);
  EXPECT_EQ(h.highest_equivalent_value(1000), 1023);
  EXPECT_EQ(h.lowest_equivalent_value(1000), 512);
  EXPECT_TRUE(h.values_equivalent(1, 511));
  EXPECT_EQ(h.highest_equivalent_value(1'000'000'000), 1'002'438'655);
}

TEST(HdrHistogramLayout, IndexValueRoundTripAndPrecisionForAllDigits) {
  for (int digits = 0; digits <= 5; ++digits) {
    for (int64_t lowest : {int64_t{1}, int64_t{7}, int64_t{1000}}) {
      const HdrHistogram h(lowest, int64_t{1} << 50, digits);
      int64_t half_count = h.sub_bucket_count() / 2;
      std::mt19937_64 rng(static_cast<uint64_t>(digits * 100 + lowest));
      for (int i = 0; i < 20'000; ++i) {
        const int64_t v = static_cast<int64_t>(rng() >> (14 + rng() % 50));
        if (v > h.highest_trackable_value()) continue;
        const size_t index = h.counts_index_for(v);
        ASSERT_LT(index, h.counts_array_length());
        const int64_t low = h.lowest_equivalent_value(v);
        ASSERT_EQ(h.value_from_index(index), low) << "v=" << v;
        ASSERT_LE(low, v);
        ASSERT_GE(h.highest_equivalent_value(v), v);
        ASSERT_EQ(h.counts_index_for(h.highest_equivalent_value(v)), index);
        if (v >= (h.sub_bucket_count() << (63 - __builtin_clzll(static_cast<uint64_t>(lowest))))) {
          // Outside the unit-resolution bucket: relative width <= 1 / half_count.
          ASSERT_LE(h.size_of_equivalent_value_range(v), v / half_count) << "v=" << v;
        }
      }
    }
  }
}

TEST(HdrHistogram, RejectsInvalidLayouts) {
  EXPECT_THROW(HdrHistogram(0, 100, 3), std::invalid_argument);
  EXPECT_THROW(HdrHistogram(10, 19, 3), std::invalid_argument);
  EXPECT_THROW(HdrHistogram(1, 100, 6), std::invalid_argument);
  EXPECT_THROW(HdrHistogram(1, 100, -1), std::invalid_argument);
  EXPECT_THROW(HdrHistogram(int64_t{1} << 55, std::numeric_limits<int64_t>::max(), 5), std::invalid_argument);
  EXPECT_NO_THROW(HdrHistogram(1, std::numeric_limits<int64_t>::max(), 3));
}

TEST(HdrHistogram, EmptyHistogramReportsZeros) {
  const HdrHistogram h = HdrHistogram::for_latency_ns();
  EXPECT_EQ(h.total_count(), 0);
  EXPECT_EQ(h.min(), 0);
  EXPECT_EQ(h.max(), 0);
  EXPECT_EQ(h.mean(), 0.0);
  EXPECT_EQ(h.stddev(), 0.0);
  EXPECT_EQ(h.value_at_percentile(50), 0);
  EXPECT_TRUE(h.percentiles().empty());
}

TEST(HdrHistogram, OutOfRangeValuesAreCountedNotRecorded) {
  HdrHistogram h(1, 1000, 3);
  EXPECT_TRUE(h.record(1000));
  EXPECT_FALSE(h.record(1001));
  EXPECT_FALSE(h.record(-1));
  EXPECT_FALSE(h.record(std::numeric_limits<int64_t>::min()));
  EXPECT_FALSE(h.record_n(5000, 3));
  EXPECT_FALSE(h.record_corrected(5000, 10));
  EXPECT_EQ(h.total_count(), 1);
  EXPECT_EQ(h.out_of_range_count(), 7);
  EXPECT_EQ(h.max(), 1000);
}

TEST(HdrHistogram, RecordNMatchesRepeatedRecord) {
  HdrHistogram a = HdrHistogram::for_latency_ns();
  HdrHistogram b = HdrHistogram::for_latency_ns();
  EXPECT_TRUE(a.record_n(777'777, 5));
  for (int i = 0; i < 5; ++i) b.record(777'777);
  EXPECT_TRUE(a.record_n(1, 0));
  EXPECT_FALSE(a.record_n(1, -3));
  EXPECT_EQ(a.total_count(), 5);
  for (size_t i = 0; i < a.counts_array_length(); ++i) ASSERT_EQ(a.count_at_index(i), b.count_at_index(i));
}

// The coordinated-omission expansion written out, one record() per synthetic sample.
void record_corrected_explicitly(HdrHistogram& h, int64_t value, int64_t interval) {
  h.record(value);
  if (interval <= 0) return;
  for (int64_t missing = value - interval; missing >= interval; missing -= interval) h.record(missing);
}

void expect_same_counts(const HdrHistogram& a, const HdrHistogram& b) {
  ASSERT_EQ(a.counts_array_length(), b.counts_array_length());
  ASSERT_EQ(a.total_count(), b.total_count());
  ASSERT_EQ(a.min(), b.min());
  ASSERT_EQ(a.max(), b.max());
  for (size_t i = 0; i < a.counts_array_length(); ++i) {
    ASSERT_EQ(a.count_at_index(i), b.count_at_index(i)) << "index " << i;
  }
}

TEST(HdrHistogram, RecordCorrectedMatchesExplicitExpansion) {
  std::mt19937_64 rng(42);
  HdrHistogram fast = HdrHistogram::for_latency_ns();
  HdrHistogram slow = HdrHistogram::for_latency_ns();
  for (int i = 0; i < 300; ++i) {
    const int64_t interval = static_cast<int64_t>(1 + rng() % 20'000);
    const int64_t value = static_cast<int64_t>(rng() % 3'000'000);
    ASSERT_TRUE(fast.record_corrected(value, interval));
    record_corrected_explicitly(slow, value, interval);
  }
  // Edges: value == interval, value == 2 * interval, no/negative interval.
  for (auto [value, interval] :
       {std::pair<int64_t, int64_t>{1000, 1000}, {2000, 1000}, {2001, 1000}, {5000, 0}, {5000, -7}, {1, 1}, {0, 1}}) {
    ASSERT_TRUE(fast.record_corrected(value, interval));
    record_corrected_explicitly(slow, value, interval);
  }
  expect_same_counts(fast, slow);
}

TEST(HdrHistogram, RecordCorrectedIsBoundedForHugeRatios) {
  HdrHistogram h = HdrHistogram::for_latency_ns();
  const int64_t value = 3'600'000'000'000;  // 1 hour stall at a 1 ns expected interval
  ASSERT_TRUE(h.record_corrected(value, 1));
  EXPECT_EQ(h.total_count(), value);  // the value itself + (value - 1) synthetic samples
  EXPECT_EQ(h.min(), 1);
  EXPECT_EQ(h.max(), h.highest_equivalent_value(value));
  // Uniform 1..value: the median is about value / 2.
  EXPECT_TRUE(h.values_equivalent(h.value_at_percentile(50), value / 2));
}

TEST(HdrHistogram, MergeEqualsRecordingEverythingInOne) {
  for (uint64_t seed : {5u, 6u, 7u}) {
    HdrHistogram all = HdrHistogram::for_latency_ns();
    std::vector<HdrHistogram> parts(3, HdrHistogram::for_latency_ns());
    const std::vector<int64_t> values = make_values(Shape::kPareto, seed, 30'000, all.highest_trackable_value());
    for (size_t i = 0; i < values.size(); ++i) {
      all.record(values[i]);
      parts[i % 3].record(values[i]);
    }
    HdrHistogram merged = HdrHistogram::for_latency_ns();
    for (const HdrHistogram& p : parts) merged.merge(p);
    expect_same_counts(merged, all);
    EXPECT_EQ(merged.value_at_percentile(99.9), all.value_at_percentile(99.9));
  }
}

TEST(HdrHistogram, MergeAcrossLayoutsCountsValuesAboveRangeAsOutOfRange) {
  HdrHistogram wide = HdrHistogram::for_latency_ns();
  wide.record(10);
  wide.record(500);
  wide.record(2'000'000);
  wide.record(-5);  // out of range in `wide` already
  HdrHistogram narrow(1, 1'000'000, 3);
  narrow.merge(wide);
  EXPECT_EQ(narrow.total_count(), 2);
  EXPECT_EQ(narrow.out_of_range_count(), 2);
  EXPECT_EQ(narrow.max(), 500);

  HdrHistogram coarse(1000, 10'000'000'000, 2);
  coarse.merge(wide);
  EXPECT_EQ(coarse.total_count(), 3);
  EXPECT_TRUE(coarse.values_equivalent(coarse.max(), 2'000'000));
}

TEST(HdrHistogram, ResetEmptiesEverything) {
  HdrHistogram h = HdrHistogram::for_latency_ns();
  h.record(5);
  h.record(-1);
  h.reset();
  EXPECT_EQ(h.total_count(), 0);
  EXPECT_EQ(h.out_of_range_count(), 0);
  EXPECT_EQ(h.max(), 0);
  EXPECT_EQ(h.min(), 0);
  h.record(42);
  EXPECT_EQ(h.min(), 42);
  EXPECT_EQ(h.max(), 42);
}

TEST(HdrHistogram, PercentileEdgeCases) {
  HdrHistogram h = HdrHistogram::for_latency_ns();
  for (int64_t v = 1; v <= 1000; ++v) h.record(v);
  EXPECT_EQ(h.value_at_percentile(0), 1);
  EXPECT_EQ(h.value_at_percentile(-5), 1);
  EXPECT_EQ(h.value_at_percentile(std::nan("")), 1);
  EXPECT_EQ(h.value_at_percentile(100), 1000);
  EXPECT_EQ(h.value_at_percentile(250), 1000);
  EXPECT_EQ(h.value_at_percentile(50), 500);
  // 99.9 % of 1000 is 999 in exact arithmetic, 999.0000000000001 in doubles.
  EXPECT_EQ(h.value_at_percentile(99.9), 999);
  EXPECT_EQ(h.value_at_percentile(99.95), 1000);
  EXPECT_EQ(h.value_at_percentile(0.05), 1);
  EXPECT_EQ(h.value_at_percentile(0.15), 2);
}

TEST(HdrHistogram, ForEachRecordedVisitsNonEmptyBucketsInOrder) {
  HdrHistogram h = HdrHistogram::for_latency_ns();
  h.record_n(3000, 2);
  h.record(7);
  h.record(3001);  // same bucket as 3000
  std::vector<std::pair<int64_t, int64_t>> seen;
  h.for_each_recorded([&](int64_t value, int64_t count) { seen.emplace_back(value, count); });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::pair<int64_t, int64_t>{7, 1}));
  EXPECT_EQ(seen[1], (std::pair<int64_t, int64_t>{3000, 3}));
}

TEST(PercentileIteration, LevelsFollowHalfDistanceTicksAndEndAt100) {
  HdrHistogram h = HdrHistogram::for_latency_ns();
  for (int64_t v = 1; v <= 10'000; ++v) h.record(v);
  const std::vector<PercentileStep> steps = h.percentiles(5);
  const double expected[] = {0, 10, 20, 30, 40, 50, 55, 60, 65, 70, 75, 77.5, 80, 82.5, 85, 87.5, 88.75};
  ASSERT_GT(steps.size(), std::size(expected));
  for (size_t i = 0; i < std::size(expected); ++i) {
    EXPECT_NEAR(steps[i].percentile, expected[i], 1e-9) << "step " << i;
  }
  EXPECT_EQ(steps[0].value, 1);
  EXPECT_EQ(steps[0].count_at_or_below, 1);
  EXPECT_EQ(steps[5].value, h.value_at_percentile(50));
  EXPECT_EQ(steps.back().percentile, 100.0);
  EXPECT_EQ(steps.back().count_at_or_below, 10'000);
  EXPECT_EQ(steps.back().value, h.max());
}

TEST(PercentileIteration, IsMonotonicForEveryShape) {
  for (Shape s : {Shape::kPareto, Shape::kBimodal, Shape::kConstant, Shape::kWithZeros}) {
    for (int ticks : {1, 5, 20}) {
      HdrHistogram h = HdrHistogram::for_latency_ns();
      for (int64_t v : make_values(s, 9, 5000, h.highest_trackable_value())) h.record(v);
      const std::vector<PercentileStep> steps = h.percentiles(ticks);
      ASSERT_GE(steps.size(), 2u);
      EXPECT_EQ(steps.front().percentile, 0.0);
      EXPECT_EQ(steps.back().percentile, 100.0);
      EXPECT_EQ(steps.back().count_at_or_below, h.total_count());
      for (size_t i = 1; i < steps.size(); ++i) {
        ASSERT_GE(steps[i].percentile, steps[i - 1].percentile) << shape_name(s) << " step " << i;
        ASSERT_GE(steps[i].value, steps[i - 1].value);
        ASSERT_GE(steps[i].count_at_or_below, steps[i - 1].count_at_or_below);
        // Each step's count covers its percentile level.
        ASSERT_GE(100.0 * static_cast<double>(steps[i].count_at_or_below) / static_cast<double>(h.total_count()),
                  steps[i].percentile - 1e-9);
      }
    }
  }
  EXPECT_THROW(HdrHistogram::for_latency_ns().percentiles(0), std::invalid_argument);
}

TEST(PercentileSpectrumText, HasHeaderRowsAndFooter) {
  HdrHistogram h = HdrHistogram::for_latency_ns();
  for (int64_t v = 1; v <= 10'000; ++v) h.record(v * 1000);  // 1 us .. 10 ms in ns
  const std::string text = h.percentile_spectrum_text(1000.0);
  EXPECT_EQ(text.rfind("       Value     Percentile TotalCount 1/(1-Percentile)\n\n", 0), 0u) << text.substr(0, 120);
  EXPECT_NE(text.find("       1.000 0.000000000000          1           1.00\n"), std::string::npos);
  EXPECT_NE(text.find("    5001.215 0.500000000000       5001           2.00\n"), std::string::npos) << text;
  EXPECT_NE(text.find("   10002.431 1.000000000000      10000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("#[Mean    = "), std::string::npos);
  EXPECT_NE(text.find("#[Max     =    10002.431, Total count    =        10000]\n"), std::string::npos);
  EXPECT_NE(text.find("#[Buckets =           32, SubBuckets     =         2048]\n"), std::string::npos);
  const size_t rows = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  EXPECT_EQ(rows, 2 + h.percentiles().size() + 3);
}

}  // namespace
}  // namespace tailscope
