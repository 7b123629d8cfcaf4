#include "net/accept.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "net/socket.h"

namespace tailscope::net {

std::atomic<int64_t> Acceptor::shed_total_{0};

Acceptor::Acceptor(int listen_fd) : listen_fd_(listen_fd), spare_fd_(::open("/dev/null", O_RDONLY | O_CLOEXEC)) {}

Acceptor::~Acceptor() {
  if (spare_fd_ >= 0) ::close(spare_fd_);
}

Acceptor::Result Acceptor::accept_one(bool nonblocking) {
  const int flags = SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0);
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, flags);
    if (fd >= 0) {
      set_nodelay(fd);
      return {Outcome::kAccepted, fd};
    }
    switch (errno) {
      case EINTR:
      case ECONNABORTED:
        continue;
      case EAGAIN:
        return {Outcome::kNoneWaiting, -1};
      case EMFILE:
      case ENFILE:
      case ENOBUFS:
      case ENOMEM: {
        if (spare_fd_ >= 0) {
          ::close(spare_fd_);
          int victim = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (victim >= 0) {
            ::close(victim);
            shed_total_.fetch_add(1, std::memory_order_relaxed);
          }
          spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
          if (victim >= 0) return {Outcome::kShed, -1};
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(kAcceptBackoffMs));
        if (spare_fd_ < 0) spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        return {Outcome::kBackedOff, -1};
      }
      case EBADF:
      case EINVAL:
      case ENOTSOCK:
        return {Outcome::kListenerClosed, -1};
      default:
        // Transient per-connection failures (EPROTO, EPERM from a firewall):
        // drop this one and let the caller continue.
        return {Outcome::kNoneWaiting, -1};
    }
  }
}

}  // namespace tailscope::net
