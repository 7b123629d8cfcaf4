// The worker loop shared by the spinning pools (spin-pool, work-stealing):
// run work while there is some; when idle, spin for options.spin_ns polling
// for work, then park until a submit wakes the worker. Stop only when the
// pool is closed and nothing is queued (a sibling still running a task drains
// that task's children itself). Only how a worker takes work differs between
// the pools — one queue, or its own deque then stealing — so that is the
// `try_take(WorkItem&)` parameter; the template inlines it on the hot path.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/clock.h"
#include "exec/executor.h"
#include "exec/internal/idle_parking.h"
#include "exec/pool_options.h"
#include "exec/work_item.h"

namespace tailscope::exec::internal {

template <class TryTake>
void run_spin_then_park_worker(const PoolOptions& options, const std::atomic<int64_t>& queued,
                               const std::atomic<bool>& closed, IdleParking& parking, TryTake&& try_take) {
  WorkItem item;
  for (;;) {
    if (try_take(item)) {
      item();
      continue;
    }
    const int64_t spin_until = monotonic_ns() + options.spin_ns;
    bool got = false;
    for (int i = 0; !got; ++i) {
      if (closed.load() && queued.load() == 0) return;
      got = try_take(item);
      if (got) break;
      cpu_relax();
      if ((i & 63) == 63 && monotonic_ns() >= spin_until) break;  // read the clock every 64 polls only
    }
    if (got) {
      item();
      continue;
    }
    parking.park_unless([&] { return queued.load() > 0 || closed.load(); });
  }
}

}  // namespace tailscope::exec::internal
