// Accepting connections when file descriptors run out.
//
// A level-triggered listener whose accept() fails with EMFILE stays readable,
// so a naive loop spins at 100 % CPU. We keep one spare descriptor: on EMFILE
// it is closed, the pending connection is accepted and closed at once (the
// client sees a reset instead of hanging in the backlog), and the spare is
// reopened (the libev/nginx technique). If even that fails, accept_one()
// itself sleeps kAcceptBackoffMs before it returns kBackedOff: the back-off
// lives here, once, and callers just go on with their loop (they must not
// sleep again). Every shed connection is counted.
#pragma once

#include <atomic>
#include <cstdint>

namespace tailscope::net {

class Acceptor {
 public:
  explicit Acceptor(int listen_fd);
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  enum class Outcome { kAccepted, kNoneWaiting, kShed, kBackedOff, kListenerClosed };
  struct Result {
    Outcome outcome;
    int fd;  // valid when kAccepted (TCP_NODELAY set, CLOEXEC, blocking unless nonblocking)
  };

  // One accept4(). `nonblocking` sets O_NONBLOCK on the accepted socket.
  Result accept_one(bool nonblocking);

  // The accept loop of every readiness-based server: takes what is waiting,
  // at most kAcceptBurst connections (a connection storm cannot starve the
  // sessions already open), and hands each new fd to on_accepted(fd). Shed
  // connections are skipped; it stops at the first other outcome. Returns how
  // many were accepted.
  template <class OnAccepted>
  int accept_ready(bool nonblocking, OnAccepted&& on_accepted) {
    int accepted = 0;
    for (int k = 0; k < kAcceptBurst; ++k) {
      const Result r = accept_one(nonblocking);
      if (r.outcome == Outcome::kShed) continue;
      if (r.outcome != Outcome::kAccepted) break;
      ++accepted;
      on_accepted(r.fd);
    }
    return accepted;
  }
  static constexpr int kAcceptBurst = 64;

  int listen_fd() const { return listen_fd_; }
  static int64_t shed_connections() { return shed_total_.load(std::memory_order_relaxed); }

 private:
  int listen_fd_;
  int spare_fd_;
  static std::atomic<int64_t> shed_total_;
};

// How long accept_one() pauses before kBackedOff (no busy loop on fd
// exhaustion); completion-based models (Asio, io_uring), which cannot call
// accept_one(), wait the same time before they accept again.
inline constexpr int kAcceptBackoffMs = 10;

}  // namespace tailscope::net
