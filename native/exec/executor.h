// Executor: the one small interface every pooled model implements
// (fixed_pool.h, spin_pool.h, work_stealing.h). The per-call models
// (deferred, std-async, std-thread) have no long-lived threads and are
// AsyncModels only (async_model.h).
//
// Contract, checked by each model's *_test.cc:
//  * every accepted WorkItem runs exactly once, on one of the executor's threads;
//  * a WorkItem may submit further WorkItems to the same executor (no deadlock:
//    submit never waits for a task to finish);
//  * a WorkItem must not throw (the async layer catches and forwards
//    exceptions to the joiner); one that does terminates the process, as an
//    exception escaping a std::thread would;
//  * shutdown(kDrain) stops accepting work from outside, runs everything
//    already queued plus whatever those items submit (a running task may
//    still submit), then joins the threads;
//    shutdown(kCancel) rejects every submission (a running task's too),
//    destroys queued items without running them (a captured std::promise then
//    breaks: the joiner gets std::future_error(broken_promise)), lets running
//    items finish, joins. Both are idempotent; the destructor drains.
//    shutdown() must not be called from one of the executor's own threads.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "exec/work_item.h"

namespace tailscope::exec {

enum class ShutdownMode { kDrain, kCancel };

// What a pool's idle path did so far (monotonic counters; a benchmark takes
// differences). `parks`: a worker went to sleep in the kernel because it found
// nothing to do; `wake_syscalls`: a submitter made a futex wake syscall (-1:
// not counted, e.g. a condition variable's notify). Both are bumped only on
// paths that sleep or make a syscall anyway.
struct ExecutorCounters {
  int64_t parks = 0;
  int64_t wake_syscalls = 0;
};

// Thrown by submit() once the executor no longer accepts work.
class ExecutorClosed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string_view model() const = 0;
  virtual size_t worker_count() const = 0;
  // Queues `item` (moving from it) and returns true; or returns false and
  // leaves `item` untouched when the executor no longer accepts work: after
  // shutdown began, except from one of its own threads while draining (so a
  // task's children still run).
  virtual bool try_submit(WorkItem& item) = 0;
  // try_submit, throwing ExecutorClosed on rejection (the item is destroyed).
  void submit(WorkItem item) {
    if (!try_submit(item)) throw ExecutorClosed(std::string(model()) + ": submit after shutdown");
  }
  virtual void shutdown(ShutdownMode mode = ShutdownMode::kDrain) = 0;
  virtual ExecutorCounters counters() const { return {}; }
};

namespace internal {
// Which executor the calling thread works for (nullptr outside any pool):
// lets submit() tell a task's own children from outside work while draining,
// and lets the work-stealing pool push to the caller's own deque.
const Executor*& current_executor() noexcept;
int& current_worker_index() noexcept;
}  // namespace internal

}  // namespace tailscope::exec
