// The probe's derived delays, exactly as docs/async-study.md ("The probe: five
// timestamps per call") defines them.
#include "exec/async_probe.h"

#include <gtest/gtest.h>

namespace tailscope::exec {
namespace {

AsyncProbe probe(int64_t trigger, int64_t start, int64_t end, int64_t request, int64_t received, bool deferred) {
  AsyncProbe p;
  p.trigger_async_fn_ns = trigger;
  p.fn_start_ns = start;
  p.fn_end_ns = end;
  p.request_val_ns = request;
  p.val_received_ns = received;
  p.deferred = deferred;
  return p;
}

TEST(AsyncProbe, AsyncCallValueRequestedBeforeItIsReady) {
  const AsyncProbe p = probe(100, 130, 150, 110, 170, false);
  EXPECT_EQ(p.scheduling_delay_ns(), 30);  // fn_start - trigger
  EXPECT_EQ(p.join_delay_ns(), 20);        // received - max(fn_end, request) = 170 - 150
  EXPECT_EQ(p.total_ns(), 70);
  EXPECT_EQ(p.deferral_wait_ns(), 0);
}

TEST(AsyncProbe, AsyncCallValueRequestedAfterItIsReady) {
  const AsyncProbe p = probe(100, 130, 150, 400, 410, false);
  EXPECT_EQ(p.join_delay_ns(), 10);  // measured from the request, not from fn_end
  EXPECT_EQ(p.total_ns(), 310);
}

TEST(AsyncProbe, DeferredCallHasBothReadings) {
  const AsyncProbe p = probe(100, 505, 520, 500, 530, true);
  EXPECT_EQ(p.deferral_wait_ns(), 400);   // request_val - trigger (the study's formula)
  EXPECT_EQ(p.scheduling_delay_ns(), 5);  // fn_start - request_val (the study's text)
  EXPECT_EQ(p.join_delay_ns(), 10);
  EXPECT_EQ(p.total_ns(), 430);
}

TEST(AsyncProbe, HistogramsSkipIncompleteAndCountNegative) {
  AsyncProbeHistograms h;
  h.record(probe(100, 130, 150, 110, 170, false));
  h.record(probe(100, 0, 150, 110, 170, false));   // incomplete
  h.record(probe(100, 90, 150, 110, 170, false));  // fn_start before trigger: impossible, counted
  EXPECT_EQ(h.incomplete(), 1);
  EXPECT_EQ(h.negative(), 1);
  EXPECT_EQ(h.of(AsyncDelay::kSchedulingDelay).total_count(), 1);
  EXPECT_EQ(h.of(AsyncDelay::kTotal).total_count(), 2);
  EXPECT_EQ(h.of(AsyncDelay::kDeferralWait).total_count(), 0);
  EXPECT_EQ(delay_name(AsyncDelay::kDeferralWait), "deferral_wait");
}

}  // namespace
}  // namespace tailscope::exec
