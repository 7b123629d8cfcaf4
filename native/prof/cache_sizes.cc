#include "prof/cache_sizes.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/machine_info.h"

namespace tailscope::prof {

size_t parse_cache_size(const std::string& text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) return 0;
  switch (*end) {
    case 'K':
      return static_cast<size_t>(v) << 10;
    case 'M':
      return static_cast<size_t>(v) << 20;
    case 'G':
      return static_cast<size_t>(v) << 30;
    default:
      return static_cast<size_t>(v);
  }
}

CacheSizes read_cache_sizes(int cpu, const std::string& cpu_root) {
  CacheSizes sizes;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = cpu_root + "/cpu" + std::to_string(cpu) + "/cache/index" + std::to_string(index);
    std::string level, type, size, line;
    if (!read_small_file(dir + "/level", &level)) break;
    read_small_file(dir + "/type", &type);
    read_small_file(dir + "/size", &size);
    const size_t bytes = parse_cache_size(size);
    const int lvl = std::atoi(level.c_str());
    if (lvl == 1 && type.rfind("Data", 0) == 0) sizes.l1d_bytes = bytes;
    if (lvl == 1 && type.rfind("Instruction", 0) == 0) sizes.l1i_bytes = bytes;
    if (lvl == 2) sizes.l2_bytes = bytes;
    if (lvl == 3) sizes.l3_bytes = bytes;
    if (read_small_file(dir + "/coherency_line_size", &line) && std::atoi(line.c_str()) > 0)
      sizes.line_bytes = static_cast<size_t>(std::atoi(line.c_str()));
  }
  return sizes;
}

size_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  unsigned long long kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return static_cast<size_t>(kib) * 1024;
  return 0;
}

}  // namespace tailscope::prof
