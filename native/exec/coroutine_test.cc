// Task<T>: values, exceptions, when_all, nested awaits, cancellation.
#include "exec/coroutine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

#include "exec/fixed_pool.h"
#include "exec/spin_pool.h"

namespace tailscope::exec {
namespace {

PoolOptions two_workers() {
  PoolOptions o;
  o.workers = 2;
  o.spin_ns = 2'000;
  return o;
}

Task<int> square_on(Executor& ex, int x) {
  co_await schedule_on(ex);
  co_return x* x;
}

Task<int> sum_of_squares(Executor& ex, int n) {
  int sum = 0;
  for (int i = 1; i <= n; ++i) sum += co_await square_on(ex, i);  // nested, awaited one by one
  co_return sum;
}

TEST(Coroutine, TaskRunsOnThePoolAndDeliversItsValue) {
  FixedThreadPool pool(two_workers());
  auto t = run_on(pool, [] { return 6 * 7; });
  EXPECT_EQ(sync_wait(t), 42);
}

TEST(Coroutine, TaskThatNeverSuspendsIsAlreadyDone) {
  auto immediate = []() -> Task<int> { co_return 5; };
  auto t = immediate();
  EXPECT_TRUE(t.done());
  EXPECT_EQ(sync_wait(t), 5);
}

TEST(Coroutine, NestedAwaitsResumeOnWorkers) {
  SpinPool pool(two_workers());
  auto t = sum_of_squares(pool, 20);
  EXPECT_EQ(sync_wait(t), 2870);
}

TEST(Coroutine, ExceptionsReachTheAwaiter) {
  FixedThreadPool pool(two_workers());
  auto t = run_on(pool, []() -> int { throw std::logic_error("bad"); });
  EXPECT_THROW(sync_wait(t), std::logic_error);
}

TEST(Coroutine, WhenAllCollectsInOrderAndEachRunsOnce) {
  FixedThreadPool pool(two_workers());
  std::atomic<int> runs{0};
  std::vector<Task<int>> tasks;
  for (int i = 0; i < 100; ++i)
    tasks.push_back(run_on(pool, [&runs, i] {
      runs.fetch_add(1);
      return i;
    }));
  auto all = when_all(std::move(tasks));
  std::vector<int> values = sync_wait(all);
  ASSERT_EQ(values.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(values[i], i);
  EXPECT_EQ(runs.load(), 100);
}

TEST(Coroutine, WhenAllVoidRethrowsTheFirstErrorAfterAllFinished) {
  FixedThreadPool pool(two_workers());
  std::atomic<int> runs{0};
  std::vector<Task<void>> tasks;
  for (int i = 0; i < 10; ++i)
    tasks.push_back(run_on(pool, [&runs, i] {
      runs.fetch_add(1);
      if (i == 3) throw std::runtime_error("three");
    }));
  auto all = when_all(std::move(tasks));
  EXPECT_THROW(sync_wait(all), std::runtime_error);
  EXPECT_EQ(runs.load(), 10);
}

TEST(Coroutine, ScheduleOnAClosedPoolThrowsInTheCoroutine) {
  FixedThreadPool pool(two_workers());
  pool.shutdown();
  auto t = run_on(pool, [] { return 1; });
  EXPECT_THROW(sync_wait(t), ExecutorClosed);
}

TEST(Coroutine, CancelledResumptionThrowsInTheCoroutine) {
  PoolOptions o;
  o.workers = 1;
  FixedThreadPool pool(o);
  std::promise<void> started, release;
  auto release_future = release.get_future();
  pool.submit([&] {
    started.set_value();
    release_future.wait();
  });
  started.get_future().wait();
  auto queued = run_on(pool, [] { return 1; });  // its resumption waits behind the blocker
  std::thread canceller([&] { pool.shutdown(ShutdownMode::kCancel); });
  EXPECT_THROW(sync_wait(queued), ExecutorClosed);
  release.set_value();
  canceller.join();
}

TEST(Coroutine, ManyTasksFromManyThreads) {
  FixedThreadPool pool(two_workers());
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p)
    producers.emplace_back([&, p] {
      std::vector<Task<int>> tasks;
      for (int i = 0; i < 200; ++i) tasks.push_back(square_on(pool, p * 200 + i));
      for (auto& t : tasks) sum.fetch_add(sync_wait(t));
    });
  for (auto& t : producers) t.join();
  int64_t expect = 0;
  for (int64_t i = 0; i < 800; ++i) expect += i * i;
  EXPECT_EQ(sum.load(), expect);
}

}  // namespace
}  // namespace tailscope::exec
