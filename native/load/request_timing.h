// The load worker's timing path without sockets: the two stamps it takes,
// the window rule, and what it records. LoadWorker calls on_send just before
// send() and on_response for each whole response; the clock is injected, so
// request_timing_test.cc checks intended-start latency, send lag, the
// warm-up cut and the byte counts exactly with a fake clock.
//
//   latency_intended = received − intended   (coordinated omission corrected)
//   latency_actual   = received − actual
//   send_lag         = actual − max(intended, ready)
//
// The io_uring path (--io uring) queues a loop turn's sends and hands them
// to the kernel in one io_uring_enter: queue_send() keeps the request's
// schedule, stamp_queued() — called just before that enter — stamps every
// queued request with the one now() taken then and accounts it exactly as
// on_send would have at that moment. So "actual" stays "just before the
// kernel sees the bytes" on both paths, and the batching delay counts as
// the generator's send lag in open loop, not hidden (closed loop defines
// intended = actual on both paths).
//
// A request belongs to the window when its *intended* time is in
// [measure_start, measure_end): its counts, latencies and bytes (request and
// response) are all recorded by that one rule, so requests_sent and
// bytes_sent describe the same requests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/clock.h"
#include "load/config.h"
#include "load/worker.h"

namespace tailscope::load {

class RequestTiming {
 public:
  using NowFn = int64_t (*)();

  RequestTiming(const LoadConfig& config, const RunClock& clock, WorkerResult& result, NowFn now = &monotonic_ns)
      : config_(config), clock_(clock), result_(result), now_(now) {}

  int64_t now() const { return now_(); }
  bool in_window(int64_t intended_ns) const {
    return intended_ns >= clock_.measure_start_ns && intended_ns < clock_.measure_end_ns;
  }

  // A request of `request_bytes` leaves now. scheduled_ns: its intended time
  // in open loop (ignored in closed loop, where intended = actual); ready_ns:
  // when its connection became free to send. Returns what stays in flight.
  InFlightRequest on_send(int64_t scheduled_ns, int64_t ready_ns, size_t request_bytes) {
    return on_send_at(now_(), scheduled_ns, ready_ns, request_bytes);
  }
  // Batched sends: *slot (which must stay put until stamp_queued) receives
  // the stamps; its other fields (endpoint, trace) are kept. on_stamped(const InFlightRequest&)
  // is called for each, in queue order.
  void queue_send(InFlightRequest* slot, int64_t scheduled_ns, int64_t ready_ns, size_t request_bytes) {
    queued_.push_back({slot, scheduled_ns, ready_ns, request_bytes});
  }
  bool has_queued() const { return !queued_.empty(); }
  template <class F>
  void stamp_queued(F&& on_stamped) {
    if (queued_.empty()) return;
    const int64_t actual = now_();
    for (const QueuedSend& q : queued_) {
      const InFlightRequest stamped = on_send_at(actual, q.scheduled_ns, q.ready_ns, q.request_bytes);
      q.slot->intended_ns = stamped.intended_ns;  // the rest of the slot (endpoint, trace) is the caller's
      q.slot->actual_ns = stamped.actual_ns;
      on_stamped(*q.slot);
    }
    queued_.clear();
  }
  // The whole response to `request` (response_bytes long, ok or not) was
  // complete at received_ns (one now() per recv(), shared by the responses it completed).
  void on_response(const InFlightRequest& request, int64_t received_ns, bool ok, size_t response_bytes);

 private:
  InFlightRequest on_send_at(int64_t actual_ns, int64_t scheduled_ns, int64_t ready_ns, size_t request_bytes);
  void record_interval(int64_t received_ns, int64_t intended_latency, int64_t actual_latency);

  struct QueuedSend {
    InFlightRequest* slot;
    int64_t scheduled_ns, ready_ns;
    size_t request_bytes;
  };
  std::vector<QueuedSend> queued_;

  const LoadConfig& config_;
  const RunClock& clock_;
  WorkerResult& result_;
  NowFn now_;
};

}  // namespace tailscope::load
