// Facts about the machine a result was measured on. Every result document
// carries them, because a figure without its machine is not reproducible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tailscope {

struct MachineInfo {
  std::string hostname;
  std::string kernel;        // uname -r
  std::string cpu_model;     // /proc/cpuinfo "model name"
  int online_cpus = 0;       // sysconf(_SC_NPROCESSORS_ONLN)
  std::string allowed_cpus;  // cpu list this process may use
  std::string governor;      // cpufreq governor of cpu0, or "unavailable: <why>"
  long page_size_bytes = 0;
  long long mem_total_bytes = 0;
};

MachineInfo read_machine_info();
nlohmann::json to_json(const MachineInfo& info);

// Reads a whole small file (e.g. under /proc or /sys); nullopt-like "" + false on failure.
bool read_small_file(const std::string& path, std::string* out);

}  // namespace tailscope
