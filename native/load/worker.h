// One load-generator thread: its own event loop (net/event_loop.h, epoll), its share of the
// connections, its own histograms (merged after the run, never shared).
//
// The timing-critical path, in one screen (worker.cc, send_due / on_readable):
//   intended_ns  = when the schedule says the request should leave
//                  (open loop: fixed or Poisson per-connection schedule;
//                  closed loop: the moment it could leave);
//   actual_ns    = now() just before send();
//   received_ns  = now() just after the recv() that completed it;
//   (now() is monotonic_ns unless a test injects a clock; the stamps and what
//   is recorded from them are request_timing.h, RequestTiming)
//   latency_intended = received - intended   (coordinated omission corrected)
//   latency_actual   = received - actual     (what wrk/Fortio report)
//   send_lag         = actual - max(intended, ready), where ready is when the
//                      connection became free to send: the lag the generator
//                      itself added, not the queueing a slow server caused.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/hdr_histogram.h"
#include "load/client_protocol.h"
#include "load/config.h"
#include "net/event_loop.h"

namespace tailscope::load {

struct ErrorCounts {
  int64_t connect = 0, read = 0, write = 0, timeout = 0, echo_mismatch = 0, bad_status = 0, bad_frame = 0;
  void add(const ErrorCounts& o) {
    connect += o.connect, read += o.read, write += o.write, timeout += o.timeout;
    echo_mismatch += o.echo_mismatch, bad_status += o.bad_status, bad_frame += o.bad_frame;
  }
  int64_t total() const { return connect + read + write + timeout + echo_mismatch + bad_status + bad_frame; }
};

// State every worker shares with the coordinating thread. Workers read the
// first line on every loop turn and never write it after the start; the
// counters they write (on connect, drop) live on their own cache line, so a
// reconnect storm on one thread does not invalidate the line every other
// thread polls (-t N scales only if the hot path shares nothing written).
struct RunClock {
  std::atomic<int64_t> start_ns{0};                  // 0 until every worker has connected
  int64_t measure_start_ns = 0, measure_end_ns = 0;  // valid once start_ns != 0
  std::atomic<bool> stop{false};                     // signal or abort: stop sending, drain briefly
  alignas(64) std::atomic<int> workers_connected{0};
  std::atomic<int> live_connections{0};
};

// One request in flight: its two send-side stamps.
struct InFlightRequest {
  int64_t intended_ns, actual_ns;
  uint32_t endpoint = 0;  // --mix: which endpoint it asked for
};

struct IntervalHistograms {
  HdrHistogram intended = HdrHistogram::for_latency_ns();
  HdrHistogram actual = HdrHistogram::for_latency_ns();
};

struct WorkerResult {
  HdrHistogram intended = HdrHistogram::for_latency_ns();
  HdrHistogram actual = HdrHistogram::for_latency_ns();
  HdrHistogram send_lag = HdrHistogram::for_latency_ns();
  int64_t sent_in_window = 0;        // requests whose intended time is in the window, sent
  int64_t completed_in_window = 0;   // ... answered correctly (recorded)
  int64_t server_backlog_sends = 0;  // sent late because the connection waited for a response
  int64_t skipped_while_disconnected = 0;
  int64_t unsent_in_window = 0;                // open loop: intended in the window, never sent (run ended first)
  int64_t bytes_sent = 0, bytes_received = 0;  // of the requests in the window and of their responses
  int64_t connections_established = 0;
  ErrorCounts errors;
  std::vector<std::unique_ptr<IntervalHistograms>> intervals;  // --hlog only
  std::vector<EndpointLatencies> endpoints;                    // --mix only: per endpoint, in mix order
  std::string first_violation;
  std::string first_connect_error;
};

class RequestTiming;

class LoadWorker {
 public:
  using NowFn = int64_t (*)();
  LoadWorker(const LoadConfig& config, int index, int first_connection, int connection_count, RunClock& clock,
             NowFn now = &monotonic_ns);
  ~LoadWorker();
  // Connects, waits for the common start, runs warm-up + window, drains.
  void run();
  WorkerResult& result() { return result_; }

 private:
  using Pending = InFlightRequest;
  struct Connection {
    int fd = -1;
    uint32_t id = 0;
    bool open = false, in_heap = false, want_out = false;
    uint64_t seq = 0;
    int64_t next_intended_ns = 0;
    int64_t ready_ns = 0;  // when it last became free to send
    int64_t reconnect_at_ns = 0;
    int reconnect_attempts = 0;
    std::deque<Pending> in_flight;
    std::string out;
    size_t out_head = 0;
    std::unique_ptr<ClientProtocol> protocol;
  };
  struct Due {
    int64_t due_ns;
    uint32_t index;
    bool operator>(const Due& o) const { return due_ns > o.due_ns; }
  };

  void connect(Connection& c, int64_t now);
  void on_connected(Connection& c, int64_t now);
  void drop(Connection& c, int64_t now, int64_t* error_counter);
  void schedule(Connection& c, int64_t now);
  void send_due(Connection& c, int64_t due_ns);
  bool flush(Connection& c);
  void on_readable(Connection& c);
  void handle_events(std::span<const net::ReadyEvent> events);
  void housekeeping(int64_t now);
  int64_t advance_schedule(Connection& c);
  void update_interest(Connection& c);
  void record_endpoint(const InFlightRequest& request, int64_t received_ns);  // --mix

  const LoadConfig& config_;
  int index_;
  RunClock& clock_;
  net::EventLoop events_;
  std::vector<Connection> connections_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> heap_;
  std::mt19937_64 rng_;
  int64_t interval_ns_ = 0;  // per-connection mean inter-arrival (open loop)
  bool draining_ = false;
  int64_t last_housekeeping_ns_ = 0;
  int64_t in_flight_total_ = 0;
  WorkerResult result_;
  std::unique_ptr<RequestTiming> timing_;     // stamps and records into result_
  std::unique_ptr<EndpointMixRecorder> mix_;  // --mix only
  std::vector<char> recv_buffer_;
};

}  // namespace tailscope::load
