#include "exec/executor.h"

#include "core/affinity.h"
#include "exec/pool_options.h"

namespace tailscope::exec::internal {

const Executor*& current_executor() noexcept {
  thread_local const Executor* executor = nullptr;
  return executor;
}

int& current_worker_index() noexcept {
  thread_local int index = -1;
  return index;
}

void place_worker(const PoolOptions& options, size_t index) {
  if (!options.worker_cpus.empty()) pin_current_thread(options.worker_cpus[index % options.worker_cpus.size()]);
}

}  // namespace tailscope::exec::internal
