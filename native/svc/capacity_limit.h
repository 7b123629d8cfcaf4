// A capacity in front of a stage (docs/microservices.md "capacity"): at most
// `capacity` holders at once, the rest wait first come, first served. One
// mechanism for every concurrency model: the thread models block in
// acquire(); the event-loop models call acquire_async(), which takes a free
// slot at once or queues a continuation that the releasing thread (or the
// timer at the deadline) runs — the model's continuation then posts itself
// back to its own loop or pool, so no event loop ever blocks here.
// release() hands the slot straight to the oldest waiter (no barging: a new
// arrival cannot overtake a waiter between release and wake-up).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "svc/timer_service.h"

namespace tailscope::svc {

class CapacityLimit : public std::enable_shared_from_this<CapacityLimit> {
 public:
  explicit CapacityLimit(int64_t capacity);
  CapacityLimit(const CapacityLimit&) = delete;
  CapacityLimit& operator=(const CapacityLimit&) = delete;

  // Blocks until a slot is held (true) or until deadline_ns (monotonic)
  // passes or close() runs (false; nothing is held then).
  bool acquire(int64_t deadline_ns);
  // Takes a free slot now and returns true (`granted` is not called), or
  // queues and returns false: `granted(true)` then runs once on the thread
  // that releases the slot, or `granted(false)` on the timer thread at
  // deadline_ns (or in close()). `granted` must be short: post the real work
  // to the waiter's own thread. The limit must be owned by a shared_ptr (the
  // deadline timer keeps it alive).
  bool acquire_async(int64_t deadline_ns, TimerService& timers, std::function<void(bool)> granted);
  // Gives the slot back: to the oldest waiter when there is one.
  void release();
  // Fails every waiter and every later acquire (shutdown).
  void close();

  int64_t capacity() const { return capacity_; }
  // Waiters still queued (an expired one until a release passes it).
  size_t waiting() const;
  // {capacity, acquisitions, waited, wait_total_ns, wait_max_ns, timeouts,
  // held_total_ns}: acquisitions count the slots handed out; waited those
  // that had to queue first; the wait totals are over those; timeouts gave up
  // at the deadline; held_total_ns is the time slots were held, summed over
  // slots (∫ slots in use dt): ÷ acquisitions, the mean service time behind
  // the capacity; ÷ (capacity × run time), its utilisation.
  nlohmann::json counters_json() const;

 private:
  struct Waiter {
    enum class State { kPending, kGranted, kExpired } state = State::kPending;
    int64_t queued_ns = 0;
    std::function<void(bool)> granted;      // async waiters
    std::condition_variable* cv = nullptr;  // blocking waiters
  };
  // Caller holds mu_: records a wait that ended with a slot.
  void count_grant_locked(const Waiter& w, int64_t now_ns);
  // Marks a pending waiter expired (caller holds mu_); false if it was not pending.
  bool expire_locked(Waiter& w);
  void expire(const std::shared_ptr<Waiter>& w);
  // Caller holds mu_: adds in_use_ × the time since the last change, before in_use_ changes.
  void account_held_locked(int64_t now_ns);

  const int64_t capacity_;
  mutable std::mutex mu_;
  int64_t in_use_ = 0;
  bool closed_ = false;
  // FCFS; a waiter that expired stays until it reaches the front and is skipped.
  std::deque<std::shared_ptr<Waiter>> waiters_;
  int64_t acquisitions_ = 0, waited_ = 0, wait_total_ns_ = 0, wait_max_ns_ = 0, timeouts_ = 0;
  int64_t held_total_ns_ = 0, held_since_ns_ = 0;
};

}  // namespace tailscope::svc
