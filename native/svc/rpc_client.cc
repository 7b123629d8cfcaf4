#include "svc/rpc_client.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <random>
#include <stdexcept>

#include "core/clock.h"
#include "core/thread_name.h"
#include "net/allow_list.h"
#include "net/socket.h"

namespace tailscope::svc {
namespace {

bool send_all(int fd, std::string_view bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

net::FrameView request_view(uint64_t id, std::string_view method, std::string_view payload, const TraceContext& trace) {
  return net::FrameView{FrameKind::kRequest, id, RpcStatus::kOk, trace, method, payload};
}

// A read takes at most this much: a burst of responses costs one recv().
constexpr size_t kReadBytes = 64 * 1024;

}  // namespace

int connect_to(const std::string& host, int port, int timeout_ms) {
  net::check_allowed_target(host, "connect to");  // before the socket exists: no packet to a refused address
  const int fd = net::start_connect(host, port);  // non-blocking, TCP_NODELAY
  if (fd < 0) return -1;
  pollfd p{fd, POLLOUT, 0};
  int rc = ::poll(&p, 1, timeout_ms) == 1 ? 0 : -1;
  int err = 0;
  socklen_t len = sizeof err;
  if (rc == 0 && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0)) rc = -1;
  if (rc < 0) {
    ::close(fd);
    return -1;
  }
  net::set_blocking(fd);
  return fd;
}

// ---------------------------------------------------------------- pending calls

namespace internal {

uint64_t PendingCalls::add(CallCallback done) {
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[index];
  s.used = true;
  s.done = std::move(done);
  ++in_use_;
  return (static_cast<uint64_t>(s.generation) << 32) | index;
}

CallCallback PendingCalls::take(uint64_t id) {
  const auto index = static_cast<uint32_t>(id);
  if (index >= slots_.size()) return {};
  Slot& s = slots_[index];
  if (!s.used || s.generation != static_cast<uint32_t>(id >> 32)) return {};
  CallCallback done = std::move(s.done);
  s.done = nullptr;
  s.used = false;
  ++s.generation;
  free_.push_back(index);
  --in_use_;
  return done;
}

std::vector<CallCallback> PendingCalls::take_all() {
  std::vector<CallCallback> out;
  for (uint32_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].used) out.push_back(take((static_cast<uint64_t>(slots_[i].generation) << 32) | i));
  return out;
}

}  // namespace internal

using internal::ChannelConnection;

// ---------------------------------------------------------------- channel loop

namespace {
uint64_t token_of(ChannelConnection* c) { return reinterpret_cast<uint64_t>(c) | net::LoopDriven::kTokenTag; }
ChannelConnection* connection_of(uint64_t token) {
  return reinterpret_cast<ChannelConnection*>(token & ~net::LoopDriven::kTokenTag);
}
}  // namespace

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
  net::check_allowed_target(host, "peer");
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
      net::append_frame(request_view(id, method, payload, trace), c.out, loop_.max_frame_bytes());
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

// ---------------------------------------------------------------- blocking pool

BlockingClientPool::BlockingClientPool(std::string host, int port, size_t max_connections, LinkDelay delay,
                                       int64_t idle_timeout_ns, size_t max_frame_bytes)
    : host_(std::move(host)),
      port_(port),
      max_connections_(std::max<size_t>(1, max_connections)),
      max_frame_bytes_(max_frame_bytes),
      delay_(delay),
      idle_timeout_ns_(std::max<int64_t>(0, idle_timeout_ns)) {
  net::check_allowed_target(host_, "peer");
}

BlockingClientPool::~BlockingClientPool() { close(); }

void BlockingClientPool::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  for (const Idle& c : idle_) ::close(c.fd);
  open_ -= idle_.size();
  idle_.clear();
  idle_cv_.notify_all();
}

size_t BlockingClientPool::open_connections() const {
  std::lock_guard lock(mu_);
  return open_;
}

void BlockingClientPool::take_expired(std::vector<int>& out) {
  if (idle_timeout_ns_ <= 0) return;
  const int64_t oldest_kept_ns = monotonic_ns() - idle_timeout_ns_;
  while (!idle_.empty() && idle_.front().since_ns < oldest_kept_ns) {
    out.push_back(idle_.front().fd);
    idle_.pop_front();
    --open_;
  }
}

