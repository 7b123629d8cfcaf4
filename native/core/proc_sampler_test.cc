#include "core/proc_sampler.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

#include "core/clock.h"

namespace tailscope {
namespace {

// A known child: `threads` extra threads, `extra_fds` extra open fds,
// `rss_mib` MiB touched; threads spin or sleep 1 ms at a time until the child
// is killed. spawn_known_child() returns only once the child reports (through
// a pipe) that all of that is in place, so the test never depends on how fast
// the child starts (sanitizer builds are slow).
pid_t spawn_known_child(int threads, int extra_fds, int rss_mib, bool spin) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  pid_t pid = fork();
  if (pid != 0) {
    close(ready[1]);
    char byte = 0;
    ssize_t n = read(ready[0], &byte, 1);
    close(ready[0]);
    return n == 1 ? pid : -1;
  }
  close(ready[0]);
  std::vector<int> fds;
  for (int i = 0; i < extra_fds; ++i) fds.push_back(open("/dev/null", O_RDONLY));
  std::vector<char> memory(static_cast<size_t>(rss_mib) << 20);
  for (size_t i = 0; i < memory.size(); i += 4096) memory[i] = 1;
  std::atomic<int> started{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      started.fetch_add(1);
      for (;;) {
        if (!spin) usleep(1000);  // each sleep is one voluntary context switch
      }
    });
  while (started.load() < threads) usleep(100);
  char byte = 1;
  if (write(ready[1], &byte, 1) != 1) _exit(1);
  for (;;) pause();
}

