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

}  // namespace
}  // namespace tailscope::svc
