#include "load/request_log.h"

#include <gtest/gtest.h>

#include "load/config.h"
#include "load/request_timing.h"

namespace tailscope::load {
namespace {

int64_t g_now = 0;
int64_t fake_now() { return g_now; }

TEST(RequestLog, WritesRowsInIntendedOrderInUnixTime) {
  const std::string text = request_log_csv({{0x1, 0x2, 2000, 50, true}, {0xab, 0xcd, 1000, 70, false}}, 5'000);
  EXPECT_EQ(text,
            "# tailscope.request-log/1\ntrace_id,intended_unix_ns,latency_ns,ok\n"
            "00000000000000ab00000000000000cd,6000,70,0\n"
            "00000000000000010000000000000002,7000,50,1\n");
}

TEST(RequestLog, KeepsAnsweredRequestsOfTheWindowUpToItsCapacityAndCountsTheRest) {
  LoadConfig config;
  config.rate_per_s = 10;
  config.traceparent = true;
  RunClock clock;
  clock.measure_start_ns = 1000;
  clock.measure_end_ns = 1'000'000;
  WorkerResult result;
  result.request_log.reserve(2);
  RequestTiming timing(config, clock, result, &fake_now);
  g_now = 1500;
  InFlightRequest warmup = timing.on_send(500, 500, 10);  // intended before the window
  InFlightRequest a = timing.on_send(1200, 1200, 10);
  a.trace = {7, 8, 9, true};
  InFlightRequest b = timing.on_send(1300, 1300, 10);
  InFlightRequest c = timing.on_send(1400, 1400, 10);
  timing.on_response(warmup, 2000, true, 5);
  timing.on_response(a, 2000, true, 5);
  timing.on_response(b, 2100, false, 5);
  timing.on_response(c, 2200, true, 5);
  ASSERT_EQ(result.request_log.size(), 2u);
  EXPECT_EQ(result.request_log[0].trace_id_high, 7u);
  EXPECT_EQ(result.request_log[0].latency_ns, 800);  // from the intended time
  EXPECT_FALSE(result.request_log[1].ok);
  EXPECT_EQ(result.request_log_dropped, 1);
}

}  // namespace
}  // namespace tailscope::load
