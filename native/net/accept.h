// Accepting connections when file descriptors run out.
//
// A level-triggered listener whose accept() fails with EMFILE stays readable,
// so a naive loop spins at 100 % CPU. We keep one spare descriptor: on EMFILE
// it is closed, the pending connection is accepted and closed at once (the
// client sees a reset instead of hanging in the backlog), and the spare is
// reopened (the libev/nginx technique). If even that fails, the caller sleeps
// a short back-off instead of spinning. Every shed connection is counted.
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

  int listen_fd() const { return listen_fd_; }
  static int64_t shed_connections() { return shed_total_.load(std::memory_order_relaxed); }

 private:
  int listen_fd_;
  int spare_fd_;
  static std::atomic<int64_t> shed_total_;
};

// How long the caller pauses after kBackedOff (no busy loop on fd exhaustion).
inline constexpr int kAcceptBackoffMs = 10;

}  // namespace tailscope::net
