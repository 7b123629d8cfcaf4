#include "prof/stress/kernel.h"

#include <stdexcept>

namespace tailscope::prof::stress {

const std::vector<std::string>& kernel_names() {
  static const std::vector<std::string> names = {"cpu", "l1i", "l1d", "l2", "l3", "membw", "memcap"};
  return names;
}

std::unique_ptr<StressKernel> make_kernel(const std::string& name) {
  if (name == "cpu") return make_cpu_kernel();
  if (name == "l1i") return make_l1i_kernel();
  if (name == "l1d") return make_l1d_kernel();
  if (name == "l2") return make_l2_kernel();
  if (name == "l3") return make_l3_kernel();
  if (name == "membw") return make_membw_kernel();
  if (name == "memcap") return make_memcap_kernel();
  throw std::invalid_argument("--kernel: '" + name + "' is not cpu, l1i, l1d, l2, l3, membw or memcap");
}

bool has_memory_working_set(const std::string& name) { return name != "cpu"; }

size_t default_working_set_bytes(const std::string& name, const CacheSizes& caches, size_t mem_available_bytes,
                                 double memcap_fraction, int instances) {
  // Sizes fill the level they target (iBench's choice), falling back to
  // common sizes when sysfs does not list a cache.
  auto or_default = [](size_t v, size_t fallback) { return v ? v : fallback; };
  if (name == "l1i") return 4 * or_default(caches.l1i_bytes, 32 << 10);  // a footprint L1I cannot hold
  if (name == "l1d") return or_default(caches.l1d_bytes, 32 << 10);
  if (name == "l2") return or_default(caches.l2_bytes, 1 << 20);
  if (name == "l3") return or_default(caches.l3_bytes, 32 << 20);
  if (name == "membw") return 8 * or_default(caches.l3_bytes, 32 << 20);  // streaming far beyond the LLC
  if (name == "memcap")
    return static_cast<size_t>(static_cast<double>(mem_available_bytes) * memcap_fraction) /
           static_cast<size_t>(instances);
  return 3 * 32 * 32 * sizeof(double);  // cpu: three 32×32 matrices, resident in L1
}

}  // namespace tailscope::prof::stress
