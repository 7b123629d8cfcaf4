#include "baseline/reference.h"

#include <algorithm>
#include <stdexcept>

#include "core/affinity.h"

namespace tailscope::baseline {

nlohmann::json Placement::to_json() const {
  if (!pinned) return {{"policy", "unpinned"}, {"allowed_cpus", format_cpu_list(allowed_cpus())}};
  return {{"policy", "pinned"}, {"client_cpu", client_cpu}, {"server_cpu", server_cpu}};
}

static void place(const Placement& placement, int cpu) {
  if (!placement.pinned) return;
  std::string error;
  if (!pin_current_thread(cpu, &error)) throw std::runtime_error("cannot pin thread: " + error);
}

void place_client(const Placement& placement) { place(placement, placement.client_cpu); }
void place_server(const Placement& placement) { place(placement, placement.server_cpu); }

nlohmann::json SameCpuCounter::to_json() const {
  return {{"same_cpu_samples", same},
          {"observed_samples", total},
          {"same_cpu_fraction", total ? static_cast<double>(same) / static_cast<double>(total) : 0.0}};
}

Reference make_reference(std::string name, std::string what, int64_t default_iterations,
                         std::function<ReferenceResult(const ReferenceConfig&)> run) {
  auto checked = [run = std::move(run)](const ReferenceConfig& config) {
    if (config.placement.pinned) {
      const std::vector<int> allowed = allowed_cpus();
      for (int cpu : {config.placement.client_cpu, config.placement.server_cpu})
        if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end())
          throw std::runtime_error("cpu " + std::to_string(cpu) + " is not in this process's allowed CPUs (" +
                                   format_cpu_list(allowed) + ")");
    }
    if (config.iterations < 1 || config.warmup_iterations < 0)
      throw std::runtime_error("iterations must be >= 1 and warm-up >= 0");
    return run(config);
  };
  return {std::move(name), std::move(what), default_iterations, std::move(checked)};
}

const std::vector<Reference>& all_references() {
  static const std::vector<Reference> kReferences = {
      clock_read_reference(),      empty_syscall_reference(), thread_create_reference(),
      condvar_handoff_reference(), spin_handoff_reference(),  tcp_pingpong_reference(),
  };
  return kReferences;
}

}  // namespace tailscope::baseline