void stop_child(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(ProcSampler, SeesThreadsFdsAndMemoryOfAKnownChild) {
  pid_t pid = spawn_known_child(/*threads=*/3, /*extra_fds=*/20, /*rss_mib=*/64, /*spin=*/false);
  ASSERT_GT(pid, 0);
  ResourceSampler sampler(pid, 50);
  sampler.start();
  usleep(600 * 1000);
  sampler.stop();
  stop_child(pid);
  nlohmann::json s = sampler.summary();
  ASSERT_TRUE(s.contains("process")) << s.dump(2);
  const auto& p = s["process"];
  EXPECT_GE(p["threads_max"].get<int>(), 4);        // main + 3
  EXPECT_GE(p["open_fds_max"].get<int>(), 3 + 20);  // stdio + 20
  EXPECT_GE(p["rss_bytes_max"].get<int64_t>(), 64LL << 20);
  // 3 threads sleeping 1 ms each: thousands of switches per second; 100/s is
  // a floor no working sampler misses, even on a loaded machine.
  EXPECT_GT(p["voluntary_ctx_switches_per_s"].get<double>(), 100.0);
  EXPECT_GT(s["samples"].get<int>(), 2);
  EXPECT_GE(s["system"]["procs_running_max"].get<int>(), 1);
}

TEST(ProcSampler, BusyChildUsesMoreCpuThanSleepingChild) {
  pid_t busy = spawn_known_child(1, 0, 1, /*spin=*/true);
  pid_t idle = spawn_known_child(1, 0, 1, /*spin=*/false);
  ASSERT_GT(busy, 0);
  ASSERT_GT(idle, 0);
  ResourceSampler busy_sampler(busy, 50), idle_sampler(idle, 50);
  busy_sampler.start();
  idle_sampler.start();
  usleep(700 * 1000);
  busy_sampler.stop();
  idle_sampler.stop();
  stop_child(busy);
  stop_child(idle);
  double busy_cpu = busy_sampler.summary()["process"]["cpu_pct_mean"];
  double idle_cpu = idle_sampler.summary()["process"]["cpu_pct_mean"];
  EXPECT_GT(busy_cpu, idle_cpu);
  EXPECT_GT(busy_cpu, 0.0);
}

TEST(ProcSampler, ProcessThatExitsMidRunIsReportedNotFatal) {
  pid_t pid = spawn_known_child(1, 0, 1, false);
  ASSERT_GT(pid, 0);
  ResourceSampler sampler(pid, 50);
  sampler.start();
  usleep(150 * 1000);
  stop_child(pid);  // reaped: /proc/PID disappears
  usleep(300 * 1000);
  sampler.stop();
  nlohmann::json s = sampler.summary();
  double alive = s["process"]["alive_fraction"];
  EXPECT_LT(alive, 1.0);
  auto samples = sampler.samples();
  EXPECT_FALSE(samples.back().proc_alive);
}

// A sampler runs for the life of a service (tailscope-svc samples itself
// every 200 ms): what it holds must not grow with the number of samples, while
// the summary still covers every one of them. It used to keep every sample,
// and `tailscope soak` saw every service's RSS grow by the same amount a minute.
TEST(ProcSampler, HoldsABoundedWindowWhileTheSummaryCoversEverySample) {
  ResourceSampler sampler(getpid(), 1);
  sampler.start();
  const int64_t give_up = monotonic_ns() + 30'000'000'000;
  while (sampler.summary()["samples"].get<int64_t>() <= int64_t{3 * ResourceSampler::kKeptSamples} &&
         monotonic_ns() < give_up)
    usleep(20 * 1000);
  sampler.stop();
  const nlohmann::json s = sampler.summary();
  const int64_t taken = s["samples"].get<int64_t>();
  ASSERT_GT(taken, int64_t{3 * ResourceSampler::kKeptSamples}) << "the sampler took too few samples in 30 s";
  const std::vector<ResourceSample> kept = sampler.samples();
  EXPECT_EQ(kept.size(), ResourceSampler::kKeptSamples);
  for (size_t i = 1; i < kept.size(); ++i) EXPECT_LT(kept[i - 1].t_ns, kept[i].t_ns) << "oldest first, at " << i;
  // The summary still covers the whole run, not only the kept window.
  EXPECT_GT(s["process"]["alive_fraction"].get<double>(), 0.99);
  EXPECT_GE(s["process"]["threads_max"].get<int>(), 2);  // this thread and the sampler's
  EXPECT_GT(s["process"]["rss_bytes_max"].get<int64_t>(), 0);
  EXPECT_GT(s["process"].value("voluntary_ctx_switches_per_s", 0.0), 0.0);
}

TEST(ProcSampler, SummaryMatchesTheKeptSamplesOfAShortRun) {
  pid_t pid = spawn_known_child(/*threads=*/2, /*extra_fds=*/5, /*rss_mib=*/8, /*spin=*/false);
  ASSERT_GT(pid, 0);
  ResourceSampler sampler(pid, 20);
  sampler.start();
  usleep(300 * 1000);
  sampler.stop();
  stop_child(pid);
  const nlohmann::json s = sampler.summary();
  const std::vector<ResourceSample> kept = sampler.samples();
  ASSERT_LT(kept.size(), ResourceSampler::kKeptSamples);
  ASSERT_EQ(s["samples"].get<size_t>(), kept.size());
  int64_t rss_max = 0;
  int threads_max = 0, fds_max = -1;
  double cpu_sum = 0;
  for (const ResourceSample& p : kept) {
    rss_max = std::max(rss_max, p.proc_rss_bytes);
    threads_max = std::max(threads_max, p.proc_threads);
    fds_max = std::max(fds_max, p.proc_open_fds);
  }
  for (size_t i = 1; i < kept.size(); ++i) cpu_sum += kept[i].proc_cpu_user_pct + kept[i].proc_cpu_sys_pct;
  EXPECT_EQ(s["process"]["rss_bytes_max"].get<int64_t>(), rss_max);
  EXPECT_EQ(s["process"]["threads_max"].get<int>(), threads_max);
  EXPECT_EQ(s["process"]["open_fds_max"].get<int>(), fds_max);
  EXPECT_DOUBLE_EQ(s["process"]["cpu_pct_mean"].get<double>(), cpu_sum / static_cast<double>(kept.size() - 1));
}

TEST(ProcSampler, SystemOnlySamplerAndReadersWork) {
  auto sys = read_system_counters();
  ASSERT_TRUE(sys.has_value());
  EXPECT_GE(sys->procs_running, 1);  // at least this thread
  EXPECT_GT(sys->cpu_total_ticks, 0);
  auto self = read_process_counters(getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_GE(self->threads, 1);
  EXPECT_GT(self->rss_bytes, 0);
  EXPECT_FALSE(read_process_counters(-5).has_value());
  ResourceSampler sampler(0, 20);
  sampler.start();
  usleep(100 * 1000);
  sampler.stop();
  sampler.stop();  // idempotent
  nlohmann::json s = sampler.summary();
  EXPECT_FALSE(s.contains("process"));
  EXPECT_TRUE(s.contains("system"));
  // Reading /proc costs CPU, so a sampler that took samples has spent some:
  // 0 would mean its own cost is not being measured.
  EXPECT_GT(s["samples"].get<int>(), 0);
  EXPECT_GT(s["sampler_cpu_ns"].get<int64_t>(), 0);
  EXPECT_EQ(s["sampler_cpu_ns"].get<int64_t>(), sampler.sampler_cpu_ns());
}

}  // namespace
}  // namespace tailscope
