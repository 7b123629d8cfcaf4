#include "load/request_timing.h"

#include <algorithm>
#include <memory>

namespace tailscope::load {

InFlightRequest RequestTiming::on_send_at(int64_t actual, int64_t scheduled_ns, int64_t ready_ns,
                                          size_t request_bytes) {
  const int64_t intended = config_.open_loop() ? scheduled_ns : actual;
  if (in_window(intended)) {
    ++result_.sent_in_window;
    result_.bytes_sent += static_cast<int64_t>(request_bytes);
    // The wait for a busy connection is the server's queueing, charged to
    // latency_intended; only the lateness after it is the generator's.
    result_.send_lag.record(std::max<int64_t>(0, actual - std::max(intended, ready_ns)));
    if (intended < ready_ns) ++result_.server_backlog_sends;
  }
  return {intended, actual};
}

void RequestTiming::on_response(const InFlightRequest& request, int64_t received_ns, bool ok, size_t response_bytes) {
  if (!in_window(request.intended_ns)) return;  // warm-up (or owed after the window): never recorded
  result_.bytes_received += static_cast<int64_t>(response_bytes);
  if (config_.traceparent) {
    // Reserved up front (LoadWorker), so the hot path never reallocates.
    if (result_.request_log.size() < result_.request_log.capacity())
      result_.request_log.push_back({request.trace.trace_id_high, request.trace.trace_id_low, request.intended_ns,
                                     received_ns - request.intended_ns, ok});
    else
      ++result_.request_log_dropped;
  }
  if (!ok) return;
  result_.intended.record(received_ns - request.intended_ns);
  result_.actual.record(received_ns - request.actual_ns);
  ++result_.completed_in_window;
  if (config_.record_intervals)
    record_interval(received_ns, received_ns - request.intended_ns, received_ns - request.actual_ns);
}

void RequestTiming::record_interval(int64_t received_ns, int64_t intended_latency, int64_t actual_latency) {
  const int64_t interval_ns = static_cast<int64_t>(config_.hlog_interval_s * 1e9);
  const int64_t k = (received_ns - clock_.measure_start_ns) / interval_ns;
  if (k < 0 || k > 100'000) return;
  while (static_cast<int64_t>(result_.intervals.size()) <= k) result_.intervals.push_back(nullptr);
  auto& slot = result_.intervals[static_cast<size_t>(k)];
  if (!slot) slot = std::make_unique<IntervalHistograms>();
  slot->intended.record(intended_latency);
  slot->actual.record(actual_latency);
}

}  // namespace tailscope::load
