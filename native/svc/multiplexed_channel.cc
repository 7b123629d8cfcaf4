#include "svc/multiplexed_channel.h"

#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <stdexcept>

#include "core/clock.h"
#include "core/thread_name.h"
#include "net/allow_list.h"
#include "svc/internal/request_frame.h"

namespace tailscope::svc {

using internal::ChannelConnection;

namespace {

// A read takes at most this much: a burst of responses costs one recv().
constexpr size_t kReadBytes = 64 * 1024;

uint64_t token_of(ChannelConnection* c) { return reinterpret_cast<uint64_t>(c) | net::LoopDriven::kTokenTag; }
ChannelConnection* connection_of(uint64_t token) {
  return reinterpret_cast<ChannelConnection*>(token & ~net::LoopDriven::kTokenTag);
}

}  // namespace

// ---------------------------------------------------------------- channel loop

ChannelLoop::ChannelLoop(size_t max_frame_bytes)
    : max_frame_bytes_(max_frame_bytes),
      own_events_(std::make_unique<net::EventLoop>()),
      events_(own_events_.get()),
      read_buf_(kReadBytes, '\0') {
  thread_ = std::thread([this] {
    name_this_thread("svc-channel");
    run();
  });
}

ChannelLoop::ChannelLoop(Driven, net::EventLoop& host, size_t max_frame_bytes)
    : max_frame_bytes_(max_frame_bytes), events_(&host), read_buf_(kReadBytes, '\0') {}

ChannelLoop::~ChannelLoop() { stop(); }

void ChannelLoop::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  if (!driven()) {
    events_->wake();
    if (thread_.joinable()) thread_.join();  // run() ends with close_all()
  } else {
    close_all();  // the host loop has stopped: nothing else touches the connections
  }
}

void ChannelLoop::queue(ChannelConnection* c) {
  bool wake;
  {
    std::lock_guard lock(mu_);
    queued_.push_back(c);
    // Only a sleeping loop needs the eventfd: an awake one takes the list
    // before it waits again. Under load most calls cost no wake-up at all.
    // A driven loop never sleeps here: its host calls service() before it waits.
    wake = sleeping_;
    sleeping_ = false;
  }
  if (wake) events_->wake();
}

int64_t ChannelLoop::flush_queued(std::vector<ChannelConnection*>& batch) {
  {
    // One lock per iteration: the stop check rides with taking the list.
    std::lock_guard lock(mu_);
    if (stop_) return kStopped;
    batch.swap(queued_);
  }
  // Everything queued since the last iteration: one send per connection.
  for (ChannelConnection* c : batch) flush(*c);
  batch.clear();
  return release_delayed();
}

void ChannelLoop::on_ready(const net::ReadyEvent& e) {
  ChannelConnection* c = connection_of(e.token);
  if (c->loop_fd < 0) return;  // failed earlier in this batch
  if (e.ready & (net::kReadable | net::kHangup)) read_ready(*c);
  if (c->loop_fd >= 0 && (e.ready & net::kWritable)) send_some(*c);
}

int64_t ChannelLoop::service() {
  const int64_t next_deadline_ns = flush_queued(driven_batch_);
  if (next_deadline_ns == kStopped) return std::numeric_limits<int64_t>::max();
  iterations_.fetch_add(1, std::memory_order_relaxed);
  return next_deadline_ns;
}

void ChannelLoop::run() {
  // The shim wakes this loop at a frame's deadline: the default 50 µs timer
  // slack would add up to 50 µs to every configured delay.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  std::vector<ChannelConnection*> batch;
  for (;;) {
    const int64_t next_deadline_ns = flush_queued(batch);
    if (next_deadline_ns == kStopped) break;
    iterations_.fetch_add(1, std::memory_order_relaxed);
    bool idle;
    {
      // Sleep only when nothing was queued meanwhile; from here on a queue()
      // sees sleeping_ and wakes the wait.
      std::lock_guard lock(mu_);
      idle = queued_.empty() && !stop_;
      sleeping_ = idle;
    }
    // Idle, the loop sleeps until woken or, while the shim holds frames, until the earliest is due.
    int64_t timeout_ns = idle ? -1 : 0;
    if (idle && next_deadline_ns != std::numeric_limits<int64_t>::max())
      timeout_ns = std::max<int64_t>(0, next_deadline_ns - monotonic_ns());
    const auto ready = events_->wait(timeout_ns);
    {
      std::lock_guard lock(mu_);
      sleeping_ = false;
    }
    for (const net::ReadyEvent& e : ready) on_ready(e);
  }
  close_all();
}

