// One small event loop: a readiness backend (net/poller.h) plus an eventfd
// that any thread can use to end a wait early (wake()). The echo models, the
// service runtime's event-loop servers and the load generator's workers all
// wait through it; what they do with a ready descriptor is theirs.
//
// Not thread-safe except wake(): one thread owns a loop.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "net/poller.h"

namespace tailscope::net {

class EventLoop {
 public:
  static constexpr size_t kMaxEventsPerWait = 256;

  explicit EventLoop(PollMechanism mechanism = PollMechanism::kEpoll);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Tokens are the caller's (an index, a pointer); kWakeToken is reserved.
  void add(int fd, uint64_t token, uint32_t interest) { poller_->add(fd, token, interest); }
  void modify(int fd, uint64_t token, uint32_t interest) { poller_->modify(fd, token, interest); }
  void remove(int fd) { poller_->remove(fd); }

  // Waits at most timeout_ns (< 0: until ready or woken) and returns the
  // ready descriptors' events, valid until the next wait(). A wake() ends the
  // wait; it is consumed here and not among the events.
  std::span<const ReadyEvent> wait(int64_t timeout_ns);

  // Any thread (async-signal-safe): the current or next wait() returns.
  void wake();

  static constexpr uint64_t kWakeToken = ~uint64_t{0};

 private:
  std::unique_ptr<Poller> poller_;
  int wake_fd_;
  std::array<ReadyEvent, kMaxEventsPerWait> events_;
};

// Work another component does on a loop's own thread, so that its
// descriptors need no thread of their own: it registers them in the loop
// with tokens that have kTokenTag set (the loop's owner gives those events to
// on_ready), and the owner calls service() once per iteration, before it
// waits, to send what was queued meanwhile. svc's coroutine model drives its
// RPC client connections this way (svc/multiplexed_channel.h, ChannelLoop).
class LoopDriven {
 public:
  // User-space pointers and descriptors never have the top bit set.
  static constexpr uint64_t kTokenTag = uint64_t{1} << 63;
  virtual ~LoopDriven() = default;
  virtual void on_ready(const ReadyEvent& e) = 0;
  // Returns the monotonic time (ns) by which it must be serviced again;
  // INT64_MAX: only when one of its descriptors is ready.
  virtual int64_t service() = 0;
};

}  // namespace tailscope::net
