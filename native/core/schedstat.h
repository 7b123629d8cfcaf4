// /proc/<tid>/schedstat: how long a thread ran, and how long it was runnable
// but waited for a CPU (on a run queue). A scheduling delay of milliseconds
// with a steady backlog is usually the second: the worker was not running.
//
// The kernel writes three numbers per thread: time on a CPU (ns), time
// waiting on a run queue (ns), timeslices run. They are cumulative, so a
// figure for a window is the difference of two readings.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tailscope {

struct SchedStat {
  int64_t run_ns = 0;
  int64_t runqueue_wait_ns = 0;
  int64_t timeslices = 0;
  int threads = 0;  // how many threads the figures are summed over

  // The change since `earlier` (same thread(s)); keeps this reading's thread count.
  SchedStat operator-(const SchedStat& earlier) const {
    return {run_ns - earlier.run_ns, runqueue_wait_ns - earlier.runqueue_wait_ns, timeslices - earlier.timeslices,
            threads};
  }
};

// Reads one schedstat file. nullopt when it is missing, unreadable or not
// three numbers (a kernel without CONFIG_SCHED_INFO has no such file): the
// figure is then unavailable, never 0. `error`, if given, receives why,
// naming the path.
std::optional<SchedStat> read_schedstat(const std::string& path, std::string* error = nullptr);

// The calling thread's counters (/proc/thread-self/schedstat).
std::optional<SchedStat> current_thread_schedstat(std::string* error = nullptr);

// Every thread of this process except the caller, by thread id. Threads whose
// file cannot be read (they exited while being listed) are left out.
std::map<pid_t, SchedStat> other_threads_schedstat();

// Sums the change of every thread present in both readings: the threads that
// lived through the whole window (a pool's workers), not the ones that were
// created or ended inside it. nullopt when no thread is in both.
std::optional<SchedStat> long_lived_delta(const std::map<pid_t, SchedStat>& before,
                                          const std::map<pid_t, SchedStat>& after);

}  // namespace tailscope
