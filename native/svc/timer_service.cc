#include "svc/timer_service.h"

#include <sys/prctl.h>

#include <chrono>

#include "core/clock.h"
#include "core/thread_name.h"

namespace tailscope::svc {

TimerService::TimerService() : thread_([this] { run(); }) {}
TimerService::~TimerService() { stop(); }

void TimerService::schedule(int64_t deadline_ns, std::function<void()> fn) {
  bool earliest;
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    earliest = heap_.empty() || deadline_ns < heap_.top().deadline_ns;
    heap_.push(Entry{deadline_ns, seq_++, std::move(fn)});
  }
  if (earliest) cv_.notify_one();
}

void TimerService::stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  while (!heap_.empty()) heap_.pop();
}

size_t TimerService::pending() const {
  std::lock_guard lock(mu_);
  return heap_.size();
}

void TimerService::run() {
  // Simulated store latencies are ~100 µs: the default 50 µs timer slack would be half of it.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  name_this_thread("svc-timer");
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (heap_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const int64_t now = monotonic_ns();
    if (heap_.top().deadline_ns > now) {
      // steady_clock is CLOCK_MONOTONIC on Linux, the clock of monotonic_ns().
      cv_.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(heap_.top().deadline_ns)));
      continue;
    }
    auto fn = std::move(const_cast<Entry&>(heap_.top()).fn);
    heap_.pop();
    lock.unlock();
    fn();
    lock.lock();
  }
}

}  // namespace tailscope::svc
