// An interference kernel: one instance's loop of tailscope-stress. Each
// kernel lives in its own file (cpu.cc, l1i.cc, l1d.cc, l2.cc, l3.cc,
// membw.cc, memcap.cc); driver.cc runs N instances with a duty cycle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prof/cache_sizes.h"

namespace tailscope::prof::stress {

// What a kernel did, summed over chunks; the driver turns it into rates.
struct Pressure {
  uint64_t accesses = 0;  // loads/stores (or calls, touches) the kernel made
  uint64_t bytes = 0;     // bytes those accesses moved (cache lines, streamed bytes)
  uint64_t flops = 0;     // cpu kernel only
};

class StressKernel {
 public:
  virtual ~StressKernel() = default;
  // Allocates and first-touches the working set (before the ready line).
  // Returns the bytes it will cycle over, which may differ from the request
  // by rounding (lines, functions, pages) and is reported as such.
  virtual size_t prepare(size_t working_set_bytes) = 0;
  // One short chunk of work (tens of microseconds), added to `pressure`.
  virtual void run_chunk(Pressure& pressure) = 0;
  // The run's progress in [0, 1]; memcap grows its working set with it.
  virtual void set_progress(double /*fraction*/) {}
  // The working set held now.
  virtual size_t working_set_bytes() const = 0;
};

// The kernel names, in the documented order.
const std::vector<std::string>& kernel_names();
// A kernel by name; throws std::invalid_argument for an unknown one.
std::unique_ptr<StressKernel> make_kernel(const std::string& name);
// The default per-instance working set for a kernel on this machine (from the
// caches in sysfs; memcap: `memcap_fraction` of MemAvailable shared by the instances).
size_t default_working_set_bytes(const std::string& name, const CacheSizes& caches, size_t mem_available_bytes,
                                 double memcap_fraction, int instances);
// Whether the kernel's pressure is a memory working set (cpu's is not).
bool has_memory_working_set(const std::string& name);

std::unique_ptr<StressKernel> make_cpu_kernel();
std::unique_ptr<StressKernel> make_l1i_kernel();
std::unique_ptr<StressKernel> make_l1d_kernel();
std::unique_ptr<StressKernel> make_l2_kernel();
std::unique_ptr<StressKernel> make_l3_kernel();
std::unique_ptr<StressKernel> make_membw_kernel();
std::unique_ptr<StressKernel> make_memcap_kernel();

}  // namespace tailscope::prof::stress
