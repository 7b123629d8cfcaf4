// Every model × result mechanism: values arrive, exceptions reach the joiner,
// each body runs exactly once, the probe's stamps are ordered, and many
// producers can launch at once.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "exec/async_models.h"
#include "exec/async_probe.h"

namespace tailscope::exec {
namespace {

struct Case {
  std::string model;
  ResultMechanism mechanism;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const std::string& name : async_model_names())
    for (ResultMechanism m : make_async_model<int>(name)->mechanisms()) cases.push_back({name, m});
  return cases;
}

PoolOptions test_pool() {
  PoolOptions o;
  o.workers = 2;
  o.spin_ns = 2'000;
  return o;
}

class AsyncModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(AsyncModelTest, DeliversValuesOfEveryPayloadKind) {
  const Case& c = GetParam();
  {
    auto model = make_async_model<long long>(c.model, test_pool());
    auto call = model->launch(c.mechanism, [] { return 42LL; });
    EXPECT_EQ(join_value(*call), 42LL);
  }
  {
    auto model = make_async_model<std::vector<int>>(c.model, test_pool());
    auto call = model->launch(c.mechanism, [] { return std::vector<int>(10'000, 7); });
    auto v = join_value(*call);
    ASSERT_EQ(v.size(), 10'000u);
    EXPECT_EQ(v.back(), 7);
  }
  {
    auto model = make_async_model<void>(c.model, test_pool());
    std::atomic<int> ran{0};
    auto call = model->launch(c.mechanism, [&] { ran.fetch_add(1); });
    join_value(*call);
    EXPECT_EQ(ran.load(), 1);
  }
}

TEST_P(AsyncModelTest, ExceptionsPropagateToTheJoiner) {
  const Case& c = GetParam();
  auto model = make_async_model<int>(c.model, test_pool());
  auto call = model->launch(c.mechanism, []() -> int { throw std::runtime_error("boom"); });
  bool received = false;
  try {
    call->join([&](int) { received = true; });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    // Join the workers before touching the exception: a worker may still hold
    // the last reference to it (its promise), and libstdc++'s exception
    // reference count is invisible to TSan, so only a join orders the two.
    model->shutdown(ShutdownMode::kDrain);
    EXPECT_STREQ(e.what(), "boom");
  }
  EXPECT_FALSE(received);
}

TEST_P(AsyncModelTest, EachBodyRunsExactlyOnceUnderManyProducers) {
  const Case& c = GetParam();
  constexpr int kProducers = 4, kPerProducer = 40;  // per-call thread models stay small
  auto model = make_async_model<int>(c.model, test_pool());
  std::vector<std::atomic<int>> runs(kProducers * kPerProducer);
  std::vector<std::thread> producers;
  std::atomic<int64_t> sum{0};
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      std::vector<std::unique_ptr<PendingCall<int>>> calls;
      for (int i = 0; i < kPerProducer; ++i) {
        const int id = p * kPerProducer + i;
        calls.push_back(model->launch(c.mechanism, [&runs, id] {
          runs[id].fetch_add(1);
          return id;
        }));
      }
      for (auto& call : calls) sum.fetch_add(join_value(*call));
    });
  for (auto& t : producers) t.join();
  model->shutdown(ShutdownMode::kDrain);
  const int64_t n = kProducers * kPerProducer;
  EXPECT_EQ(sum.load(), n * (n - 1) / 2);
  for (int i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << "call " << i;
}

TEST_P(AsyncModelTest, ProbeStampsAreOrdered) {
  const Case& c = GetParam();
  auto model = make_async_model<long long>(c.model, test_pool());
  AsyncProbeHistograms histograms;
  for (int i = 0; i < 20; ++i) {
    AsyncProbe probe;
    probe.deferred = model->deferred();
    probe.stamp_trigger();
    auto call = model->launch(c.mechanism, [&probe] {
      probe.stamp_fn_start();
      probe.stamp_fn_end();
      return 1LL;
    });
    probe.stamp_request();
    call->join([&](long long) { probe.stamp_received(); });
    ASSERT_TRUE(probe.complete());
    EXPECT_LE(probe.trigger_async_fn_ns, probe.fn_start_ns);
    EXPECT_LE(probe.fn_start_ns, probe.fn_end_ns);
    EXPECT_LE(probe.fn_end_ns, probe.val_received_ns);
    EXPECT_LE(probe.request_val_ns, probe.val_received_ns);
    if (model->deferred()) {
      EXPECT_LE(probe.request_val_ns, probe.fn_start_ns) << "deferred runs inside the request";
    }
    histograms.record(probe);
  }
  EXPECT_EQ(histograms.negative(), 0);
  EXPECT_EQ(histograms.of(AsyncDelay::kTotal).total_count(), 20);
  EXPECT_EQ(histograms.of(AsyncDelay::kDeferralWait).total_count(), model->deferred() ? 20 : 0);
}

TEST_P(AsyncModelTest, UnjoinedCallsAreCleanedUp) {
  // Dropping a call without joining must neither leak a thread nor crash.
  const Case& c = GetParam();
  auto model = make_async_model<int>(c.model, test_pool());
  for (int i = 0; i < 5; ++i) model->launch(c.mechanism, [] { return 1; });
  model->shutdown(ShutdownMode::kDrain);
}

INSTANTIATE_TEST_SUITE_P(AllModels, AsyncModelTest, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.model + "_" + std::string(mechanism_name(info.param.mechanism));
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(AsyncModels, UnknownModelAndMechanismAreClearErrors) {
  EXPECT_THROW(make_async_model<int>("green-threads"), std::invalid_argument);
  auto model = make_async_model<int>("std-async");
  EXPECT_THROW(model->launch(ResultMechanism::kResume, [] { return 1; }), std::invalid_argument);
}

TEST(AsyncModels, PoolCancelBreaksContinuationSlots) {
  PoolOptions o;
  o.workers = 1;
  auto model = make_async_model<int>("fixed-pool", o);
  std::promise<void> started, release;
  auto release_future = release.get_future();
  auto blocker = model->launch(ResultMechanism::kContinuation, [&] {
    started.set_value();
    release_future.wait();
    return 0;
  });
  started.get_future().wait();
  auto queued = model->launch(ResultMechanism::kContinuation, [] { return 1; });
  std::thread canceller([&] { model->shutdown(ShutdownMode::kCancel); });
  EXPECT_THROW(join_value(*queued), std::future_error);
  release.set_value();
  canceller.join();
  EXPECT_EQ(join_value(*blocker), 0);
}

}  // namespace
}  // namespace tailscope::exec