void ChannelLoop::close_all() {
  if (stopped_) return;
  stopped_ = true;
  for (ChannelConnection* c : known_)
    if (c->loop_fd >= 0) fail(*c);
  // Connections opened by a call the loop never saw: close them here.
  std::lock_guard lock(mu_);
  for (ChannelConnection* c : queued_) {
    std::lock_guard conn_lock(c->mu);
    if (c->fd >= 0 && c->fd != c->loop_fd) ::close(c->fd);
    c->fd = -1;
  }
  queued_.clear();
}

void ChannelLoop::flush(ChannelConnection& c) {
  if (!c.loop_known) {
    c.loop_known = true;
    known_.push_back(&c);
  }
  {
    std::lock_guard lock(c.mu);
    c.flush_queued = false;
    if (c.fd < 0) return;  // failed (or closed) after it was queued
    if (c.fd != c.loop_fd) {
      events_->add(c.fd, token_of(&c), net::kReadable);
      c.loop_fd = c.fd;
      c.loop_want_write = false;
    }
    if (c.loop_delayed) {
      // The shim: the batch leaves at its deadline (release_delayed), not now.
      if (!c.out.empty()) {
        delayed_.emplace(c.loop_delayed->hold(c.out, monotonic_ns()), &c);
        delayed_batches_.fetch_add(1, std::memory_order_relaxed);
        c.out.clear();
      }
      return;
    }
    if (c.loop_sent == c.loop_sending.size()) {
      c.loop_sending.clear();
      c.loop_sent = 0;
      c.loop_sending.swap(c.out);  // both keep their capacity: no allocation once grown
    } else {
      c.loop_sending += c.out;
      c.out.clear();
    }
  }
  send_some(c);
}

int64_t ChannelLoop::release_delayed() {
  const int64_t now = monotonic_ns();
  while (!delayed_.empty() && delayed_.top().first <= now) {
    ChannelConnection& c = *delayed_.top().second;
    delayed_.pop();
    if (c.loop_fd < 0) continue;  // failed meanwhile: its frames went with it
    if (c.loop_sent == c.loop_sending.size()) {
      c.loop_sending.clear();
      c.loop_sent = 0;
    }
    if (c.loop_delayed->release_due(now, c.loop_sending) > 0) send_some(c);
  }
  return delayed_.empty() ? std::numeric_limits<int64_t>::max() : delayed_.top().first;
}

void ChannelLoop::send_some(ChannelConnection& c) {
  while (c.loop_sent < c.loop_sending.size()) {
    const ssize_t n = ::send(c.loop_fd, c.loop_sending.data() + c.loop_sent, c.loop_sending.size() - c.loop_sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    sends_.fetch_add(1, std::memory_order_relaxed);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) return fail(c);
    c.loop_sent += static_cast<size_t>(n);
  }
  // Write interest only while output is blocked: an idle connection costs no wake-ups.
  const bool want_write = c.loop_sent < c.loop_sending.size();
  if (want_write != c.loop_want_write) {
    events_->modify(c.loop_fd, token_of(&c), net::kReadable | (want_write ? net::kWritable : 0));
    c.loop_want_write = want_write;
  }
}

void ChannelLoop::read_ready(ChannelConnection& c) {
  const ssize_t got = ::recv(c.loop_fd, read_buf_.data(), read_buf_.size(), MSG_DONTWAIT);
  if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (got <= 0) return fail(c);  // the peer closed or reset: every call in flight fails
  c.loop_parser.feed(read_buf_.data(), static_cast<size_t>(got));
  net::FrameView frame;
  net::FrameParser::Result r;
  while ((r = c.loop_parser.next(frame)) == net::FrameParser::Result::kFrame) {
    if (frame.kind != FrameKind::kResponse) return fail(c);
    CallCallback done;
    {
      std::lock_guard lock(c.mu);
      done = c.pending.take(frame.request_id);
    }
    if (done)
      done(CallResult{frame.status, std::string(frame.payload)});
    else
      late_responses_.fetch_add(1, std::memory_order_relaxed);  // its timeout already fired
  }
  if (r == net::FrameParser::Result::kError) fail(c);
}

