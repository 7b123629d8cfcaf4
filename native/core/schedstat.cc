#include "core/schedstat.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace tailscope {

std::optional<SchedStat> read_schedstat(const std::string& path, std::string* error) {
  std::ifstream file(path);
  if (!file) {
    if (error) *error = path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  SchedStat s;
  if (!(file >> s.run_ns >> s.runqueue_wait_ns >> s.timeslices)) {
    if (error) *error = path + ": not three counters (run ns, run-queue wait ns, timeslices)";
    return std::nullopt;
  }
  s.threads = 1;
  return s;
}

std::optional<SchedStat> current_thread_schedstat(std::string* error) {
  return read_schedstat("/proc/thread-self/schedstat", error);
}

std::map<pid_t, SchedStat> other_threads_schedstat() {
  std::map<pid_t, SchedStat> out;
  const pid_t self = gettid();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const std::string name = entry.path().filename().string();
    char* end = nullptr;
    const long tid = std::strtol(name.c_str(), &end, 10);
    if (end == name.c_str() || *end != '\0' || tid == self) continue;
    if (auto s = read_schedstat(entry.path().string() + "/schedstat")) out[static_cast<pid_t>(tid)] = *s;
  }
  return out;
}

std::optional<SchedStat> long_lived_delta(const std::map<pid_t, SchedStat>& before,
                                          const std::map<pid_t, SchedStat>& after) {
  SchedStat sum;
  for (const auto& [tid, later] : after) {
    auto it = before.find(tid);
    if (it == before.end()) continue;
    const SchedStat d = later - it->second;
    sum.run_ns += d.run_ns;
    sum.runqueue_wait_ns += d.runqueue_wait_ns;
    sum.timeslices += d.timeslices;
    ++sum.threads;
  }
  if (sum.threads == 0) return std::nullopt;
  return sum;
}

}  // namespace tailscope
