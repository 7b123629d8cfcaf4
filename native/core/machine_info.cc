#include "core/machine_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "core/affinity.h"

namespace tailscope {

bool read_small_file(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream buf;
  buf << in.rdbuf();
  *out = buf.str();
  return true;
}

static std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

MachineInfo read_machine_info() {
  MachineInfo info;
  utsname u{};
  if (uname(&u) == 0) {
    info.hostname = u.nodename;
    info.kernel = u.release;
  }
  std::string cpuinfo;
  if (read_small_file("/proc/cpuinfo", &cpuinfo)) {
    std::istringstream lines(cpuinfo);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("model name", 0) == 0) {
        info.cpu_model = trim(line.substr(line.find(':') + 1));
        break;
      }
    }
  }
  if (info.cpu_model.empty()) info.cpu_model = "unknown";
  info.online_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  info.allowed_cpus = format_cpu_list(allowed_cpus());
  std::string gov;
  if (read_small_file("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", &gov))
    info.governor = trim(gov);
  else
    info.governor = "unavailable: no cpufreq in /sys (virtual machine or driver absent)";
  info.page_size_bytes = sysconf(_SC_PAGESIZE);
  info.mem_total_bytes = static_cast<long long>(sysconf(_SC_PHYS_PAGES)) * info.page_size_bytes;
  return info;
}

nlohmann::json to_json(const MachineInfo& info) {
  return {{"hostname", info.hostname},
          {"kernel", info.kernel},
          {"cpu_model", info.cpu_model},
          {"online_cpus", info.online_cpus},
          {"allowed_cpus", info.allowed_cpus},
          {"governor", info.governor},
          {"page_size_bytes", info.page_size_bytes},
          {"mem_total_bytes", info.mem_total_bytes}};
}

}  // namespace tailscope
