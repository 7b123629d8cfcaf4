#include "exec/spin_pool.h"

#include "core/clock.h"

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
  WorkItem item;
  for (;;) {
    if (try_pop(item)) {
      item();
      continue;
    }
    // Idle: spin, then park. Stop only when closed and nothing is queued;
    // a sibling still running a task drains that task's children itself.
    const int64_t spin_until = monotonic_ns() + options_.spin_ns;
    bool got = false;
    for (int i = 0; !got; ++i) {
      if (closed_.load() && queued_.load() == 0) return;
      got = try_pop(item);
      if (got) break;
      internal::cpu_relax();
      if ((i & 63) == 63 && monotonic_ns() >= spin_until) break;
    }
    if (got) {
      item();
      continue;
    }
    parking_.park_unless([&] { return queued_.load() > 0 || closed_.load(); });
  }
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
