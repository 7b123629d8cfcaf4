#include "exec/saturation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tailscope::exec {
namespace {

constexpr int64_t kPeriodNs = 10'000;  // 100 000 calls/s offered
constexpr double kOfferedPerS = 1e9 / kPeriodNs;

// A synthetic point: call i is due at i × period; a single worker starts a
// body when the call has been launched (100 ns after it was due) and the
// previous body has ended; the consumer asks at once and has the value
// 300 ns after the body ends. `service_ns` is the body's length; `extra_gap`
// (index → ns) keeps the worker away before that call's start.
std::vector<CallRecord> single_worker_point(int n, int64_t service_ns,
                                            const std::vector<std::pair<int, int64_t>>& extra_gap = {}) {
  std::vector<CallRecord> records(static_cast<size_t>(n));
  int64_t busy_until = 0;
  for (int i = 0; i < n; ++i) {
    CallRecord& r = records[static_cast<size_t>(i)];
    r.launched = true;
    r.intended_ns = 1'000'000 + int64_t{i} * kPeriodNs;
    r.probe.trigger_async_fn_ns = r.intended_ns + 100;
    r.probe.request_val_ns = r.probe.trigger_async_fn_ns + 50;
    int64_t start = std::max(r.probe.trigger_async_fn_ns + 1'000, busy_until);
    for (const auto& [index, gap_ns] : extra_gap)
      if (index == i) start += gap_ns;
    r.probe.fn_start_ns = start;
    r.probe.fn_end_ns = start + service_ns;
    r.probe.val_received_ns = r.probe.fn_end_ns + 300;
    busy_until = r.probe.fn_end_ns;
  }
  return records;
}

int64_t window_ns(int n) { return int64_t{n} * kPeriodNs; }

TEST(Backlog, HealthyPointIsNotSaturated) {
  const auto records = single_worker_point(400, 2'000);
  const Backlog b = analyse_backlog(records, 0, false, window_ns(400));
  EXPECT_EQ(b.calls, 400);
  EXPECT_FALSE(b.grew);
  EXPECT_EQ(b.queue_max, 0);
  EXPECT_EQ(b.queue_empty_fraction, 1.0);
  EXPECT_EQ(b.in_flight_max, 0);
  EXPECT_EQ(b.lateness_first_quarter_ns, b.lateness_last_quarter_ns);
  EXPECT_EQ(b.lateness_growth_limit_ns, window_ns(400) / 20);
  EXPECT_EQ(b.producer_lag_p50_ns, 100);
  EXPECT_EQ(b.stalls, 0);
  EXPECT_EQ(b.empty_queue_scheduling.total_count(), 400);
  EXPECT_TRUE(saturation_reasons(b, 0, 0, false).empty());
  EXPECT_DOUBLE_EQ(achieved_rate_per_s(records, 0), kOfferedPerS);
}

TEST(Backlog, GrowingBacklogIsSaturation) {
  // 12 µs of work per call every 10 µs: each call waits 2 µs longer than the last.
  const auto records = single_worker_point(400, 12'000);
  const Backlog b = analyse_backlog(records, 0, false, window_ns(400));
  EXPECT_TRUE(b.grew);
  EXPECT_GT(b.lateness_last_quarter_ns - b.lateness_first_quarter_ns, b.lateness_growth_limit_ns);
  EXPECT_GT(b.queue_max, 0);
  EXPECT_GT(b.in_flight_last_quarter, b.in_flight_first_quarter);
  const auto why = saturation_reasons(b, 0, 0, false);
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].find("backlog grew"), std::string::npos) << why[0];
  // The worker completes one call per 12 µs, whatever was offered.
  EXPECT_NEAR(achieved_rate_per_s(records, 0), 1e9 / 12'000, 1.0);
}

TEST(Backlog, SingleLateCompletionDoesNotEndAHealthyPoint) {
  auto records = single_worker_point(2'000, 2'000);
  records.back().probe.val_received_ns += 1'000'000;  // the consumer was descheduled for 1 ms at the very end
  const Backlog b = analyse_backlog(records, 0, false, window_ns(2'000));
  EXPECT_FALSE(b.grew);
  EXPECT_TRUE(saturation_reasons(b, 0, 0, false).empty());
  // Charged only that call's delay: 1 ms more on a 20 ms span of completions.
  EXPECT_GT(achieved_rate_per_s(records, 0), 0.9 * kOfferedPerS);
}

TEST(Backlog, ShortStallQueuesCallsWithoutGrowth) {
  // The worker is off its CPU for 300 µs before call 1000: 30 calls queue
  // behind it, then it catches up; medians of quarters do not move.
  const auto records = single_worker_point(2'000, 2'000, {{1'000, 300'000}});
  const Backlog b = analyse_backlog(records, 0, false, window_ns(2'000));
  EXPECT_FALSE(b.grew);
  EXPECT_EQ(b.stalls, 1);
  EXPECT_EQ(b.stall_max_ns, 301'000);  // from call 1000's launch to its start
  EXPECT_GE(b.queue_max, 29);
  EXPECT_EQ(b.queue_p50, 0);
  EXPECT_LT(b.queue_empty_fraction, 1.0);
}

TEST(Backlog, WarmupCallsAreNotRecordedButStillQueueAhead) {
  auto records = single_worker_point(100, 12'000);
  const Backlog all = analyse_backlog(records, 0, false, window_ns(100));
  const Backlog after_warmup = analyse_backlog(records, 40, false, window_ns(60));
  EXPECT_EQ(after_warmup.calls, 60);
  // Call 40 still finds the queue left by the warm-up calls in front of it.
  EXPECT_GT(after_warmup.queue_max, 0);
  EXPECT_EQ(after_warmup.queue_max, all.queue_max);
}

TEST(Backlog, FailedLaunchesAreNeitherRecordedNorQueued) {
  auto records = single_worker_point(100, 2'000);
  for (size_t i = 0; i < records.size(); i += 2) records[i] = CallRecord{};  // every other launch failed
  const Backlog b = analyse_backlog(records, 0, false, window_ns(100));
  EXPECT_EQ(b.calls, 50);
  EXPECT_EQ(b.queue_max, 0);
  const auto why = saturation_reasons(b, 0, 50, false);
  ASSERT_EQ(why.size(), 1u);
  EXPECT_EQ(why[0], "thread creation failed");
}

TEST(Backlog, DeferredCallsHaveNoQueue) {
  const auto records = single_worker_point(100, 2'000);
  const Backlog b = analyse_backlog(records, 0, true, window_ns(100));
  EXPECT_FALSE(b.has_queue);
  EXPECT_EQ(b.empty_queue_scheduling.total_count(), 0);
  EXPECT_EQ(b.starts_span_ns, 0);
}

TEST(Backlog, FewerThanEightCallsNeverCountAsGrowth) {
  const auto records = single_worker_point(7, 100'000);
  const Backlog b = analyse_backlog(records, 0, false, window_ns(7));
  EXPECT_GT(b.lateness_last_quarter_ns - b.lateness_first_quarter_ns, b.lateness_growth_limit_ns);
  EXPECT_FALSE(b.grew);
}

TEST(Backlog, NoRecordedCallGivesNoFigures) {
  const std::vector<CallRecord> records(10);
  EXPECT_EQ(analyse_backlog(records, 0, false, 1'000'000).calls, 0);
  EXPECT_EQ(achieved_rate_per_s(records, 0), 0.0);
}

TEST(SaturationReasons, NameEveryCause) {
  const auto why = saturation_reasons(Backlog{}, 3, 0, true);
  EXPECT_EQ(why, (std::vector<std::string>{"in-flight limit reached", "step time limit reached"}));
}

// ---- the ramp ---------------------------------------------------------------

// A model that sustains `capacity_per_s` and delivers at most that.
struct SyntheticModel {
  double capacity_per_s;
  std::vector<std::pair<double, int>> offered;  // (rate, attempt) in call order
  RampStepOutcome operator()(double rate, int attempt) {
    offered.emplace_back(rate, attempt);
    return {rate > capacity_per_s, std::min(rate, capacity_per_s), true};
  }
};

TEST(Ramp, ConvergesOnTheCapacity) {
  for (int refinements : {2, 12}) {
    SyntheticModel model{100'000, {}};
    RampSearch search;
    search.refinements = refinements;
    const RampResult r = find_max_rate(search, std::ref(model));
    SCOPED_TRACE(refinements);
    EXPECT_TRUE(r.saturation_found);
    EXPECT_LE(r.max_rate_per_s, 100'000);
    // Bisecting [64 000, 128 000) geometrically k times leaves a ratio of 2^(1/2^k).
    EXPECT_GE(r.max_rate_per_s, 100'000 / std::pow(2.0, 1.0 / std::pow(2.0, refinements)));
    EXPECT_EQ(r.steps, static_cast<int>(model.offered.size()));
  }
}

TEST(Ramp, SaturatedStepIsRepeatedOnceAndTheRepeatDecides) {
  SyntheticModel model{100'000, {}};
  RampSearch search;
  search.refinements = 0;
  const RampResult r = find_max_rate(search, std::ref(model));
  // 2000 … 64 000 sustained, 128 000 saturated twice.
  ASSERT_GE(model.offered.size(), 2u);
  EXPECT_EQ(model.offered.back(), std::make_pair(128'000.0, 1));
  EXPECT_EQ(model.offered[model.offered.size() - 2], std::make_pair(128'000.0, 0));
  EXPECT_EQ(r.max_rate_per_s, 64'000);
  EXPECT_EQ(r.best_saturated_per_s, 100'000);
}

TEST(Ramp, OneStalledStepDoesNotEndAHealthyRamp) {
  SyntheticModel steady{100'000, {}};
  const RampResult expected = find_max_rate(RampSearch{}, std::ref(steady));
  bool stalled = false;
  SyntheticModel model{100'000, {}};
  const RampResult r = find_max_rate(RampSearch{}, [&](double rate, int attempt) {
    if (rate == 8'000 && !stalled) {  // one scheduler stall: this attempt saturates
      stalled = true;
      model.offered.emplace_back(rate, attempt);
      return RampStepOutcome{true, 6'000, true};
    }
    return model(rate, attempt);
  });
  EXPECT_TRUE(stalled);
  EXPECT_EQ(r.max_rate_per_s, expected.max_rate_per_s);
  EXPECT_EQ(r.steps, expected.steps + 1);
}

TEST(Ramp, FailedThreadCreationIsNotRepeated) {
  int calls = 0;
  const RampResult r = find_max_rate(RampSearch{}, [&](double rate, int) {
    ++calls;
    return rate <= 8'000 ? RampStepOutcome{false, rate, true} : RampStepOutcome{true, 9'000, false};
  });
  EXPECT_EQ(r.max_rate_per_s, 8'000);
  EXPECT_TRUE(r.saturation_found);
  // 2000, 4000, 8000, 16 000 (once), then 2 refinements that fail the same way.
  EXPECT_EQ(calls, 6);
}

TEST(Ramp, StopsAtTheCapWithoutSaturation) {
  SyntheticModel model{std::numeric_limits<double>::infinity(), {}};
  RampSearch search;
  search.max_rate_per_s = 200'000;
  const RampResult r = find_max_rate(search, std::ref(model));
  EXPECT_FALSE(r.saturation_found);
  for (const auto& [rate, attempt] : model.offered) EXPECT_LE(rate, 200'000);
  EXPECT_EQ(r.max_rate_per_s, 128'000);  // the last doubling below the cap
}

TEST(Ramp, WhenNothingIsSustainedTheBestSaturatedRateIsTheMax) {
  SyntheticModel model{500, {}};
  const RampResult r = find_max_rate(RampSearch{}, std::ref(model));
  EXPECT_TRUE(r.saturation_found);
  EXPECT_EQ(r.max_rate_per_s, 500);
  EXPECT_EQ(model.offered.size(), 2u);  // the first step and its repeat; nothing to bisect
}

}  // namespace
}  // namespace tailscope::exec
