// This process's own resource usage as the kernel accounts it
// (getrusage(RUSAGE_SELF)): CPU time split into user and system, peak RSS and
// context switches. The kernel counts CPU time in scheduler ticks, so a
// difference of two reads means something only over many ticks (milliseconds
// of CPU), never for one operation.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace tailscope {

struct ProcessUsage {
  int64_t user_us = 0;
  int64_t sys_us = 0;
  int64_t max_rss_bytes = 0;
  int64_t voluntary_ctx_switches = 0;    // the process waited (I/O, a lock, a sleep)
  int64_t involuntary_ctx_switches = 0;  // the scheduler took the CPU away

  int64_t cpu_ns() const { return (user_us + sys_us) * 1000; }
};

ProcessUsage read_process_usage();

// User + system CPU time of this process, in ns.
int64_t process_cpu_ns();

// The `cpu` section of a tailscope-svc service result: user_s, sys_s,
// max_rss_bytes, voluntary_ctx_switches, involuntary_ctx_switches. The Python
// side reads these keys (tailscope.studies): keep them as they are.
nlohmann::json process_usage_json(const ProcessUsage& usage);

}  // namespace tailscope