namespace {
void close_all(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}
}  // namespace

int BlockingClientPool::borrow(int64_t deadline_ns) {
  std::vector<int> expired;
  std::unique_lock lock(mu_);
  take_expired(expired);
  for (;;) {
    if (closed_) break;
    if (!idle_.empty()) {
      const int fd = idle_.back().fd;
      idle_.pop_back();
      lock.unlock();
      close_all(expired);
      return fd;
    }
    if (open_ < max_connections_) {
      ++open_;
      lock.unlock();
      close_all(expired);
      const int fd = connect_to(host_, port_, 200);
      if (fd < 0) {
        lock.lock();
        --open_;
        idle_cv_.notify_one();
      }
      return fd;
    }
    if (idle_cv_.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns))) ==
        std::cv_status::timeout) {
      lock.unlock();
      close_all(expired);
      return -2;
    }
  }
  lock.unlock();
  close_all(expired);
  return -1;
}

void BlockingClientPool::give_back(int fd, bool reusable) {
  std::vector<int> expired;
  {
    std::lock_guard lock(mu_);
    if (reusable && !closed_) {
      idle_.push_back(Idle{fd, monotonic_ns()});
    } else {
      expired.push_back(fd);
      --open_;
    }
    take_expired(expired);
    idle_cv_.notify_one();
  }
  close_all(expired);
}

CallResult BlockingClientPool::call(std::string_view method, std::string_view payload, const TraceContext& trace,
                                    int64_t timeout_ns) {
  const int64_t deadline = monotonic_ns() + timeout_ns;
  const int fd = borrow(deadline);
  if (fd == -2) return {RpcStatus::kTimeout, {}};
  if (fd < 0) return {RpcStatus::kUnavailable, {}};
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  thread_local std::string request;  // reused by every call of this thread
  request.clear();
  try {
    net::append_frame(request_view(id, method, payload, trace), request, max_frame_bytes_);
  } catch (const std::invalid_argument&) {
    give_back(fd, true);
    return {RpcStatus::kInternal, {}};
  }
  if (!delay_.zero()) {
    // The shim: this thread waits for the answer anyway, so it holds the
    // request itself. One call per connection at a time: the previous
    // request's deadline has passed, so deadlines on a connection never decrease.
    thread_local std::mt19937_64 rng(std::random_device{}());
    thread_local bool slack_set = (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0), true);
    (void)slack_set;
    const int64_t send_at = monotonic_ns() + delay_.sample_ns(rng);
    sleep_until_ns(std::min(send_at, deadline));
    if (send_at > deadline) {
      give_back(fd, true);  // nothing was sent: the connection is clean
      return {RpcStatus::kTimeout, {}};
    }
  }
  if (!send_all(fd, request)) {
    give_back(fd, false);
    return {RpcStatus::kUnavailable, {}};
  }
  FrameParser parser(max_frame_bytes_);
  char buf[16 * 1024];
  net::FrameView frame;
  for (;;) {
    const int64_t left_ms = (deadline - monotonic_ns() + 999'999) / 1'000'000;
    if (left_ms <= 0) {
      give_back(fd, false);  // a late response would be read by the next borrower: never reuse
      return {RpcStatus::kTimeout, {}};
    }
    pollfd p{fd, POLLIN, 0};
    const int pr = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      give_back(fd, false);
      return {RpcStatus::kUnavailable, {}};
    }
    parser.feed(buf, static_cast<size_t>(n));
    const auto r = parser.next(frame);
    if (r == FrameParser::Result::kNeedMore) continue;
    if (r == FrameParser::Result::kError || frame.kind != FrameKind::kResponse || frame.request_id != id ||
        parser.buffered_bytes() != 0) {
      give_back(fd, false);
      return {RpcStatus::kUnavailable, {}};
    }
    CallResult result{frame.status, std::string(frame.payload)};
    give_back(fd, true);
    return result;
  }
}

}  // namespace tailscope::svc
