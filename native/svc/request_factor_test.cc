#include "svc/request_factor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tailscope::svc {
namespace {

TEST(NormalQuantile, MatchesKnownQuantiles) {
  // Reference values of Φ⁻¹ (to 1e-12, from tables / a high-precision evaluation).
  const struct {
    double p, x;
  } known[] = {{0.5, 0.0},
               {0.975, 1.959963984540054},
               {0.025, -1.959963984540054},
               {0.841344746068543, 1.0},
               {0.99, 2.326347874040841},
               {0.999, 3.090232306167814},
               {0.01, -2.326347874040841},
               {1e-10, -6.361340902404056},
               {0.02425, -1.972961051311885}};  // the central/tail boundary
  for (const auto& k : known) EXPECT_NEAR(normal_quantile(k.p), k.x, 1e-9) << "p = " << k.p;
  EXPECT_EQ(normal_quantile(0), -INFINITY);
  EXPECT_EQ(normal_quantile(1), INFINITY);
}

TEST(NormalQuantile, InvertsTheCdf) {
  for (double p = 1e-6; p < 1; p += 0.0137) EXPECT_NEAR(normal_cdf(normal_quantile(p)), p, 1e-12 + 1e-9 * p);
}

TEST(RequestFactor, NoTraceIdNoFactor) {
  EXPECT_FALSE(request_factor(0, 0).known);
  EXPECT_TRUE(request_factor(0, 1).known);
  EXPECT_TRUE(request_factor(1, 0).known);
}

TEST(RequestFactor, IsAFunctionOfTheTraceIdAndStandardNormalAcrossIds) {
  EXPECT_EQ(request_factor(0x1234, 0x5678).z, request_factor(0x1234, 0x5678).z);
  // Sequential ids (the worst case for a weak hash): mean 0, variance 1, 2.5 % beyond ±1.96.
  const int n = 200'000;
  double sum = 0, sum2 = 0;
  int above = 0, below = 0;
  for (int i = 1; i <= n; ++i) {
    const double z = request_factor(7, static_cast<uint64_t>(i)).z;
    sum += z;
    sum2 += z * z;
    above += z > 1.959963984540054;
    below += z < -1.959963984540054;
  }
  EXPECT_NEAR(sum / n, 0, 0.01);
  EXPECT_NEAR(sum2 / n, 1, 0.02);
  EXPECT_NEAR(above / double(n), 0.025, 0.002);
  EXPECT_NEAR(below / double(n), 0.025, 0.002);
}

}  // namespace
}  // namespace tailscope::svc
