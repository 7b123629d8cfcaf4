// Correlated draws (`shared`, request_factor.h): the parse, the dependence
// between two stages of one request, and the marginal left as it was.
#include "svc/distribution.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace tailscope::svc {
namespace {

using nlohmann::json;

LatencyDistribution lognormal(double shared) {
  return parse_distribution(json{{"kind", "lognormal"}, {"median_us", 100}, {"sigma", 0.8}, {"shared", shared}}, "d");
}

// The correlation of the log draws of two stages of each of `n` requests (trace ids 1 … n).
double log_correlation(const LatencyDistribution& a, const LatencyDistribution& b, int n) {
  std::vector<double> x, y;
  for (int i = 1; i <= n; ++i) {
    const RequestFactor f = request_factor(0x5eed, static_cast<uint64_t>(i));
    x.push_back(std::log(std::max<int64_t>(1, a.sample_ns(f))));
    y.push_back(std::log(std::max<int64_t>(1, b.sample_ns(f))));
  }
  double mx = 0, my = 0;
  for (int i = 0; i < n; ++i) mx += x[i] / n, my += y[i] / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (int i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

double median_ns(const LatencyDistribution& d, bool with_factor, int n) {
  std::vector<int64_t> v;
  for (int i = 1; i <= n; ++i)
    v.push_back(with_factor ? d.sample_ns(request_factor(3, static_cast<uint64_t>(i))) : d.sample_ns());
  std::nth_element(v.begin(), v.begin() + n / 2, v.end());
  return static_cast<double>(v[static_cast<size_t>(n / 2)]);
}

TEST(SharedDistribution, StagesOfOneRequestMoveTogether) {
  // corr of the two normals = λ² = 0.81 (the log of a lognormal draw is its normal, scaled).
  EXPECT_NEAR(log_correlation(lognormal(0.9), lognormal(0.9), 20'000), 0.81, 0.03);
  EXPECT_NEAR(log_correlation(lognormal(0.9), lognormal(0.5), 20'000), 0.45, 0.03);
  EXPECT_NEAR(log_correlation(lognormal(0), lognormal(0), 20'000), 0, 0.03);
}

TEST(SharedDistribution, WithoutATraceIdEveryDrawIsIndependent) {
  const LatencyDistribution d = lognormal(0.9);
  int same_side = 0;
  const int n = 20'000;
  for (int i = 0; i < n; ++i)
    same_side += (d.sample_ns(RequestFactor{}) > 100'000) == (d.sample_ns(RequestFactor{}) > 100'000);
  EXPECT_NEAR(same_side / double(n), 0.5, 0.02);  // 0.5 + asin(0.81)/π ≈ 0.80 if they shared Z
}

TEST(SharedDistribution, TheMarginalIsUnchanged) {
  const int n = 40'000;
  for (const json& j :
       {json{{"kind", "lognormal"}, {"median_us", 100}, {"sigma", 0.8}},
        json{{"kind", "exponential"}, {"mean_us", 100}}, json{{"kind", "uniform"}, {"min_us", 50}, {"max_us", 150}}}) {
    json shared = j;
    shared["shared"] = 0.9;
    const LatencyDistribution independent = parse_distribution(j, "d"), correlated = parse_distribution(shared, "d");
    const double m0 = median_ns(independent, false, n), m1 = median_ns(correlated, true, n);
    EXPECT_NEAR(m1 / m0, 1.0, 0.04) << j.dump();
  }
  // A constant stays a constant.
  const LatencyDistribution c = parse_distribution(json{{"kind", "constant"}, {"us", 7}, {"shared", 0.5}}, "c");
  EXPECT_EQ(c.sample_ns(request_factor(1, 2)), 7000);
}

TEST(SharedDistribution, TheLoadingIsRangeCheckedNamingTheStage) {
  for (const json& bad : {json(-0.1), json(0.96), json(1), json("0.5")}) {
    try {
      parse_distribution(json{{"kind", "exponential"}, {"mean_us", 10}, {"shared", bad}}, "svc a.run stage 2");
      ADD_FAILURE() << bad.dump() << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("svc a.run stage 2: 'shared'"), std::string::npos) << e.what();
    }
  }
  const LatencyDistribution d = lognormal(0.95);
  EXPECT_EQ(d.shared, 0.95);
  EXPECT_EQ(d.to_json()["shared"], 0.95);
  EXPECT_FALSE(lognormal(0).to_json().contains("shared"));
}

// The empirical kind: a table of quantiles at equally spaced probabilities.
LatencyDistribution table(std::vector<double> quantiles_us, double shared = 0) {
  json j{{"kind", "empirical"}, {"quantiles_us", quantiles_us}};
  if (shared > 0) j["shared"] = shared;
  return parse_distribution(j, "t");
}

// The q-quantile of n draws (with the request factor of ids 1 … n, or independent).
double draw_quantile(const LatencyDistribution& d, double q, bool with_factor, int n) {
  std::vector<int64_t> v;
  for (int i = 1; i <= n; ++i)
    v.push_back(with_factor ? d.sample_ns(request_factor(9, static_cast<uint64_t>(i))) : d.sample_ns());
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[static_cast<size_t>(q * (n - 1))]);
}

TEST(EmpiricalDistribution, DrawsFollowTheTableTailIncluded) {
  // 0, 50, 100 µs then a tail to 10 ms: probabilities 0, 1/3, 2/3, 1.
  const LatencyDistribution d = table({0, 50, 100, 10'000});
  for (const bool with_factor : {false, true}) {
    EXPECT_NEAR(draw_quantile(d, 0.5, with_factor, 60'000), 75'000, 2'000) << with_factor;
    // p99: 2/3 + 0.99·… → 100 µs + (0.99 − 2/3)·3 · 9 900 µs = 9 703 µs; no default cap at 20 × anything.
    EXPECT_NEAR(draw_quantile(d, 0.99, with_factor, 60'000), 9'703'000, 150'000) << with_factor;
  }
  EXPECT_NEAR(d.mean_ns(), (25'000 + 75'000 + 5'050'000) / 3.0, 1);
  // A cap still clips.
  const LatencyDistribution capped =
      parse_distribution(json{{"kind", "empirical"}, {"quantiles_us", {0, 100, 10'000}}, {"cap_us", 200}}, "c");
  EXPECT_LE(draw_quantile(capped, 1.0, false, 5'000), 200'000);
}

TEST(EmpiricalDistribution, SharedFactorMovesTwoTablesTogether) {
  const LatencyDistribution a = table({10, 20, 40, 80, 160}, 0.9), b = table({5, 6, 7, 8, 900}, 0.9);
  std::vector<double> x, y;
  for (int i = 1; i <= 20'000; ++i) {
    const RequestFactor f = request_factor(0xabc, static_cast<uint64_t>(i));
    x.push_back(static_cast<double>(a.sample_ns(f) > 40'000));
    y.push_back(static_cast<double>(b.sample_ns(f) > 7'000));
  }
  // Both above their medians together: P = 1/4 + asin(0.81)/(2π) ≈ 0.40 with λ² = 0.81 (0.25 if independent).
  double both = 0;
  for (size_t i = 0; i < x.size(); ++i) both += x[i] * y[i];
  EXPECT_NEAR(both / static_cast<double>(x.size()), 0.25 + std::asin(0.81) / (2 * M_PI), 0.02);
}

TEST(EmpiricalDistribution, RoundTripsAndRefusesBadTables) {
  const LatencyDistribution d = table({1, 2, 2, 30.5});
  EXPECT_EQ(parse_distribution(d.to_json(), "again").quantiles_ns, d.quantiles_ns);
  EXPECT_EQ(d.to_json()["kind"], "empirical");
  auto refused = [](const json& j, const std::string& what) {
    try {
      parse_distribution(j, "s");
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(json{{"kind", "empirical"}}, "needs an array 'quantiles_us'");
  refused(json{{"kind", "empirical"}, {"quantiles_us", {5}}}, "needs 2 …");
  refused(json{{"kind", "empirical"}, {"quantiles_us", std::vector<double>(kMaxQuantiles + 1, 1.0)}}, "needs 2 …");
  refused(json{{"kind", "empirical"}, {"quantiles_us", {5, 4}}}, "quantiles_us[1] is below the one before it");
  refused(json{{"kind", "empirical"}, {"quantiles_us", {1, "x"}}}, "quantiles_us[1] is \"x\", not a number");
  refused(json{{"kind", "empirical"}, {"quantiles_us", {1, 7e7}}}, "it must be in 0 … 60000000");
  refused(json{{"kind", "empirical"}, {"quantiles_us", {1, 2}}, {"median_us", 3}}, "unknown key 'median_us'");
}

}  // namespace
}  // namespace tailscope::svc
