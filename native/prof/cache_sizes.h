// Cache sizes from sysfs (/sys/devices/system/cpu/cpuN/cache/index*), which
// size the stress kernels' working sets, and the memory free for them.
#pragma once

#include <cstddef>
#include <string>

namespace tailscope::prof {

struct CacheSizes {
  size_t l1d_bytes = 0;  // 0: sysfs did not say
  size_t l1i_bytes = 0;
  size_t l2_bytes = 0;
  size_t l3_bytes = 0;
  size_t line_bytes = 64;
};

// Caches of `cpu` as sysfs lists them; `cpu_root` is for tests.
CacheSizes read_cache_sizes(int cpu, const std::string& cpu_root = "/sys/devices/system/cpu");

// "32K" / "1024K" / "32M" → bytes; 0 if unreadable.
size_t parse_cache_size(const std::string& text);

// MemAvailable from /proc/meminfo in bytes, 0 if unknown.
size_t mem_available_bytes();

}  // namespace tailscope::prof
