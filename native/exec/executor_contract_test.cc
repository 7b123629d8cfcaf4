// The Executor contract (executor.h), checked identically for every pool.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "exec/fixed_pool.h"
#include "exec/spin_pool.h"
#include "exec/work_stealing.h"

namespace tailscope::exec {
namespace {

template <class Pool>
class ExecutorContract : public ::testing::Test {
 protected:
  std::unique_ptr<Executor> make(size_t workers) {
    PoolOptions o;
    o.workers = workers;
    o.spin_ns = 2'000;  // keep spinning pools from hogging the sanitizer runs
    return std::make_unique<Pool>(o);
  }
};
using Pools = ::testing::Types<FixedThreadPool, SpinPool, WorkStealingPool>;
TYPED_TEST_SUITE(ExecutorContract, Pools);

TYPED_TEST(ExecutorContract, EveryTaskRunsExactlyOnce) {
  constexpr int kTasks = 2000;
  std::vector<std::atomic<int>> runs(kTasks);
  {
    auto pool = this->make(3);
    for (int i = 0; i < kTasks; ++i) pool->submit([&runs, i] { runs[i].fetch_add(1); });
    pool->shutdown(ShutdownMode::kDrain);
  }
  for (int i = 0; i < kTasks; ++i) ASSERT_EQ(runs[i].load(), 1) << "task " << i;
}

TYPED_TEST(ExecutorContract, ManyProducersStress) {
  constexpr int kProducers = 8, kPerProducer = 500;
  std::atomic<int64_t> sum{0};
  std::atomic<int> count{0};
  auto pool = this->make(2);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i)
        pool->submit([&, v = p * kPerProducer + i] {
          sum.fetch_add(v);
          count.fetch_add(1);
        });
    });
  for (auto& t : producers) t.join();
  pool->shutdown();
  const int64_t n = kProducers * kPerProducer;
  EXPECT_EQ(count.load(), n);
  EXPECT_EQ(sum.load(), n * (n - 1) / 2);
}

TYPED_TEST(ExecutorContract, TaskSubmittingTasksDoesNotDeadlock) {
  // A single worker whose task waits for its own child would deadlock if
  // submit() blocked; here the parent only submits, and the children chain.
  std::atomic<int> done{0};
  std::promise<void> all;
  auto pool = this->make(1);
  Executor* ex = pool.get();
  std::function<void(int)> spawn = [&](int depth) {
    done.fetch_add(1);
    if (depth == 0) {
      all.set_value();
      return;
    }
    ex->submit([&, depth] { spawn(depth - 1); });
  };
  pool->submit([&] { spawn(200); });
  all.get_future().get();
  pool->shutdown();
  EXPECT_EQ(done.load(), 201);
}

TYPED_TEST(ExecutorContract, DrainRunsQueuedWorkAndItsChildren) {
  std::atomic<int> children{0};
  auto pool = this->make(2);
  Executor* ex = pool.get();
  for (int i = 0; i < 100; ++i)
    pool->submit([&] {
      ex->submit([&] { children.fetch_add(1); });  // accepted while draining
    });
  pool->shutdown(ShutdownMode::kDrain);
  EXPECT_EQ(children.load(), 100);
}

TYPED_TEST(ExecutorContract, SubmitAfterShutdownIsRejected) {
  auto pool = this->make(1);
  pool->shutdown();
  pool->shutdown();  // idempotent
  EXPECT_THROW(pool->submit([] {}), ExecutorClosed);
  WorkItem item([] {});
  EXPECT_FALSE(pool->try_submit(item));
  EXPECT_TRUE(static_cast<bool>(item)) << "a rejected item stays with the caller";
}

TYPED_TEST(ExecutorContract, CancelDropsQueuedWorkAndBreaksItsPromises) {
  auto pool = this->make(1);
  std::promise<void> blocker_started, release;
  auto release_future = release.get_future();
  pool->submit([&] {
    blocker_started.set_value();
    release_future.wait();
  });
  blocker_started.get_future().wait();
  std::vector<std::future<int>> queued;
  for (int i = 0; i < 10; ++i) {
    std::promise<int> p;
    queued.push_back(p.get_future());
    pool->submit([p = std::move(p)]() mutable { p.set_value(1); });
  }
  std::thread releaser([&] {
    // Let cancel() take the queue first; the blocker only ends after that.
    while (true) {
      bool all_broken = true;
      for (auto& f : queued) all_broken &= f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
      if (all_broken) break;
      std::this_thread::yield();
    }
    release.set_value();
  });
  pool->shutdown(ShutdownMode::kCancel);
  releaser.join();
  for (auto& f : queued) {
    try {
      f.get();
      FAIL() << "a cancelled task ran";
    } catch (const std::future_error& e) {
      EXPECT_EQ(e.code(), std::future_errc::broken_promise);
    }
  }
}

TEST(WorkStealingPool, IdleWorkersStealFromABusySibling) {
  PoolOptions o;
  o.workers = 2;
  o.spin_ns = 2'000;
  WorkStealingPool pool(o);
  std::atomic<int> done{0};
  // One task fans out 200 children onto its own deque, then keeps its worker
  // busy until they have all run: the other worker can only get them by
  // stealing, so every one of them is a steal (the parent too, if that
  // worker took it from the deque it was submitted to).
  pool.submit([&] {
    for (int i = 0; i < 200; ++i) pool.submit([&] { done.fetch_add(1); });
    while (done.load() < 200) std::this_thread::yield();
  });
  while (done.load() < 200) std::this_thread::yield();
  pool.shutdown();
  EXPECT_EQ(done.load(), 200);
  EXPECT_GE(pool.steals(), 200);
  EXPECT_LE(pool.steals(), 201);
}

}  // namespace
}  // namespace tailscope::exec
