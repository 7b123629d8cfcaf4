// The 5-timestamp async probe: what launching and joining one async call
// costs, split into where the time goes. Reused as is by the microservice
// runtime (native/svc), so names and definitions here are the contract.
//
//   trigger_async_fn  the caller launches the call (std::async, submit, ...)
//   fn_start          the function body starts running
//   fn_end            the function body has produced its value
//   request_val       the caller asks for the value (future::get, join, co_await)
//   val_received      the caller has the value in hand
//
// Derived (docs/async-study.md):
//   scheduling_delay  async calls:    fn_start − trigger_async_fn
//                     deferred calls: fn_start − request_val (the study's text:
//                                     "from when the value is requested to when
//                                     the operation starts")
//   deferral_wait     deferred calls: request_val − trigger_async_fn (the
//                                     study's formula). Both deferred readings
//                                     are reported, under these two names.
//   join_delay        val_received − max(fn_end, request_val)
//   total             val_received − trigger_async_fn
//
// All stamps are core/clock.h monotonic_ns(). Each stamp is written by one
// thread and read by the joiner only after the result mechanism (future,
// slot, join, resumption) has synchronised the two, so a probe needs no
// atomics of its own.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>

#include "core/clock.h"
#include "core/hdr_histogram.h"

namespace tailscope::exec {

struct AsyncProbe {
  int64_t trigger_async_fn_ns = 0;
  int64_t fn_start_ns = 0;
  int64_t fn_end_ns = 0;
  int64_t request_val_ns = 0;
  int64_t val_received_ns = 0;
  // Deferred calls run inside the request: their scheduling delay is measured
  // from request_val, and deferral_wait exists.
  bool deferred = false;

  void stamp_trigger() noexcept { trigger_async_fn_ns = monotonic_ns(); }
  void stamp_fn_start() noexcept { fn_start_ns = monotonic_ns(); }
  void stamp_fn_end() noexcept { fn_end_ns = monotonic_ns(); }
  void stamp_request() noexcept { request_val_ns = monotonic_ns(); }
  void stamp_received() noexcept { val_received_ns = monotonic_ns(); }

  bool complete() const noexcept {
    return trigger_async_fn_ns && fn_start_ns && fn_end_ns && request_val_ns && val_received_ns;
  }
  int64_t scheduling_delay_ns() const noexcept {
    return fn_start_ns - (deferred ? request_val_ns : trigger_async_fn_ns);
  }
  // Only meaningful for deferred calls (0 otherwise).
  int64_t deferral_wait_ns() const noexcept { return deferred ? request_val_ns - trigger_async_fn_ns : 0; }
  int64_t join_delay_ns() const noexcept { return val_received_ns - std::max(fn_end_ns, request_val_ns); }
  int64_t total_ns() const noexcept { return val_received_ns - trigger_async_fn_ns; }
};

// The delays a probe yields, in report order, with their stable names.
enum class AsyncDelay { kSchedulingDelay, kDeferralWait, kJoinDelay, kTotal };
inline constexpr std::array<AsyncDelay, 4> kAsyncDelays = {AsyncDelay::kSchedulingDelay, AsyncDelay::kDeferralWait,
                                                           AsyncDelay::kJoinDelay, AsyncDelay::kTotal};
constexpr std::string_view delay_name(AsyncDelay d) noexcept {
  switch (d) {
    case AsyncDelay::kSchedulingDelay:
      return "scheduling_delay";
    case AsyncDelay::kDeferralWait:
      return "deferral_wait";
    case AsyncDelay::kJoinDelay:
      return "join_delay";
    case AsyncDelay::kTotal:
      return "total";
  }
  return "?";
}

// One histogram per delay, filled from complete probes by one thread.
// Negative intervals cannot happen with one monotonic clock; if one shows up
// (a probe stamped out of order) it is counted, not recorded.
class AsyncProbeHistograms {
 public:
  void record(const AsyncProbe& p) noexcept {
    if (!p.complete()) {
      ++incomplete_;
      return;
    }
    add(AsyncDelay::kSchedulingDelay, p.scheduling_delay_ns());
    if (p.deferred) add(AsyncDelay::kDeferralWait, p.deferral_wait_ns());
    add(AsyncDelay::kJoinDelay, p.join_delay_ns());
    add(AsyncDelay::kTotal, p.total_ns());
  }
  const HdrHistogram& of(AsyncDelay d) const noexcept { return h_[static_cast<size_t>(d)]; }
  int64_t incomplete() const noexcept { return incomplete_; }
  int64_t negative() const noexcept { return negative_; }
  void merge(const AsyncProbeHistograms& other) {
    for (size_t i = 0; i < h_.size(); ++i) h_[i].merge(other.h_[i]);
    incomplete_ += other.incomplete_;
    negative_ += other.negative_;
  }

 private:
  void add(AsyncDelay d, int64_t v) noexcept {
    if (v < 0) {
      ++negative_;
      return;
    }
    h_[static_cast<size_t>(d)].record(v);
  }
  std::array<HdrHistogram, 4> h_ = {HdrHistogram::for_latency_ns(), HdrHistogram::for_latency_ns(),
                                    HdrHistogram::for_latency_ns(), HdrHistogram::for_latency_ns()};
  int64_t incomplete_ = 0;
  int64_t negative_ = 0;
};

}  // namespace tailscope::exec
