// Hardware and software counters of one service process (or of its CPUs),
// read with perf_event_open(2).
//
// Process mode opens every event on a forked child *before it execs*, with
// `inherit` and `enable_on_exec`: the child is still single-threaded, so every
// thread and process it creates later inherits the counters and none escapes.
// That is the real fix for perf's ESRCH on multi-threaded services (attaching
// to a running PID walks its threads while they come and go). CPU mode counts
// everything that runs on the given CPUs, the workaround for pinned services.
//
// A figure that could not be measured is unavailable with the errno and the
// reason, never 0: events that fail to open, and events that open but never
// count (time_running = 0, or a PMU that reports 0 cycles while enabled).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "prof/events.h"

namespace tailscope::prof {

enum class CounterMode { kOff, kProcess, kCpu };
// "off" | "process" | "cpu"; throws std::invalid_argument naming the flag value.
CounterMode parse_counter_mode(const std::string& text);
const char* to_string(CounterMode mode);

struct EventReading {
  std::string name;
  bool hardware = true;
  std::string source;
  std::optional<uint64_t> value;  // nullopt: unavailable (see reason, error_number)
  double scaled_value = 0;        // value × time_enabled / time_running × sysfs scale
  uint64_t time_enabled_ns = 0;
  uint64_t time_running_ns = 0;
  int error_number = 0;  // errno of perf_event_open, 0 if it opened
  std::string reason;
};

// Why perf_event_open failed with `err`, in words a user can act on.
std::string open_failure_reason(int err);

class CounterSet {
 public:
  CounterSet() = default;
  ~CounterSet();
  CounterSet(CounterSet&& other) noexcept;
  CounterSet& operator=(CounterSet&& other) noexcept;
  CounterSet(const CounterSet&) = delete;
  CounterSet& operator=(const CounterSet&) = delete;

  // Every event of `table` on process `pid` and all its future threads and
  // children. With `enable_on_exec` the counters start at the pid's next
  // execve (the caller forks, opens, then lets the child exec); otherwise at once.
  static CounterSet for_process(pid_t pid, const std::vector<EventSpec>& table, bool enable_on_exec);
  // Every event of `table` on each CPU of `cpus` (all tasks), summed.
  static CounterSet for_cpus(const std::vector<int>& cpus, const std::vector<EventSpec>& table);

  // Current values. Safe after the target exited (the kernel keeps the final
  // counts, including those of exited threads, for the fd holder).
  std::vector<EventReading> read() const;
  CounterMode mode() const { return mode_; }

 private:
  struct OpenEvent {
    EventSpec spec;
    std::vector<int> fds;  // one per CPU in CPU mode, else one
    int error_number = 0;
    std::string reason;
  };
  void close_all();

  CounterMode mode_ = CounterMode::kOff;
  std::vector<OpenEvent> events_;
};

// Sums readings of the same events (a restarted service's incarnations).
std::vector<EventReading> sum_readings(const std::vector<std::vector<EventReading>>& parts);

// The `counters` section of a result document: {mode, events, derived}.
// `pipeline_width` is the issue/dispatch slots per cycle for top-down when the
// PMU gives no slot count (4 on Intel cores before Ice Lake, 6 on AMD Zen 4).
nlohmann::json counters_json(CounterMode mode, const std::vector<EventReading>& readings, int pipeline_width);
// The same section when counting is off or could not start.
nlohmann::json counters_unavailable_json(CounterMode mode, const std::string& reason);

// Derived figures: IPC, MPKI per cache and TLB, top-down level 1. Each is a
// number or null, with the reason under derived.reasons.<name>.
nlohmann::json derived_json(const std::vector<EventReading>& readings, int pipeline_width);

// The pipeline width to assume for this CPU (documented per vendor in docs/prof.md).
int default_pipeline_width(const CpuIdentity& cpu);

}  // namespace tailscope::prof
