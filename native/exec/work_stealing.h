// work-stealing: one deque per worker. A task submitted from inside the pool
// goes to the submitting worker's own deque (popped LIFO: the freshest, cache-
// warm work first); outside submissions are dealt round-robin. An idle worker
// steals the oldest item (FIFO end) of a sibling, spins briefly, then parks.
//
// Each deque has its own mutex rather than a Chase–Lev lock-free deque: the
// property measured here is where the work goes and who wakes, and a
// per-deque lock is uncontended except when a steal races a pop.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "exec/executor.h"
#include "exec/internal/idle_parking.h"
#include "exec/internal/worker_threads.h"
#include "exec/pool_options.h"

namespace tailscope::exec {

class WorkStealingPool final : public Executor {
 public:
  explicit WorkStealingPool(PoolOptions options = {});
  ~WorkStealingPool() override;
  std::string_view model() const override { return "work-stealing"; }
  size_t worker_count() const override { return workers_.size(); }
  bool try_submit(WorkItem& item) override;
  void shutdown(ShutdownMode mode = ShutdownMode::kDrain) override;
  ExecutorCounters counters() const override { return {parking_.parks(), parking_.wake_syscalls()}; }

  // Items taken from a sibling's deque so far (for tests and reports).
  int64_t steals() const { return steals_.load(std::memory_order_relaxed); }

 private:
  struct alignas(64) WorkerDeque {
    std::mutex mu;
    std::deque<WorkItem> items;
  };
  void work(size_t index);
  bool try_take(size_t index, WorkItem& out);

  PoolOptions options_;
  std::vector<std::unique_ptr<WorkerDeque>> deques_;
  std::atomic<int64_t> queued_{0};
  std::atomic<uint64_t> next_{0};
  std::atomic<int64_t> steals_{0};
  std::mutex lifecycle_mu_;  // orders submit vs shutdown
  std::atomic<bool> closed_{false};
  bool cancelled_ = false;  // guarded by lifecycle_mu_
  internal::IdleParking parking_;
  internal::WorkerThreads workers_;
};

}  // namespace tailscope::exec
