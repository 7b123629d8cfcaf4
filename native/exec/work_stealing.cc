#include "exec/work_stealing.h"

#include "core/clock.h"
#include "exec/internal/spin_then_park.h"

namespace tailscope::exec {

WorkStealingPool::WorkStealingPool(PoolOptions options) : options_(std::move(options)) {
  const size_t n = options_.workers == 0 ? 1 : options_.workers;
  for (size_t i = 0; i < n; ++i) deques_.push_back(std::make_unique<WorkerDeque>());
  workers_.start(*this, options_, [this](size_t i) { work(i); });
}

WorkStealingPool::~WorkStealingPool() { shutdown(ShutdownMode::kDrain); }

bool WorkStealingPool::try_submit(WorkItem& item) {
  const bool own = internal::current_executor() == this;
  {
    // Shared lock order: lifecycle, then one deque.
    std::lock_guard life(lifecycle_mu_);
    if (closed_.load() && (cancelled_ || !own)) return false;
    const size_t target = own ? static_cast<size_t>(internal::current_worker_index())
                              : static_cast<size_t>(next_.fetch_add(1, std::memory_order_relaxed) % deques_.size());
    std::lock_guard lock(deques_[target]->mu);
    deques_[target]->items.push_back(std::move(item));
    queued_.fetch_add(1);
  }
  parking_.wake_one();
  return true;
}

bool WorkStealingPool::try_take(size_t index, WorkItem& out) {
  if (queued_.load(std::memory_order_relaxed) == 0) return false;
  {
    WorkerDeque& mine = *deques_[index];
    std::lock_guard lock(mine.mu);
    if (!mine.items.empty()) {
      out = std::move(mine.items.back());
      mine.items.pop_back();
      queued_.fetch_sub(1);
      return true;
    }
  }
  for (size_t k = 1; k < deques_.size(); ++k) {
    WorkerDeque& victim = *deques_[(index + k) % deques_.size()];
    std::lock_guard lock(victim.mu);
    if (!victim.items.empty()) {
      out = std::move(victim.items.front());
      victim.items.pop_front();
      queued_.fetch_sub(1);
      steals_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

void WorkStealingPool::work(size_t index) {
  internal::run_spin_then_park_worker(options_, queued_, closed_, parking_,
                                      [this, index](WorkItem& item) { return try_take(index, item); });
}

void WorkStealingPool::shutdown(ShutdownMode mode) {
  std::vector<std::deque<WorkItem>> dropped;
  {
    std::lock_guard life(lifecycle_mu_);
    closed_.store(true);
    if (mode == ShutdownMode::kCancel) {
      cancelled_ = true;
      for (auto& d : deques_) {
        std::lock_guard lock(d->mu);
        queued_.fetch_sub(static_cast<int64_t>(d->items.size()));
        dropped.push_back(std::move(d->items));
        d->items.clear();
      }
    }
  }
  parking_.wake_all();
  dropped.clear();
  workers_.join();
}

}  // namespace tailscope::exec