void ChannelLoop::fail(ChannelConnection& c) {
  std::vector<CallCallback> failed;
  {
    std::lock_guard lock(c.mu);
    failed = c.pending.take_all();
    c.out.clear();
    c.fd = -1;  // the next call opens a new connection
  }
  events_->remove(c.loop_fd);
  ::close(c.loop_fd);
  c.loop_fd = -1;
  c.loop_sending.clear();
  c.loop_sent = 0;
  c.loop_want_write = false;
  c.loop_parser = net::FrameParser(max_frame_bytes_);
  if (c.loop_delayed) c.loop_delayed->clear();  // held requests belong to the calls just failed
  for (auto& done : failed) done(CallResult{RpcStatus::kUnavailable, {}});
}

// ---------------------------------------------------------------- multiplexed channel

int64_t coarse_deadline_ns(int64_t now_ns, int64_t timeout_ns) {
  const int64_t step = std::clamp<int64_t>(timeout_ns / 100, 1'000, 10'000'000);
  const int64_t due = now_ns + std::max<int64_t>(0, timeout_ns);
  return (due + step - 1) / step * step;
}

MultiplexedChannel::MultiplexedChannel(const std::string& host, int port, size_t connections, TimerService& timers,
                                       ChannelLoop& loop, LinkDelay delay)
    : host_(host), port_(port), timers_(timers), loop_(loop) {
  // A numeric address is judged here, once; a name was resolved and judged at start (--peers,
  // svc/peer_addresses.h) and is judged again on every connect (connect_to): a client built while
  // the name's container is down must not throw, its calls fail `unavailable` until it is back.
  if (net::is_numeric_address(host) || host == "localhost") net::check_allowed_target(host, "peer");
  for (size_t i = 0; i < std::max<size_t>(1, connections); ++i)
    connections_.push_back(std::make_unique<ChannelConnection>(host, port, loop.max_frame_bytes(), delay));
}

MultiplexedChannel::~MultiplexedChannel() { close(); }

void MultiplexedChannel::close() {
  for (auto& c : connections_) {
    std::vector<CallCallback> failed;
    {
      std::lock_guard lock(c->mu);
      c->closed = true;
      failed = c->pending.take_all();
      // The loop still owns the descriptor: shutdown (not close) makes it see EOF and close it.
      if (c->fd >= 0) ::shutdown(c->fd, SHUT_RDWR);
    }
    for (auto& done : failed) done(CallResult{RpcStatus::kUnavailable, {}});
  }
}

void MultiplexedChannel::call(std::string_view method, std::string_view payload, const TraceContext& trace,
                              int64_t timeout_ns, CallCallback done) {
  ChannelConnection& c = *connections_[round_robin_.fetch_add(1, std::memory_order_relaxed) % connections_.size()];
  uint64_t id;
  bool queue;
  {
    std::unique_lock lock(c.mu);
    if (c.fd < 0 && !c.closed) c.fd = connect_to(host_, port_, 200);  // (re)open; callers of c wait meanwhile
    if (c.closed || c.fd < 0) {
      lock.unlock();
      done(CallResult{RpcStatus::kUnavailable, {}});
      return;
    }
    id = c.pending.add(std::move(done));
    try {
      net::append_frame(internal::request_view(id, method, payload, trace), c.out, loop_.max_frame_bytes());
    } catch (const std::invalid_argument&) {  // the request cannot be framed: it fails alone
      CallCallback cb = c.pending.take(id);
      lock.unlock();
      cb(CallResult{RpcStatus::kInternal, {}});
      return;
    }
    queue = !c.flush_queued;
    c.flush_queued = true;
  }
  if (queue) loop_.queue(&c);
  timers_.schedule(coarse_deadline_ns(monotonic_ns(), timeout_ns), [conn = &c, id] {
    CallCallback cb;
    {
      std::lock_guard lock(conn->mu);
      cb = conn->pending.take(id);
    }
    if (cb) cb(CallResult{RpcStatus::kTimeout, {}});
  });
}

}  // namespace tailscope::svc
