// spin-pool: workers poll for work for `spin_ns` before parking, so a task
// submitted to a spinning worker is picked up after one cache-line transfer
// instead of a kernel wake-up — the minimum hand-off latency a pool can offer,
// paid for with a busy core. The study compares its scheduling delay with the
// baseline's spin_handoff.
//
// The queue is a mutex-protected deque, but idle workers poll the atomic
// `queued_` count without taking the lock, so the lock is only touched when
// there is something to take.
#pragma once

#include <atomic>
#include <deque>
#include <mutex>

#include "exec/executor.h"
#include "exec/internal/idle_parking.h"
#include "exec/internal/worker_threads.h"
#include "exec/pool_options.h"

namespace tailscope::exec {

class SpinPool final : public Executor {
 public:
  explicit SpinPool(PoolOptions options = {});
  ~SpinPool() override;
  std::string_view model() const override { return "spin-pool"; }
  size_t worker_count() const override { return workers_.size(); }
  bool try_submit(WorkItem& item) override;
  void shutdown(ShutdownMode mode = ShutdownMode::kDrain) override;
  ExecutorCounters counters() const override { return {parking_.parks(), parking_.wake_syscalls()}; }

 private:
  void work();
  bool try_pop(WorkItem& out);

  PoolOptions options_;
  std::mutex mu_;
  std::deque<WorkItem> queue_;
  std::atomic<int64_t> queued_{0};
  std::atomic<bool> closed_{false};
  bool cancelled_ = false;  // guarded by mu_
  internal::IdleParking parking_;
  internal::WorkerThreads workers_;
};

}  // namespace tailscope::exec
