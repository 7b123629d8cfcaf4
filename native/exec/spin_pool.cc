#include "exec/spin_pool.h"

#include "core/clock.h"
#include "exec/internal/spin_then_park.h"

namespace tailscope::exec {

SpinPool::SpinPool(PoolOptions options) : options_(std::move(options)) {
  const size_t n = options_.workers == 0 ? 1 : options_.workers;
  workers_.reserve(n);
  for (size_t i = 0; i < n; ++i) workers_.emplace_back([this, i] { work(i); });
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

void SpinPool::work(size_t index) {
  internal::place_worker(options_, index);
  internal::current_executor() = this;
  internal::current_worker_index() = static_cast<int>(index);
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
  std::call_once(joined_, [&] {
    for (auto& t : workers_) t.join();
  });
}

}  // namespace tailscope::exec
