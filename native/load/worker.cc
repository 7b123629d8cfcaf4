#include "load/worker.h"

#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/affinity.h"
#include "core/clock.h"
#include "load/request_timing.h"
#include "net/socket.h"

namespace tailscope::load {
namespace {

constexpr int64_t kHousekeepingNs = 10'000'000;
constexpr int kMaxSendsPerTurn = 64;  // then look at responses: receive timestamps stay honest

constexpr int64_t kMinReconnectNs = 50'000'000;  // the first back-off step

int64_t reconnect_backoff_ns(int attempts) {
  return std::min<int64_t>(kMinReconnectNs << std::min(attempts, 5), 1'000'000'000);
}

}  // namespace

LoadWorker::LoadWorker(const LoadConfig& config, int index, int first_connection, int connection_count, RunClock& clock,
                       NowFn now, const UringLoadPlan* uring)
    : config_(config),
      index_(index),
      clock_(clock),
      rng_(config.seed * 1'000'003 + static_cast<uint64_t>(index)),
      timing_(std::make_unique<RequestTiming>(config, clock, result_, now)) {
  connections_.resize(static_cast<size_t>(connection_count));
  for (int i = 0; i < connection_count; ++i) {
    connections_[i].id = static_cast<uint32_t>(first_connection + i);
    connections_[i].protocol = make_client_protocol(config, connections_[i].id);
  }
  if (!config.mix.empty())
    mix_ = std::make_unique<EndpointMixRecorder>(config.mix, config.host, config.seed, index, result_.endpoints);
  if (config.open_loop()) interval_ns_ = static_cast<int64_t>(1e9 * config.connections / config.rate_per_s);
  recv_buffer_.resize(65536);
  uring_plan_ = uring;
  if (config.traceparent) {
    // Fresh ids every run (not --seed): two runs must never share a trace id
    // in one trace store.
    trace_state_ = (uint64_t{std::random_device{}()} << 32 | std::random_device{}()) ^
                   static_cast<uint64_t>(realtime_ns()) ^ (static_cast<uint64_t>(index) << 56);
    result_.request_log.reserve(
        static_cast<size_t>(std::max<int64_t>(1, config.request_log_max_rows / std::max(1, config.threads))));
  }
}

net::TraceParent LoadWorker::next_trace_parent() {
  auto next = [this] {  // splitmix64: a few ns per id, full period, every state a distinct output
    uint64_t z = (trace_state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  net::TraceParent p;
  do {
    p.trace_id_high = next();
    p.trace_id_low = next();
  } while ((p.trace_id_high | p.trace_id_low) == 0);  // all-zero ids are invalid (W3C)
  do p.parent_id = next();
  while (p.parent_id == 0);
  p.sampled = true;
  return p;
}

// The request's bytes: the protocol's (or the mix endpoint's) request, with
// its traceparent header when it carries one. HTTP requests here have no
// body, so the header goes before the blank line that ends them.
void LoadWorker::append_request(Connection& c, const InFlightRequest& request) {
  if (mix_)
    mix_->append_endpoint(request.endpoint, c.out);
  else
    c.protocol->append_request(c.seq, c.out);
  ++c.seq;
  if (!config_.traceparent) return;
  c.out.resize(c.out.size() - 2);
  c.out += "traceparent: ";
  net::append_traceparent(request.trace, c.out);
  c.out += "\r\n\r\n";
}

LoadWorker::~LoadWorker() {
  for (Connection& c : connections_)
    if (c.fd >= 0) ::close(c.fd);
}

void LoadWorker::connect(Connection& c, int64_t now) {
  c.reconnect_at_ns = now;  // doubles as "connect started" while connecting
  c.fd = net::start_connect(config_.address.empty() ? config_.host : config_.address, config_.port);
  if (c.fd < 0) {
    if (result_.first_connect_error.empty())
      result_.first_connect_error = std::string("connect: ") + std::strerror(errno);
    ++result_.errors.connect;
    c.reconnect_at_ns = now + reconnect_backoff_ns(c.reconnect_attempts++);
    return;
  }
  if (uring_)
    uring_watch_connect(c);
  else
    events_.add(c.fd, static_cast<uint64_t>(&c - connections_.data()), net::kWritable);  // writable: connected
}

void LoadWorker::on_connected(Connection& c, int64_t now) {
  c.open = true;
  c.opened_ns = now;
  c.reconnect_attempts = 0;
  c.want_out = false;
  ++result_.connections_established;
  clock_.live_connections.fetch_add(1, std::memory_order_relaxed);
  if (uring_)
    uring_attach(c);
  else
    update_interest(c);
  const int64_t start = clock_.start_ns.load(std::memory_order_acquire);
  if (start == 0) return;  // still in the connect phase
  if (config_.open_loop() && c.next_intended_ns < now) {
    // A reconnected connection does not burst out what it missed while down.
    result_.skipped_while_disconnected += (now - c.next_intended_ns) / std::max<int64_t>(interval_ns_, 1);
    c.next_intended_ns = now;
  }
  c.ready_ns = now;
  if (!c.to_resend.empty()) resend(c, now);
  schedule(c, now);
}

void LoadWorker::drop(Connection& c, int64_t now, int64_t* error_counter) {
  if (error_counter) ++*error_counter;
  // Queued (unstamped) sends point into in_flight, cleared below: stamp them first.
  if (timing_->has_queued()) timing_->stamp_queued([](const InFlightRequest&) {});
  if (c.fd >= 0) {
    if (uring_)
      uring_detach(c);
    else
      events_.remove(c.fd);
    ::close(c.fd);
  }
  if (c.open) clock_.live_connections.fetch_sub(1, std::memory_order_relaxed);
  c.fd = -1;
  c.open = false;
  in_flight_total_ -= static_cast<int64_t>(c.in_flight.size());
  c.in_flight.clear();
  c.out.clear();
  c.out_head = 0;
  c.protocol->reset();
  c.answered = 0;
  c.reconnect_at_ns = now + reconnect_backoff_ns(c.reconnect_attempts++);
  if (!c.to_resend.empty() && error_counter == &result_.errors.connect) {
    // The new connection for a resend failed: those requests are lost, as
    // the close that sent them here would have lost them.
    ++result_.errors.read;
    in_flight_total_ -= static_cast<int64_t>(c.to_resend.size());
    c.to_resend.clear();
  }
}

void LoadWorker::on_peer_closed(Connection& c, int64_t now, int64_t* error_counter) {
  // Part of a response read: the server failed mid-answer.
  if (c.protocol->mid_response()) {
    drop(c, now, error_counter);
    return;
  }
  if (c.in_flight.empty()) {
    // Its keep-alive idle timeout: what HTTP servers do; no request was lost.
    // At once only after an answer or a while open: a server that closes
    // every connection as it opens would otherwise make this spin.
    ++result_.server_closes.idle;
    if (c.answered > 0 || now - c.opened_ns >= kMinReconnectNs) {
      reconnect_now(c, now);
    } else {
      drop(c, now, nullptr);
    }
    return;
  }
  // A connection that never answered refused the request; not a race.
  if (c.answered == 0) {
    drop(c, now, error_counter);
    return;
  }
  // A reused connection closed before any byte of the response: the server
  // closed it (idle timeout) as the request was on its way, and never read
  // it. Sent once more on a new connection, as HTTP clients do for
  // idempotent requests (RFC 9112 §9.3.1); a second such close is an error.
  const bool once = std::none_of(c.in_flight.begin(), c.in_flight.end(), [](const Pending& p) { return p.resent; });
  if (!c.protocol->resendable() || !once) {
    drop(c, now, error_counter);
    return;
  }
  reconnect_now(c, now);
}

void LoadWorker::reconnect_now(Connection& c, int64_t now) {
  // Queued (unstamped) uring sends point into in_flight: stamp them before it moves.
  if (timing_->has_queued()) timing_->stamp_queued([](const InFlightRequest&) {});
  result_.server_closes.requests_resent += static_cast<int64_t>(c.in_flight.size());
  for (Pending& p : c.in_flight) {
    p.resent = true;
    c.to_resend.push_back(p);  // still counted in in_flight_total_: the drain waits for them
  }
  c.in_flight.clear();
  drop(c, now, nullptr);
  c.reconnect_attempts = 0;
  c.reconnect_at_ns = now;
  // While draining only owed answers justify a new connection.
  if (!draining_ || !c.to_resend.empty()) connect(c, now);
}

// Requests keep their intended time (latency_intended includes the
// reconnect); actual becomes the new send. They were counted as sent once.
void LoadWorker::resend(Connection& c, int64_t now) {
  for (Pending p : c.to_resend) {
    append_request(c, p);
    p.actual_ns = now;
    c.in_flight.push_back(p);
  }
  c.to_resend.clear();
  flush(c);
}

void LoadWorker::schedule(Connection& c, int64_t now) {
  if (!c.open || c.in_heap || static_cast<int>(c.in_flight.size()) >= config_.pipeline) return;
  heap_.push({config_.open_loop() ? c.next_intended_ns : now, static_cast<uint32_t>(&c - connections_.data())});
  c.in_heap = true;
}

int64_t LoadWorker::advance_schedule(Connection& c) {
  if (config_.arrival == Arrival::kPoisson) {
    std::exponential_distribution<double> gap(1.0 / static_cast<double>(interval_ns_));
    return c.next_intended_ns + static_cast<int64_t>(gap(rng_));
  }
  return c.next_intended_ns + interval_ns_;
}

// The send path: build, stamp and account (RequestTiming), send.
void LoadWorker::send_due(Connection& c, int64_t /*due_ns*/) {
  const size_t queued = c.out.size();
  Pending request{0, 0};
  if (mix_) request.endpoint = mix_->pick();  // http only: no per-request state in the protocol
  if (config_.traceparent) request.trace = next_trace_parent();
  append_request(c, request);
  const uint32_t endpoint = request.endpoint;
  int64_t actual;
  if (uring_) {
    // Stamped just before the io_uring_enter that submits it (stamp_queued);
    // the deque keeps the slot in place until then (nothing is received meanwhile).
    c.in_flight.push_back(request);
    timing_->queue_send(&c.in_flight.back(), c.next_intended_ns, c.ready_ns, c.out.size() - queued);
    actual = timing_->now();  // when a pipelined connection is free for its next request
  } else {
    Pending sent = timing_->on_send(c.next_intended_ns, c.ready_ns, c.out.size() - queued);
    sent.endpoint = endpoint;
    sent.trace = request.trace;
    if (mix_ && timing_->in_window(sent.intended_ns)) mix_->on_sent(endpoint);
    actual = sent.actual_ns;
    c.in_flight.push_back(sent);
  }
  ++in_flight_total_;
  if (config_.open_loop()) c.next_intended_ns = advance_schedule(c);
  if (!flush(c)) return;
  c.ready_ns = actual;
  schedule(c, actual);
}

bool LoadWorker::flush(Connection& c) {
  if (uring_) {
    uring_send_pending(c);  // errors arrive as completions
    return true;
  }
  while (c.out_head < c.out.size()) {
    result_.syscalls += counting_;
    long w = net::send_some(c.fd, c.out.data() + c.out_head, c.out.size() - c.out_head);
    if (w > 0) {
      c.out_head += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!c.want_out) {
        c.want_out = true;
        update_interest(c);
      }
      return true;
    }
    on_peer_closed(c, monotonic_ns(), &result_.errors.write);
    return false;
  }
  c.out.clear();
  c.out_head = 0;
  if (c.want_out) {
    c.want_out = false;
    update_interest(c);
  }
  return true;
}

void LoadWorker::update_interest(Connection& c) {
  result_.syscalls += counting_;
  events_.modify(c.fd, static_cast<uint64_t>(&c - connections_.data()),
                 net::kReadable | (c.want_out ? net::kWritable : 0u));
}

// The receive path (epoll): read what is ready, then on_bytes.
void LoadWorker::on_readable(Connection& c) {
  for (int round = 0; round < 8 && c.open; ++round) {
    result_.syscalls += counting_;
    long r = net::recv_some(c.fd, recv_buffer_.data(), recv_buffer_.size());
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      on_peer_closed(c, monotonic_ns(), &result_.errors.read);
      return;
    }
    if (r < 0) return;
    const int64_t received = timing_->now();
    if (!on_bytes(c, std::string_view(recv_buffer_.data(), static_cast<size_t>(r)), received)) return;
    if (static_cast<size_t>(r) < recv_buffer_.size()) return;
  }
}

// Both paths: stamp, match each response to its request, record.
bool LoadWorker::on_bytes(Connection& c, std::string_view bytes, int64_t received) {
  bool unexpected = false;
  bool freed = false;
  const bool ok = c.protocol->feed(bytes, [&](ClientProtocol::Verdict verdict, size_t position, size_t response_bytes) {
    if (position >= c.in_flight.size()) {
      unexpected = true;
      return;
    }
    const Pending p = c.in_flight[position];  // echo/http: always the oldest (0); rpc: matched by id
    c.in_flight.erase(c.in_flight.begin() + static_cast<std::ptrdiff_t>(position));
    --in_flight_total_;
    ++c.answered;
    freed = true;
    const bool answered_ok = verdict == ClientProtocol::Verdict::kOk;
    if (!answered_ok) ++result_.errors.bad_status;
    timing_->on_response(p, received, answered_ok, response_bytes);
    if (mix_ && answered_ok && timing_->in_window(p.intended_ns)) record_endpoint(p, received);
  });
  if (!ok || unexpected) {
    if (result_.first_violation.empty())
      result_.first_violation = unexpected ? "response without a request" : c.protocol->violation();
    int64_t* counter = &result_.errors.bad_status;  // malformed HTTP
    if (config_.protocol == LoadProtocol::kEcho) counter = &result_.errors.echo_mismatch;
    if (config_.protocol == LoadProtocol::kRpc) counter = &result_.errors.bad_frame;
    drop(c, received, counter);
    return false;
  }
  if (c.protocol->closes_after_response()) {
    // The server announced the close: nothing more is sent here; what is
    // still in flight (pipelined) goes out again on the new connection.
    ++result_.server_closes.connection_close;
    reconnect_now(c, received);
    return false;
  }
  if (freed) {
    c.ready_ns = received;
    schedule(c, received);
  }
  return true;
}

void LoadWorker::record_endpoint(const InFlightRequest& request, int64_t received_ns) {
  const int64_t interval = config_.record_intervals ? (received_ns - clock_.measure_start_ns) /
                                                          static_cast<int64_t>(config_.hlog_interval_s * 1e9)
                                                    : -1;
  mix_->on_response(request.endpoint, received_ns - request.intended_ns, received_ns - request.actual_ns, interval);
}

void LoadWorker::on_connect_result(Connection& c, int so_error, bool hangup) {
  if (so_error != 0 || hangup) {
    if (result_.first_connect_error.empty())
      result_.first_connect_error =
          std::string("connect: ") + (so_error ? std::strerror(so_error) : "connection closed while connecting");
    drop(c, monotonic_ns(), &result_.errors.connect);
  } else {
    on_connected(c, monotonic_ns());
  }
}

size_t LoadWorker::handle_events(std::span<const net::ReadyEvent> events) {
  for (const net::ReadyEvent& e : events) {
    Connection& c = connections_[e.token];
    if (c.fd < 0) continue;
    if (!c.open) {  // a connect() completed or failed
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      on_connect_result(c, err, (e.ready & net::kHangup) != 0);
      continue;
    }
    if (e.ready & (net::kReadable | net::kHangup)) on_readable(c);
    if (c.open && (e.ready & net::kWritable)) flush(c);
  }
  return events.size();
}

size_t LoadWorker::wait_and_handle(int64_t timeout_ns) {
  if (uring_) return uring_wait_and_handle(timeout_ns);
  return handle_events(events_.wait(timeout_ns));
}

bool LoadWorker::in_measured_window(int64_t now) const {
  return now >= clock_.measure_start_ns && now < clock_.measure_end_ns;
}

void LoadWorker::housekeeping(int64_t now) {
  last_housekeeping_ns_ = now;
  for (Connection& c : connections_) {
    if (c.fd < 0) {
      if (!draining_ && c.reconnect_at_ns <= now) connect(c, now);
    } else if (!c.open) {
      if (now - c.reconnect_at_ns > config_.connect_timeout_ns) {
        if (result_.first_connect_error.empty())
          result_.first_connect_error = "connect: no answer within the connect timeout";
        drop(c, now, &result_.errors.connect);
      }
    } else if (!c.in_flight.empty() && now - c.in_flight.front().actual_ns > config_.timeout_ns) {
      result_.errors.timeout += static_cast<int64_t>(c.in_flight.size());
      drop(c, now, nullptr);
    }
  }
}

void LoadWorker::run() {
  prctl(PR_SET_TIMERSLACK, 1UL);  // hrtimer wake-ups without the default 50 µs slack
  if (!config_.cpus.empty()) {
    std::string error;
    const int cpu = config_.cpus[static_cast<size_t>(index_) % config_.cpus.size()];
    if (!pin_current_thread(cpu, &error))
      throw std::runtime_error("cannot pin load thread to CPU " + std::to_string(cpu) + ": " + error);
  }
  if (uring_plan_ != nullptr) uring_start();  // on this thread: the ring's single issuer

  // Connect phase: every connection open (or given up on) before the clock
  // starts. At most kMaxConnecting handshakes at once: a burst of 10 000 SYNs
  // overflows the server's accept queue, and the dropped SYNs come back only
  // after 1, 3, 7 s of retransmission — a slow server would look unreachable.
  constexpr size_t kMaxConnecting = 256;
  int64_t now = monotonic_ns();
  const int64_t connect_deadline =
      now + config_.connect_timeout_ns + static_cast<int64_t>(connections_.size()) * 1'000'000;  // + 1 ms each
  size_t next_to_connect = 0;
  for (;;) {
    now = monotonic_ns();
    size_t open = 0, connecting = 0;
    for (const Connection& c : connections_) {
      open += c.open ? 1 : 0;
      connecting += (c.fd >= 0 && !c.open) ? 1 : 0;
    }
    if (open == connections_.size() || now >= connect_deadline || clock_.stop.load()) break;
    while (connecting < kMaxConnecting && next_to_connect < connections_.size()) {
      connect(connections_[next_to_connect++], now);
      ++connecting;
    }
    if (now - last_housekeeping_ns_ >= kHousekeepingNs) {
      // Retries (back-off) only for connections already tried once.
      last_housekeeping_ns_ = now;
      for (size_t i = 0; i < next_to_connect; ++i) {
        Connection& c = connections_[i];
        if (c.fd < 0 && c.reconnect_at_ns <= now)
          connect(c, now);
        else if (c.fd >= 0 && !c.open && now - c.reconnect_at_ns > config_.connect_timeout_ns) {
          if (result_.first_connect_error.empty())
            result_.first_connect_error = "connect: no answer within the connect timeout";
          drop(c, now, &result_.errors.connect);
        }
      }
    }
    wait_and_handle(10'000'000);
  }
  clock_.workers_connected.fetch_add(1);
  while (clock_.start_ns.load(std::memory_order_acquire) == 0 && !clock_.stop.load()) {
    wait_and_handle(1'000'000);
  }
  const int64_t start = clock_.start_ns.load();
  std::uniform_int_distribution<int64_t> offset(0, std::max<int64_t>(interval_ns_ - 1, 0));
  std::exponential_distribution<double> first_gap(1.0 / static_cast<double>(std::max<int64_t>(interval_ns_, 1)));
  for (Connection& c : connections_) {
    // De-synchronised start: fixed schedules at phases spread uniformly over
    // one interval; Poisson ones at an exponential first gap (memoryless: the
    // superposition is Poisson at the full rate from the start — a uniform
    // phase followed by exponential gaps ramps the total rate from 1× to 2×
    // over the first interval, a burst that queues at the server).
    c.next_intended_ns = start;
    if (config_.open_loop())
      c.next_intended_ns += config_.arrival == Arrival::kPoisson ? static_cast<int64_t>(first_gap(rng_)) : offset(rng_);
    c.ready_ns = start;
    schedule(c, start);
  }

  int64_t drain_deadline = 0;
  for (;;) {
    now = monotonic_ns();
    const int64_t turn_start = now;
    counting_ = in_measured_window(now);
    if (!draining_ && (now >= clock_.measure_end_ns || clock_.stop.load(std::memory_order_relaxed))) {
      draining_ = true;
      drain_deadline = now + (clock_.stop.load() ? 100'000'000 : std::min<int64_t>(config_.timeout_ns, 2'000'000'000));
    }
    // Open loop: requests intended inside the window are owed even if the
    // connection was blocked when the window closed; they are still sent
    // (and charged their full latency) during the drain.
    const bool owed = config_.open_loop() && !clock_.stop.load(std::memory_order_relaxed) && !heap_.empty() &&
                      heap_.top().due_ns < clock_.measure_end_ns;
    if (draining_ && ((in_flight_total_ == 0 && !owed) || now >= drain_deadline)) break;
    if (now - last_housekeeping_ns_ >= kHousekeepingNs) housekeeping(now);

    int sent = 0;
    while ((!draining_ || owed) && !heap_.empty() && heap_.top().due_ns <= now && sent < kMaxSendsPerTurn &&
           (!draining_ || heap_.top().due_ns < clock_.measure_end_ns)) {
      const Due d = heap_.top();
      heap_.pop();
      Connection& c = connections_[d.index];
      c.in_heap = false;
      if (!c.open) continue;
      send_due(c, d.due_ns);
      ++sent;
      now = monotonic_ns();
    }

    int64_t next = draining_ ? drain_deadline : clock_.measure_end_ns;
    if ((!draining_ || owed) && !heap_.empty()) next = std::min(next, heap_.top().due_ns);
    next = std::min(next, last_housekeeping_ns_ + kHousekeepingNs);
    const int64_t wait = next - monotonic_ns();
    // Due now or within the spin margin: busy-poll (a zero timeout) so both
    // the send and any response arriving meanwhile are stamped on time.
    const bool spin = config_.busy_poll || sent >= kMaxSendsPerTurn || wait <= config_.spin_ns;
    const size_t handled = wait_and_handle(spin ? 0 : wait - config_.spin_ns);
    if (counting_) {
      // Busy share: a turn that sent nothing and found nothing was the
      // generator waiting for the server (or for the schedule).
      const int64_t turn_ns = monotonic_ns() - turn_start;
      result_.loop_ns += turn_ns;
      // The turn's one wait (epoll_wait / io_uring_enter) counts only when
      // the turn did work: idle polls measure the server's pace, not the
      // generator's cost per request.
      if (sent == 0 && handled == 0)
        result_.idle_loop_ns += turn_ns;
      else
        ++result_.syscalls;
    }
  }
  counting_ = false;
  if (config_.open_loop()) {
    for (const Connection& c : connections_)
      if (c.open && c.next_intended_ns < clock_.measure_end_ns)
        result_.unsent_in_window +=
            (clock_.measure_end_ns - c.next_intended_ns) / std::max<int64_t>(interval_ns_, 1) + 1;
  }
  // Whatever is still in flight after the drain is a timeout.
  result_.errors.timeout += in_flight_total_ > 0 && !clock_.stop.load() ? in_flight_total_ : 0;
  for (Connection& c : connections_)
    if (c.fd >= 0) drop(c, monotonic_ns(), nullptr);
  if (uring_) uring_finish();
}

}  // namespace tailscope::load
