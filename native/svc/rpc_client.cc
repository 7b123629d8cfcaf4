#include "svc/rpc_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "core/clock.h"

namespace tailscope::svc {
namespace {

bool send_all(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string request_bytes(uint64_t id, const std::string& method, std::string payload, const TraceContext& trace,
                          size_t max_frame_bytes) {
  Frame f;
  f.kind = FrameKind::kRequest;
  f.request_id = id;
  f.trace = trace;
  f.method = method;
  f.payload = std::move(payload);
  std::string out;
  append_frame(f, out, max_frame_bytes);
  return out;
}

}  // namespace

int connect_loopback(int port, int timeout_ms) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (rc < 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rc = ::poll(&p, 1, timeout_ms) == 1 ? 0 : -1;
    int err = 0;
    socklen_t len = sizeof err;
    if (rc == 0 && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0)) rc = -1;
  }
  if (rc < 0) {
    ::close(fd);
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// ---------------------------------------------------------------- multiplexed

MultiplexedChannel::MultiplexedChannel(int port, size_t connections, TimerService& timers, size_t max_frame_bytes)
    : port_(port), timers_(timers), max_frame_bytes_(max_frame_bytes) {
  for (size_t i = 0; i < std::max<size_t>(1, connections); ++i) connections_.push_back(std::make_unique<Connection>());
}

MultiplexedChannel::~MultiplexedChannel() { close(); }

void MultiplexedChannel::close() {
  closed_ = true;
  for (auto& c : connections_) {
    std::lock_guard lock(c->mu);
    if (c->fd >= 0) ::shutdown(c->fd, SHUT_RDWR);
    if (c->reader.joinable()) c->reader.join();
    if (c->fd >= 0) ::close(c->fd);
    c->fd = -1;
    fail_all(*c, RpcStatus::kUnavailable);
  }
}

bool MultiplexedChannel::ensure_connected(Connection& c) {
  if (c.alive.load(std::memory_order_acquire)) return true;
  std::lock_guard lock(c.mu);
  if (c.alive.load(std::memory_order_acquire)) return true;
  if (closed_) return false;
  if (c.reader.joinable()) c.reader.join();  // the old reader has failed its calls and is exiting
  std::lock_guard write_lock(c.write_mu);    // no writer may hold the old fd while it is closed and reused
  if (c.fd >= 0) ::close(c.fd);
  c.fd = connect_loopback(port_, 200);
  if (c.fd < 0) return false;
  c.alive.store(true, std::memory_order_release);
  c.reader = std::thread([this, conn = &c, fd = c.fd] { read_loop(conn, fd); });
  return true;
}

void MultiplexedChannel::fail_all(Connection& c, RpcStatus status) {
  std::unordered_map<uint64_t, CallCallback> failed;
  {
    std::lock_guard lock(c.pending_mu);
    failed.swap(c.pending);
  }
  for (auto& [_, cb] : failed) cb(CallResult{status, {}});
}

void MultiplexedChannel::read_loop(Connection* c, int fd) {
  FrameParser parser(max_frame_bytes_);
  std::string buf(64 * 1024, '\0');
  Frame frame;
  for (;;) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    parser.feed(buf.data(), static_cast<size_t>(n));
    FrameParser::Result r;
    while ((r = parser.next(frame)) == FrameParser::Result::kFrame) {
      if (frame.kind != FrameKind::kResponse) {
        r = FrameParser::Result::kError;
        break;
      }
      CallCallback cb;
      {
        std::lock_guard lock(c->pending_mu);
        auto it = c->pending.find(frame.request_id);
        if (it != c->pending.end()) {
          cb = std::move(it->second);
          c->pending.erase(it);
        }
      }
      if (cb)
        cb(CallResult{frame.status, std::move(frame.payload)});
      else
        late_responses_.fetch_add(1, std::memory_order_relaxed);  // its timeout already fired
    }
    if (r == FrameParser::Result::kError) break;
  }
  ::shutdown(fd, SHUT_RDWR);
  c->alive.store(false, std::memory_order_release);
  fail_all(*c, RpcStatus::kUnavailable);
}

void MultiplexedChannel::call(const std::string& method, std::string payload, const TraceContext& trace,
                              int64_t timeout_ns, CallCallback done) {
  Connection& c = *connections_[round_robin_.fetch_add(1, std::memory_order_relaxed) % connections_.size()];
  if (closed_ || !ensure_connected(c)) {
    done(CallResult{RpcStatus::kUnavailable, {}});
    return;
  }
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  std::string bytes = request_bytes(id, method, std::move(payload), trace, max_frame_bytes_);
  {
    std::lock_guard lock(c.pending_mu);
    c.pending.emplace(id, std::move(done));
  }
  timers_.schedule(monotonic_ns() + timeout_ns, [conn = &c, id] {
    CallCallback cb;
    {
      std::lock_guard lock(conn->pending_mu);
      auto it = conn->pending.find(id);
      if (it == conn->pending.end()) return;
      cb = std::move(it->second);
      conn->pending.erase(it);
    }
    cb(CallResult{RpcStatus::kTimeout, {}});
  });
  std::lock_guard lock(c.write_mu);
  // On failure the reader fails every pending call, this one included.
  if (c.fd >= 0 && !send_all(c.fd, bytes)) ::shutdown(c.fd, SHUT_RDWR);
}

// ---------------------------------------------------------------- blocking pool

BlockingClientPool::BlockingClientPool(int port, size_t max_connections, size_t max_frame_bytes)
    : port_(port), max_connections_(std::max<size_t>(1, max_connections)), max_frame_bytes_(max_frame_bytes) {}

BlockingClientPool::~BlockingClientPool() { close(); }

void BlockingClientPool::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  for (int fd : idle_) ::close(fd);
  open_ -= idle_.size();
  idle_.clear();
  idle_cv_.notify_all();
}

size_t BlockingClientPool::open_connections() const {
  std::lock_guard lock(mu_);
  return open_;
}

int BlockingClientPool::borrow(int64_t deadline_ns) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (closed_) return -1;
    if (!idle_.empty()) {
      const int fd = idle_.back();
      idle_.pop_back();
      return fd;
    }
    if (open_ < max_connections_) {
      ++open_;
      lock.unlock();
      const int fd = connect_loopback(port_, 200);
      if (fd < 0) {
        lock.lock();
        --open_;
        idle_cv_.notify_one();
      }
      return fd;
    }
    if (idle_cv_.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns))) ==
        std::cv_status::timeout)
      return -2;
  }
}

void BlockingClientPool::give_back(int fd, bool reusable) {
  std::lock_guard lock(mu_);
  if (reusable && !closed_) {
    idle_.push_back(fd);
  } else {
    ::close(fd);
    --open_;
  }
  idle_cv_.notify_one();
}

CallResult BlockingClientPool::call(const std::string& method, std::string payload, const TraceContext& trace,
                                    int64_t timeout_ns) {
  const int64_t deadline = monotonic_ns() + timeout_ns;
  const int fd = borrow(deadline);
  if (fd == -2) return {RpcStatus::kTimeout, {}};
  if (fd < 0) return {RpcStatus::kUnavailable, {}};
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  if (!send_all(fd, request_bytes(id, method, std::move(payload), trace, max_frame_bytes_))) {
    give_back(fd, false);
    return {RpcStatus::kUnavailable, {}};
  }
  FrameParser parser(max_frame_bytes_);
  char buf[16 * 1024];
  Frame frame;
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
    give_back(fd, true);
    return {frame.status, std::move(frame.payload)};
  }
}

}  // namespace tailscope::svc
