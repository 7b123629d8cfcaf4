// The open-loop driver's bookkeeping: every call launched once, joined once
// and recorded once after the warm-up; failures counted and named, never a
// hang. Rates are low and points short: nothing here depends on speed.
#include "exec/open_loop_driver.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "exec/async_models.h"

namespace tailscope::exec {
namespace {

// 120 calls at 20 000/s, the first 20 in the warm-up.
OpenLoopPoint short_point() {
  OpenLoopPoint p;
  p.rate_per_s = 20'000;
  p.warmup_ns = 1'000'000;
  p.duration_ns = 5'000'000;
  return p;
}

// Runs the body at launch, on the producer's thread; join hands the value
// over, or fails if told to.
template <class T>
class InlineModel final : public AsyncModel<T> {
 public:
  explicit InlineModel(bool fail_joins) : fail_joins_(fail_joins) {}
  std::string_view name() const override { return "inline"; }
  std::vector<ResultMechanism> mechanisms() const override { return {ResultMechanism::kFuture}; }
  std::unique_ptr<PendingCall<T>> launch(ResultMechanism m, std::function<T()> body) override {
    this->require(m);
    ++launches;
    auto call = std::make_unique<Call>();
    call->value = body();
    if constexpr (requires { call->value.size(); }) value_sizes.push_back(static_cast<int64_t>(call->value.size()));
    call->fail = fail_joins_;
    return call;
  }
  int64_t launches = 0;
  std::vector<int64_t> value_sizes;

 private:
  struct Call final : PendingCall<T> {
    T value;
    bool fail = false;
    void join(const Receiver<T>& receive) override {
      if (fail) throw std::runtime_error("join failed on purpose");
      receive(std::move(value));
    }
  };
  bool fail_joins_;
};

// Every launch fails the way thread creation fails without threads.
class NoThreadsModel final : public AsyncModel<void> {
 public:
  std::string_view name() const override { return "no-threads"; }
  std::vector<ResultMechanism> mechanisms() const override { return {ResultMechanism::kFuture}; }
  std::unique_ptr<PendingCall<void>> launch(ResultMechanism, std::function<void()>) override {
    throw std::system_error(EAGAIN, std::generic_category(), "no thread for this call");
  }
};

TEST(OpenLoopDriver, EveryCallIsLaunchedJoinedAndRecordedOnce) {
  auto model = make_async_model<long long>("deferred");
  const PointResult r = run_open_loop_point(*model, ResultMechanism::kFuture, short_point());
  EXPECT_EQ(r.calls, 120);
  EXPECT_EQ(r.warmup_calls, 20);
  EXPECT_EQ(r.recorded, 100);
  EXPECT_EQ(r.launch_failures, 0);
  EXPECT_EQ(r.call_errors, 0);
  EXPECT_FALSE(r.deadline_hit);
  EXPECT_EQ(r.delays.of(AsyncDelay::kTotal).total_count(), 100);
  EXPECT_EQ(r.delays.of(AsyncDelay::kDeferralWait).total_count(), 100);  // deferred calls
  EXPECT_EQ(r.total_from_intended.total_count(), 100);
  EXPECT_EQ(r.delays.negative(), 0);
  EXPECT_EQ(r.backlog.calls, 100);
  EXPECT_FALSE(r.backlog.has_queue);
  EXPECT_GT(r.achieved_per_s, 0);
  EXPECT_GT(r.end_ns, r.begin_ns);
  EXPECT_FALSE(r.pool.has_value());  // not a pool
}

TEST(OpenLoopDriver, PoolPointsReportThePoolsIdlePath) {
  PoolOptions pool;
  pool.workers = 1;
  auto model = make_async_model<void>("fixed-pool", pool);
  const PointResult r = run_open_loop_point(*model, ResultMechanism::kContinuation, short_point());
  model->shutdown(ShutdownMode::kDrain);
  EXPECT_EQ(r.recorded, 100);
  ASSERT_TRUE(r.pool.has_value());
  EXPECT_EQ(r.pool->wake_syscalls, -1);  // a condition variable's wake-ups cannot be counted
  EXPECT_TRUE(r.backlog.has_queue);
  // The worker lived through the whole point, so its schedstat is in.
  ASSERT_TRUE(r.workers_sched.has_value());
  EXPECT_GE(r.workers_sched->threads, 1);
}

TEST(OpenLoopDriver, BodiesBuildTheRequestedPayload) {
  InlineModel<std::vector<char>> model(false);
  OpenLoopPoint p = short_point();
  p.payload_bytes = 777;
  const PointResult r = run_open_loop_point(model, ResultMechanism::kFuture, p);
  EXPECT_EQ(model.launches, 120);
  EXPECT_EQ(model.value_sizes, std::vector<int64_t>(120, 777));
  EXPECT_EQ(r.recorded, 100);
}

TEST(OpenLoopDriver, FailedLaunchesSaturateThePointAndAreNamed) {
  NoThreadsModel model;
  const PointResult r = run_open_loop_point(model, ResultMechanism::kFuture, short_point());
  EXPECT_EQ(r.launch_failures, r.calls);
  EXPECT_EQ(r.recorded, 0);
  EXPECT_EQ(r.backlog.calls, 0);
  EXPECT_EQ(r.achieved_per_s, 0.0);
  EXPECT_TRUE(r.saturated);
  EXPECT_NE(std::find(r.why_saturated.begin(), r.why_saturated.end(), "thread creation failed"), r.why_saturated.end());
  EXPECT_NE(r.first_error().find("no thread for this call"), std::string::npos) << r.first_error();
}

TEST(OpenLoopDriver, FailedJoinsAreCountedWithTheFirstMessage) {
  InlineModel<long long> model(true);
  const PointResult r = run_open_loop_point(model, ResultMechanism::kFuture, short_point());
  EXPECT_EQ(r.call_errors, r.calls);
  EXPECT_EQ(r.recorded, 0);
  EXPECT_EQ(r.call_error, "join failed on purpose");
  EXPECT_EQ(r.first_error(), "join failed on purpose");
}

}  // namespace
}  // namespace tailscope::exec
