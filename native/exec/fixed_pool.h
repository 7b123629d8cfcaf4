// fixed-pool: N workers sharing one queue behind one mutex and one condition
// variable — the textbook pool, and what DeathStarBench-style services put
// behind their RPC handlers. An idle worker sleeps in the kernel, so at low
// load each task pays one condvar wake-up: the study compares its scheduling
// delay with the baseline's condvar_handoff.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "exec/executor.h"
#include "exec/internal/worker_threads.h"
#include "exec/pool_options.h"

namespace tailscope::exec {

class FixedThreadPool final : public Executor {
 public:
  explicit FixedThreadPool(PoolOptions options = {});
  ~FixedThreadPool() override;
  std::string_view model() const override { return "fixed-pool"; }
  size_t worker_count() const override { return workers_.size(); }
  bool try_submit(WorkItem& item) override;
  void shutdown(ShutdownMode mode = ShutdownMode::kDrain) override;
  ExecutorCounters counters() const override;

 private:
  void work();

  PoolOptions options_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<WorkItem> queue_;
  bool closed_ = false;     // no more outside work
  bool cancelled_ = false;  // drop instead of run
  std::atomic<int64_t> parks_{0};
  internal::WorkerThreads workers_;
};

}  // namespace tailscope::exec
