// What every pool is configured with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tailscope::exec {

struct PoolOptions {
  size_t workers = 1;
  // Worker i is pinned to worker_cpus[i % size]; empty = not pinned.
  std::vector<int> worker_cpus;
  // Spinning pools: how long an idle worker polls before parking.
  int64_t spin_ns = 50'000;
};

namespace internal {
// Pins the calling worker as `options` says; a refused pin is ignored (the
// engine validates CPUs before building pools, and tests never pin).
void place_worker(const PoolOptions& options, size_t index);
}  // namespace internal

}  // namespace tailscope::exec
