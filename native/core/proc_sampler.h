// /proc samplers: what a process and the system did while a benchmark ran.
//
// A latency figure means little without the CPU it cost and the queueing
// around it, so servers under test are sampled on a background thread at a
// fixed interval. Each sample reads a handful of small /proc files (a few
// microseconds); the sampler reports its own CPU time so that "negligible
// overhead" is a measured statement, not a claim.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tailscope {

// Cumulative counters of one process, read at one instant.
struct ProcessCounters {
  int64_t utime_ticks = 0, stime_ticks = 0;  // clock ticks (sysconf(_SC_CLK_TCK))
  int64_t rss_bytes = 0;
  int threads = 0;
  int open_fds = -1;  // -1: /proc/PID/fd not readable (another user's process)
  int64_t voluntary_ctx_switches = 0, involuntary_ctx_switches = 0;  // summed over live threads
  bool ctx_switch_tasks_truncated = false;
};

// System-wide counters at one instant.
struct SystemCounters {
  double load1 = 0, load5 = 0, load15 = 0;
  int procs_running = 0;  // run-queue length incl. running tasks (/proc/stat)
  int procs_blocked = 0;
  int64_t cpu_busy_ticks = 0, cpu_user_ticks = 0, cpu_sys_ticks = 0, cpu_total_ticks = 0;
};

// Reads one process's counters; nullopt if it has exited or cannot be read.
std::optional<ProcessCounters> read_process_counters(pid_t pid);
std::optional<SystemCounters> read_system_counters();

// One point of the time series, with rates computed against the previous point.
struct ResourceSample {
  int64_t t_ns = 0;              // monotonic
  double proc_cpu_user_pct = 0;  // % of one core over the interval (200 % = two busy cores)
  double proc_cpu_sys_pct = 0;
  int64_t proc_rss_bytes = 0;
  int proc_threads = 0;
  int proc_open_fds = -1;
  int64_t proc_voluntary_ctx_switches = 0;    // cumulative
  int64_t proc_involuntary_ctx_switches = 0;  // cumulative
  double sys_cpu_busy_pct = 0;                // % of all CPUs over the interval
  double sys_load1 = 0;
  int sys_procs_running = 0;
  bool proc_alive = true;
};

// Samples on its own thread every interval_ms for as long as it runs, which
// for a service is the whole life of the process: the summary is folded in as
// each sample is taken, and only the latest kKeptSamples samples are kept.
// (It used to keep every sample for summary(): 5 a second in every
// tailscope-svc process, so `tailscope soak` saw every service's RSS grow by
// the same ~25-50 KB a minute whatever its load.)
class ResourceSampler {
 public:
  static constexpr size_t kKeptSamples = 256;

  // pid <= 0: sample only the system. interval_ms >= 1.
  ResourceSampler(pid_t pid, int interval_ms);
  ~ResourceSampler();
  ResourceSampler(const ResourceSampler&) = delete;
  ResourceSampler& operator=(const ResourceSampler&) = delete;

  void start();
  void stop();  // idempotent; joins the thread
  // The latest samples (at most kKeptSamples), oldest first.
  std::vector<ResourceSample> samples() const;
  // Summary over every sample taken: mean/max CPU %, max RSS/threads/fds, context
  // switches per second, mean/max load and run queue, and the sampler's own CPU time.
  nlohmann::json summary() const;
  int64_t sampler_cpu_ns() const;

 private:
  void run();
  void take_sample();

  pid_t pid_;
  int interval_ms_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_requested_ = false;
  bool running_ = false;
  // What summary() reports, folded in by take_sample() (every sample, not only the kept ones).
  struct Totals {
    int64_t count = 0;
    int64_t first_t_ns = 0, last_t_ns = 0;
    // Over every sample but the first (its CPU % fields are zero by construction).
    double cpu_sum = 0, cpu_max = 0, user_sum = 0, sys_sum = 0, busy_sum = 0, load_sum = 0, rq_sum = 0;
    int rq_max = 0, alive_points = 0;
    // Over every sample.
    int64_t rss_max = 0;
    int threads_max = 0, fds_max = -1;
    std::optional<ResourceSample> first_alive, last_alive;
  };
  void fold(const ResourceSample& s);  // caller holds mu_
  Totals totals_;
  std::vector<ResourceSample> recent_;  // a ring of at most kKeptSamples; recent_next_ is the oldest once full
  size_t recent_next_ = 0;
  std::optional<ProcessCounters> prev_proc_;
  std::optional<SystemCounters> prev_sys_;
  int64_t prev_t_ns_ = 0;
  int64_t sampler_cpu_ns_ = 0;
};

nlohmann::json to_json(const ResourceSample& s);

}  // namespace tailscope
