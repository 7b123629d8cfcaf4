#include "svc/capacity_limit.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "core/clock.h"

namespace tailscope::svc {

CapacityLimit::CapacityLimit(int64_t capacity) : capacity_(capacity) {
  if (capacity < 1) throw std::invalid_argument("a capacity is at least 1");
}

bool CapacityLimit::acquire(int64_t deadline_ns) {
  std::unique_lock lock(mu_);
  if (closed_) return false;
  if (in_use_ < capacity_ && waiters_.empty()) {
    account_held_locked(monotonic_ns());
    ++in_use_;
    ++acquisitions_;
    return true;
  }
  std::condition_variable cv;
  auto w = std::make_shared<Waiter>();
  w->queued_ns = monotonic_ns();
  w->cv = &cv;
  waiters_.push_back(w);
  // monotonic_ns() is CLOCK_MONOTONIC, as steady_clock is on Linux; waiting a
  // duration (re-read each round) keeps the two clocks from having to match.
  while (w->state == Waiter::State::kPending) {
    const int64_t left_ns = deadline_ns - monotonic_ns();
    if (left_ns <= 0) {
      expire_locked(*w);
      break;
    }
    cv.wait_for(lock, std::chrono::nanoseconds(left_ns));
  }
  w->cv = nullptr;
  return w->state == Waiter::State::kGranted;
}

bool CapacityLimit::acquire_async(int64_t deadline_ns, TimerService& timers, std::function<void(bool)> granted) {
  std::unique_lock lock(mu_);
  if (closed_) {  // fails at once, through the continuation as a timeout would
    lock.unlock();
    granted(false);
    return false;
  }
  if (in_use_ < capacity_ && waiters_.empty()) {
    account_held_locked(monotonic_ns());
    ++in_use_;
    ++acquisitions_;
    return true;
  }
  auto w = std::make_shared<Waiter>();
  w->queued_ns = monotonic_ns();
  w->granted = std::move(granted);
  waiters_.push_back(w);
  // From here w belongs to the queue: a release on another thread may grant it at once.
  lock.unlock();
  // Timers are never cancelled: one that finds its waiter granted does nothing.
  timers.schedule(deadline_ns, [self = shared_from_this(), w] { self->expire(w); });
  return false;
}

void CapacityLimit::expire(const std::shared_ptr<Waiter>& w) {
  std::function<void(bool)> fn;
  {
    std::lock_guard lock(mu_);
    if (!expire_locked(*w)) return;
    fn = std::exchange(w->granted, nullptr);
  }
  if (fn) fn(false);
}

bool CapacityLimit::expire_locked(Waiter& w) {
  if (w.state != Waiter::State::kPending) return false;
  w.state = Waiter::State::kExpired;
  ++timeouts_;
  return true;
}

void CapacityLimit::account_held_locked(int64_t now_ns) {
  if (in_use_ > 0) held_total_ns_ += in_use_ * (now_ns - held_since_ns_);
  held_since_ns_ = now_ns;
}

void CapacityLimit::count_grant_locked(const Waiter& w, int64_t now_ns) {
  const int64_t waited_ns = std::max<int64_t>(0, now_ns - w.queued_ns);
  ++acquisitions_;
  ++waited_;
  wait_total_ns_ += waited_ns;
  wait_max_ns_ = std::max(wait_max_ns_, waited_ns);
}

void CapacityLimit::release() {
  std::shared_ptr<Waiter> next;
  std::function<void(bool)> fn;
  {
    std::lock_guard lock(mu_);
    while (!waiters_.empty()) {
      std::shared_ptr<Waiter> w = std::move(waiters_.front());
      waiters_.pop_front();
      if (w->state != Waiter::State::kPending) continue;  // gave up at its deadline
      // The slot passes to w: in_use_ stays as it is.
      w->state = Waiter::State::kGranted;
      count_grant_locked(*w, monotonic_ns());
      if (w->cv)
        w->cv->notify_one();  // under the lock: the waiter's cv lives until it sees the state
      else
        fn = std::exchange(w->granted, nullptr);
      next = std::move(w);
      break;
    }
    if (!next) {
      account_held_locked(monotonic_ns());
      --in_use_;
    }
  }
  if (fn) fn(true);
}

void CapacityLimit::close() {
  std::deque<std::shared_ptr<Waiter>> failed;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    failed.swap(waiters_);
    for (auto& w : failed) {
      if (!expire_locked(*w)) continue;
      if (w->cv) w->cv->notify_one();
    }
  }
  for (auto& w : failed)
    if (w->state == Waiter::State::kExpired && w->granted) std::exchange(w->granted, nullptr)(false);
}

size_t CapacityLimit::waiting() const {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

nlohmann::json CapacityLimit::counters_json() const {
  std::lock_guard lock(mu_);
  const int64_t held_ns = held_total_ns_ + (in_use_ > 0 ? in_use_ * (monotonic_ns() - held_since_ns_) : 0);
  return {{"held_total_ns", held_ns}, {"capacity", capacity_},           {"acquisitions", acquisitions_},
          {"waited", waited_},        {"wait_total_ns", wait_total_ns_}, {"wait_max_ns", wait_max_ns_},
          {"timeouts", timeouts_}};
}

}  // namespace tailscope::svc
