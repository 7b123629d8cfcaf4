#include "core/clock.h"

#include <gtest/gtest.h>

namespace tailscope {
namespace {

TEST(Clock, MonotonicNeverGoesBack) {
  int64_t prev = monotonic_ns();
  for (int i = 0; i < 100000; ++i) {
    int64_t now = monotonic_ns();
    ASSERT_GE(now, prev);
    prev = now;
  }
}

TEST(Clock, WaitsReachTheirDeadline) {
  for (int64_t delta_ns : {0L, 10'000L, 200'000L, 1'000'000L}) {
    int64_t deadline = monotonic_ns() + delta_ns;
    sleep_until_ns(deadline);
    EXPECT_GE(monotonic_ns(), deadline);
    deadline = monotonic_ns() + delta_ns;
    precise_wait_until_ns(deadline, 20'000);
    EXPECT_GE(monotonic_ns(), deadline);
  }
}

TEST(Clock, RealtimeIsEpochBased) {
  // After 2020-01-01 in ns: guards against mixing up the two clocks.
  EXPECT_GT(realtime_ns(), int64_t{1'577'836'800} * 1'000'000'000);
}

}  // namespace
}  // namespace tailscope
