// OneShot<T>: a single-use result slot owned by the caller — the "lighter
// mechanism" the pools use instead of std::promise/std::future.
//
// What it saves compared with a future: no heap-allocated, reference-counted
// shared state (std::promise allocates one per call), no type-erased result
// holder, no call_once; one atomic word that the producer stores and the
// waiter polls briefly before sleeping on it (a futex). The producer makes
// the wake-up syscall only if the waiter announced that it sleeps.
// The slot lives in the caller's call record, so it must outlive both sides;
// after publishing, the producer touches nothing but the futex word's
// address in the wake syscall (which never dereferences it in user space).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "exec/internal/idle_parking.h"

namespace tailscope::exec {

// The value a call hands over: T, or std::monostate for void.
template <class T>
using ValueOf = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// Runs f() and returns its value, std::monostate{} if f returns void.
template <class F>
auto invoke_for_value(F& f) {
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    return std::monostate{};
  } else {
    return f();
  }
}

template <class T>
class OneShot {
 public:
  // Spin this many polls before sleeping: a hand-off that completes within a
  // few microseconds never pays the futex round trip.
  static constexpr int kSpinPolls = 2000;

  void set_value(ValueOf<T> value) {
    value_.emplace(std::move(value));
    publish();
  }
  void set_exception(std::exception_ptr error) {
    error_ = std::move(error);
    publish();
  }
  bool ready() const noexcept { return state_.load(std::memory_order_acquire) == kReady; }

  void wait() {
    for (int i = 0; i < kSpinPolls && !ready(); ++i) internal::cpu_relax();
    while (!ready()) {
      uint32_t expected = kEmpty;
      // Announce the sleep; if the value arrived meanwhile the CAS fails on kReady.
      if (state_.compare_exchange_strong(expected, kWaiting) || expected == kWaiting)
        internal::futex_wait(&state_, kWaiting);
    }
  }
  // Waits, then returns the value or rethrows the task's exception. Once.
  ValueOf<T> get() {
    wait();
    if (error_) std::rethrow_exception(error_);
    return std::move(*value_);
  }

 private:
  static constexpr uint32_t kEmpty = 0, kReady = 1, kWaiting = 2;
  void publish() {
    if (state_.exchange(kReady, std::memory_order_acq_rel) == kWaiting) internal::futex_wake(&state_, 1);
  }
  std::atomic<uint32_t> state_{kEmpty};
  std::optional<ValueOf<T>> value_;
  std::exception_ptr error_;
};

}  // namespace tailscope::exec
