// One load-generator thread: its own event loop, its share of the connections,
// its own histograms (merged after the run, never shared). Two ways to move
// bytes (--io, config.h LoadIo), side by side like redis' ae backends:
//   epoll (worker.cc): readiness through net/event_loop.h, one send() and one
//     recv() per request;
//   uring (worker_uring.cc): a multishot recv per connection from a provided
//     buffer ring, registered files, and every send of a loop turn submitted
//     in the one io_uring_enter that also reaps the responses.
// Scheduling, stamping and response matching are the same code for both.
//
// The timing-critical path, in one screen (worker.cc, send_due / on_readable):
//   intended_ns  = when the schedule says the request should leave
//                  (open loop: fixed or Poisson per-connection schedule;
//                  closed loop: the moment it could leave);
//   actual_ns    = now() just before send() (uring: just before the
//                  io_uring_enter that submits it, RequestTiming::stamp_queued);
//   received_ns  = now() just after the recv() that completed it (uring:
//                  when its recv completion is reaped);
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
#include "net/traceparent.h"

struct io_uring;
struct io_uring_cqe;
struct io_uring_sqe;

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
  uint32_t endpoint = 0;     // --mix: which endpoint it asked for
  bool resent = false;       // already sent again once on a new connection (never twice)
  net::TraceParent trace{};  // --traceparent: the header it carried (a resend carries the same)
};

// One line of --request-log: an answered request intended in the window.
struct RequestLogRow {
  uint64_t trace_id_high, trace_id_low;
  int64_t intended_ns;  // monotonic; the file says it in Unix time
  int64_t latency_ns;   // received − intended (coordinated omission corrected)
  bool ok;              // a correct answer (HTTP 200)
};

// Connections the server closed in the way HTTP servers do, which are not
// errors (docs/load-generator.md, "Connections the server closes"): each is
// followed by a reconnect at once.
struct ServerCloses {
  int64_t idle = 0;              // closed with nothing in flight (keep-alive idle timeout)
  int64_t connection_close = 0;  // after a response with `Connection: close`
  int64_t requests_resent = 0;   // sent again on a new connection: the reused one closed before any response byte
  void add(const ServerCloses& o) {
    idle += o.idle, connection_close += o.connection_close, requests_resent += o.requests_resent;
  }
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
  ServerCloses server_closes;
  std::vector<RequestLogRow> request_log;                      // --traceparent only
  int64_t request_log_dropped = 0;                             // answered in the window after the log was full
  std::vector<std::unique_ptr<IntervalHistograms>> intervals;  // --hlog only
  std::vector<EndpointLatencies> endpoints;                    // --mix only: per endpoint, in mix order
  std::string first_violation;
  std::string first_connect_error;
  // What the loop cost during the measured window (loop turns that began in
  // it): its wall time, the part spent in turns that found nothing to do
  // (no send due, no event), and the system calls of the turns that did
  // work (sends, recvs, registration, and their one wait each).
  int64_t loop_ns = 0, idle_loop_ns = 0, syscalls = 0;
};

// The io_uring plan every worker uses, decided once by probing (run.cc,
// plan_load_io): the ring setup mode and whether files can be registered.
struct UringLoadPlan {
  unsigned setup_flags = 0;
  std::string setup_text;
  bool registered_files = false;
  std::string registered_files_reason;
};

// Probes this kernel for the uring path (ring, provided buffer ring,
// multishot recv, sparse file table). Returns "" and fills *plan, or the
// reason the uring path cannot run here.
std::string probe_uring_load_plan(UringLoadPlan* plan);

class RequestTiming;

class LoadWorker {
 public:
  using NowFn = int64_t (*)();
  // uring: null for the epoll path, else the probed plan (config.io is then kUring).
  LoadWorker(const LoadConfig& config, int index, int first_connection, int connection_count, RunClock& clock,
             NowFn now = &monotonic_ns, const UringLoadPlan* uring = nullptr);
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
    std::deque<Pending> to_resend;  // closed by the server before answering: sent first on the next connection
    int64_t answered = 0;           // responses on this socket (a reused connection has answered one)
    int64_t opened_ns = 0;
    std::string out;
    size_t out_head = 0;
    std::unique_ptr<ClientProtocol> protocol;
    // uring only. generation changes on every drop, so a completion of the
    // previous socket (a cancelled recv, a send in flight) is recognised.
    uint32_t generation = 0;
    bool connect_armed = false, recv_armed = false, send_in_flight = false, file_registered = false;
    std::string sending;  // the bytes of the send in flight: stable until it completes
    size_t sending_head = 0;
  };
  struct Due {
    int64_t due_ns;
    uint32_t index;
    bool operator>(const Due& o) const { return due_ns > o.due_ns; }
  };

  void connect(Connection& c, int64_t now);
  void on_connected(Connection& c, int64_t now);
  void drop(Connection& c, int64_t now, int64_t* error_counter);
  // The peer closed the socket (EOF, reset, a failed write): an idle close or
  // a reused connection closed before any response byte is a reconnect (its
  // requests resent once), anything else the error *error_counter.
  void on_peer_closed(Connection& c, int64_t now, int64_t* error_counter);
  // Closes without an error and reconnects at once; the requests in flight
  // are resent on the new connection.
  void reconnect_now(Connection& c, int64_t now);
  void resend(Connection& c, int64_t now);
  void schedule(Connection& c, int64_t now);
  void send_due(Connection& c, int64_t due_ns);
  bool flush(Connection& c);
  void on_readable(Connection& c);
  // Feeds received bytes to the protocol and records completed responses;
  // false if that dropped the connection.
  bool on_bytes(Connection& c, std::string_view bytes, int64_t received_ns);
  void on_connect_result(Connection& c, int so_error, bool hangup);
  size_t handle_events(std::span<const net::ReadyEvent> events);
  // Waits for readiness (epoll) or submits and reaps (uring); returns the
  // events / completions handled. timeout_ns < 0: until something happens.
  size_t wait_and_handle(int64_t timeout_ns);
  bool in_measured_window(int64_t now) const;

  // The uring path (worker_uring.cc).
  struct UringState;
  void uring_start();
  void uring_watch_connect(Connection& c);
  void uring_attach(Connection& c);
  void uring_arm_recv(Connection& c);
  void uring_send_pending(Connection& c);
  void uring_submit_send(Connection& c);
  void uring_detach(Connection& c);
  size_t uring_wait_and_handle(int64_t timeout_ns);
  void uring_handle(const io_uring_cqe& cqe);
  void uring_finish();
  io_uring_sqe* uring_sqe();
  uint64_t uring_token(const Connection& c, uint64_t op) const;
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
  uint64_t trace_state_ = 0;  // --traceparent: splitmix64 state, seeded per run
  net::TraceParent next_trace_parent();
  void append_request(Connection& c, const InFlightRequest& request);
  int64_t interval_ns_ = 0;  // per-connection mean inter-arrival (open loop)
  bool draining_ = false;
  int64_t last_housekeeping_ns_ = 0;
  int64_t in_flight_total_ = 0;
  WorkerResult result_;
  std::unique_ptr<RequestTiming> timing_;     // stamps and records into result_
  std::unique_ptr<EndpointMixRecorder> mix_;  // --mix only
  std::vector<char> recv_buffer_;
  const UringLoadPlan* uring_plan_;
  struct UringStateDeleter {
    void operator()(UringState* state) const;
  };
  std::unique_ptr<UringState, UringStateDeleter> uring_;  // uring path only, created on the worker's thread
  bool counting_ = false;                                 // inside the measured window: count syscalls
};

}  // namespace tailscope::load
