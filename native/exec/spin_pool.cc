#include "exec/spin_pool.h"

#include "core/clock.h"
#include "exec/internal/spin_then_park.h"

namespace tailscope::exec {

SpinPool::SpinPool(PoolOptions options) : options_(std::move(options)) {
  workers_.start(*this, options_, [this](size_t) { work(); });
}

SpinPool::~SpinPool() { shutdown(ShutdownMode::kDrain); }

bool SpinPool::try_submit(WorkItem& item) {
  {
    std::lock_guard lock(mu_);
    if (closed_.load() && (cancelled_ || internal::current_executor() != this)) return false;
    queue_.push_back(std::move(item));
    queued_.fetch_add(1);
  }
  parking_.wake_one();
  return true;
}

bool SpinPool::try_pop(WorkItem& out) {
  if (queued_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard lock(mu_);
  if (queue_.empty()) return false;
  out = std::move(queue_.front());
  queue_.pop_front();
  queued_.fetch_sub(1);
  return true;
}

void SpinPool::work() {
  internal::run_spin_then_park_worker(options_, queued_, closed_, parking_,
                                      [this](WorkItem& item) { return try_pop(item); });
}

void SpinPool::shutdown(ShutdownMode mode) {
  std::deque<WorkItem> dropped;
  {
    std::lock_guard lock(mu_);
    closed_.store(true);
    if (mode == ShutdownMode::kCancel) {
      cancelled_ = true;
      dropped.swap(queue_);
      queued_.store(0);
    }
  }
  parking_.wake_all();
  dropped.clear();
  workers_.join();
}

}  // namespace tailscope::exec
