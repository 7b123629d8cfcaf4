#include "core/rusage.h"

#include <sys/resource.h>

namespace tailscope {
namespace {

int64_t microseconds(const timeval& t) { return static_cast<int64_t>(t.tv_sec) * 1'000'000 + t.tv_usec; }

// Seconds as getrusage's timeval spells them (whole seconds + microseconds ÷
// 1e6): the same double, to the last bit, as the documents written before.
double seconds(int64_t us) {
  const int64_t whole_s = us / 1'000'000;
  return static_cast<double>(whole_s) + static_cast<double>(us % 1'000'000) / 1e6;
}

}  // namespace

ProcessUsage read_process_usage() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  ProcessUsage u;
  u.user_us = microseconds(ru.ru_utime);
  u.sys_us = microseconds(ru.ru_stime);
  u.max_rss_bytes = static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux counts ru_maxrss in KiB
  u.voluntary_ctx_switches = ru.ru_nvcsw;
  u.involuntary_ctx_switches = ru.ru_nivcsw;
  return u;
}

int64_t process_cpu_ns() { return read_process_usage().cpu_ns(); }

nlohmann::json process_usage_json(const ProcessUsage& usage) {
  return {{"user_s", seconds(usage.user_us)},
          {"sys_s", seconds(usage.sys_us)},
          {"max_rss_bytes", usage.max_rss_bytes},
          {"voluntary_ctx_switches", usage.voluntary_ctx_switches},
          {"involuntary_ctx_switches", usage.involuntary_ctx_switches}};
}

}  // namespace tailscope
