#include "exec/fixed_pool.h"

namespace tailscope::exec {

FixedThreadPool::FixedThreadPool(PoolOptions options) : options_(std::move(options)) {
  workers_.start(*this, options_, [this](size_t) { work(); });
}

FixedThreadPool::~FixedThreadPool() { shutdown(ShutdownMode::kDrain); }

bool FixedThreadPool::try_submit(WorkItem& item) {
  {
    std::lock_guard lock(mu_);
    if (closed_ && (cancelled_ || internal::current_executor() != this)) return false;
    queue_.push_back(std::move(item));
  }
  ready_.notify_one();
  return true;
}

ExecutorCounters FixedThreadPool::counters() const {
  // notify_one's syscalls are glibc's business (it skips waiters already
  // signalled): not counted.
  return {parks_.load(std::memory_order_relaxed), -1};
}

void FixedThreadPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    while (queue_.empty() && !closed_) {
      parks_.fetch_add(1, std::memory_order_relaxed);
      ready_.wait(lock);
    }
    if (queue_.empty()) return;  // closed and drained: a running sibling picks up its own children
    WorkItem item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    item();
    lock.lock();
  }
}

void FixedThreadPool::shutdown(ShutdownMode mode) {
  std::deque<WorkItem> dropped;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    if (mode == ShutdownMode::kCancel) {
      cancelled_ = true;
      dropped.swap(queue_);
    }
  }
  ready_.notify_all();
  dropped.clear();  // broken promises are delivered here, on the caller's thread
  workers_.join();
}

}  // namespace tailscope::exec
