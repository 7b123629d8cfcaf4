// The threads of a pool, written once for every pool: each worker is placed
// (pinned when asked) and marked as the pool's own before it runs — so a
// draining pool can tell a task's children from outside work — and the
// threads are joined exactly once, whether shutdown() comes from the owner,
// the destructor, or both.
#pragma once

#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include "exec/executor.h"
#include "exec/pool_options.h"

namespace tailscope::exec::internal {

class WorkerThreads {
 public:
  // max(options.workers, 1) threads, thread i running work(i). `pool` and
  // `options` must outlive the threads (they are the pool's own members).
  template <class Work>
  void start(const Executor& pool, const PoolOptions& options, Work work) {
    const size_t n = options.workers == 0 ? 1 : options.workers;
    threads_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      threads_.emplace_back([&pool, &options, work, i] {
        place_worker(options, i);
        current_executor() = &pool;
        current_worker_index() = static_cast<int>(i);
        work(i);
      });
    }
  }
  size_t size() const { return threads_.size(); }
  void join() {
    std::call_once(joined_, [this] {
      for (auto& t : threads_) t.join();
    });
  }

 private:
  std::once_flag joined_;
  std::vector<std::thread> threads_;
};

}  // namespace tailscope::exec::internal
