#include "svc/blocking_client_pool.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <random>
#include <stdexcept>

#include "core/clock.h"
#include "net/allow_list.h"
#include "svc/internal/request_frame.h"

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

void close_all(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

}  // namespace

BlockingClientPool::BlockingClientPool(std::string host, int port, size_t max_connections, LinkDelay delay,
                                       int64_t idle_timeout_ns, size_t max_frame_bytes)
    : host_(std::move(host)),
      port_(port),
      max_connections_(std::max<size_t>(1, max_connections)),
      max_frame_bytes_(max_frame_bytes),
      delay_(delay),
      idle_(idle_timeout_ns) {
  // A numeric address is judged here, once; a name was resolved and judged at start (--peers,
  // svc/peer_addresses.h) and is judged again on every connect (connect_to): a client built while
  // the name's container is down must not throw, its calls fail `unavailable` until it is back.
  if (net::is_numeric_address(host_) || host_ == "localhost") net::check_allowed_target(host_, "peer");
}

BlockingClientPool::~BlockingClientPool() { close(); }

void BlockingClientPool::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  std::vector<int> fds;
  open_ -= idle_.take_all(fds);
  close_all(fds);
  idle_cv_.notify_all();
}

size_t BlockingClientPool::open_connections() const {
  std::lock_guard lock(mu_);
  return open_;
}

void BlockingClientPool::take_expired(std::vector<int>& out) { open_ -= idle_.take_expired(monotonic_ns(), out); }

int BlockingClientPool::borrow(int64_t deadline_ns) {
  std::vector<int> expired;
  std::unique_lock lock(mu_);
  take_expired(expired);
  for (;;) {
    if (closed_) break;
    if (!idle_.empty()) {
      const int fd = idle_.take_newest();
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
      idle_.give_back(fd, monotonic_ns());
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
    net::append_frame(internal::request_view(id, method, payload, trace), request, max_frame_bytes_);
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
