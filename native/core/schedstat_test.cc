#include "core/schedstat.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <thread>

#include "core/clock.h"

namespace tailscope {
namespace {

// Burns `cpu_ns` of this thread's own CPU time (not wall time: on a busy
// machine the thread may wait for a CPU in between).
void spin_for_cpu_ns(int64_t cpu_ns) {
  const int64_t until = thread_cpu_ns() + cpu_ns;
  while (thread_cpu_ns() < until) {
  }
}

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/tailscope_schedstat_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(Schedstat, ReadsTheThreeCounters) {
  const std::string path = write_temp("123456 7890 42\n");
  auto s = read_schedstat(path);
  std::remove(path.c_str());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->run_ns, 123456);
  EXPECT_EQ(s->runqueue_wait_ns, 7890);
  EXPECT_EQ(s->timeslices, 42);
  EXPECT_EQ(s->threads, 1);
}

TEST(Schedstat, MissingFileIsReportedNotZero) {
  std::string error;
  const std::string path = "/proc/self/task/0/schedstat";  // no thread has id 0
  EXPECT_FALSE(read_schedstat(path, &error).has_value());
  EXPECT_NE(error.find(path), std::string::npos) << error;
}

TEST(Schedstat, MalformedFileIsReportedNotZero) {
  const std::string path = write_temp("run queue\n");
  std::string error;
  auto s = read_schedstat(path, &error);
  std::remove(path.c_str());
  EXPECT_FALSE(s.has_value());
  EXPECT_NE(error.find(path), std::string::npos) << error;
}

TEST(Schedstat, SpinningThreadShowsGrowingRunTime) {
  std::string error;
  const auto before = current_thread_schedstat(&error);
  ASSERT_TRUE(before.has_value()) << error;
  constexpr int64_t kSpinCpuNs = 40'000'000;
  spin_for_cpu_ns(kSpinCpuNs);
  const auto after = current_thread_schedstat(&error);
  ASSERT_TRUE(after.has_value()) << error;
  const SchedStat d = *after - *before;
  // Both counters come from the same kernel accounting; schedstat of a
  // running thread can lag by the part of its current slice not yet
  // accounted (a scheduler tick), so half is a floor, not an estimate.
  EXPECT_GE(d.run_ns, kSpinCpuNs / 2);
}

TEST(Schedstat, OtherThreadsListsEveryThreadButTheCaller) {
  std::atomic<pid_t> spinner_tid{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> spun_cpu_ns{0};
  std::thread spinner([&] {
    spinner_tid.store(gettid());
    const int64_t start = thread_cpu_ns();
    while (!stop.load()) spun_cpu_ns.store(thread_cpu_ns() - start);
  });
  while (spinner_tid.load() == 0) std::this_thread::yield();
  const auto before = other_threads_schedstat();
  const int64_t spun_before = spun_cpu_ns.load();
  EXPECT_EQ(before.count(gettid()), 0u);
  ASSERT_EQ(before.count(spinner_tid.load()), 1u);
  while (spun_cpu_ns.load() < spun_before + 40'000'000) std::this_thread::yield();
  const auto after = other_threads_schedstat();
  stop.store(true);
  spinner.join();
  ASSERT_EQ(after.count(spinner_tid.load()), 1u);
  const SchedStat d = after.at(spinner_tid.load()) - before.at(spinner_tid.load());
  EXPECT_GE(d.run_ns, 20'000'000);
  const auto sum = long_lived_delta(before, after);
  ASSERT_TRUE(sum.has_value());
  EXPECT_GE(sum->run_ns, d.run_ns);
}

TEST(Schedstat, LongLivedDeltaCountsOnlyThreadsInBothReadings) {
  const std::map<pid_t, SchedStat> before = {{10, {100, 50, 3, 1}}, {11, {1000, 500, 30, 1}}};
  const std::map<pid_t, SchedStat> after = {{11, {1600, 700, 33, 1}}, {12, {9000, 9000, 90, 1}}};
  const auto d = long_lived_delta(before, after);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->threads, 1);  // 10 ended, 12 started inside the window
  EXPECT_EQ(d->run_ns, 600);
  EXPECT_EQ(d->runqueue_wait_ns, 200);
  EXPECT_EQ(d->timeslices, 3);
  EXPECT_FALSE(long_lived_delta(before, {{12, {1, 1, 1, 1}}}).has_value());
}

}  // namespace
}  // namespace tailscope
