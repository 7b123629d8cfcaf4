// Readiness notification, one small interface with one backend per kernel
// mechanism (the shape of redis' ae: ae_epoll.c, ae_select.c ...):
// poller_epoll.cc and poller_poll.cc sit side by side so a reader can diff
// them. Every event-driven server model and the load generator's workers wait
// through it; only the mechanism differs between the `epoll` and `poll` echo
// models.
//
// Level-triggered: a descriptor stays ready until it is read, written or its
// interest changes. Interest follows what the caller can take (read while it
// has room for input, write while output is pending), so a peer that never
// reads costs no wake-ups.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace tailscope::net {

// Interest (add/modify) and readiness (wait) bits.
inline constexpr uint32_t kReadable = 1u << 0;  // data, or the peer half-closed (read returns 0)
inline constexpr uint32_t kWritable = 1u << 1;
inline constexpr uint32_t kHangup = 1u << 2;  // readiness only: error or both directions shut; close it
// Interest only: wake one of the pollers sharing this descriptor, not all
// (EPOLLEXCLUSIVE; a listener shared by several loops). Backends without it ignore it.
inline constexpr uint32_t kExclusive = 1u << 3;

struct ReadyEvent {
  uint64_t token;  // what the caller registered the descriptor with
  uint32_t ready;  // kReadable | kWritable | kHangup
};

enum class PollMechanism { kEpoll, kPoll };
std::string_view to_string(PollMechanism m);

class Poller {
 public:
  virtual ~Poller() = default;
  // Registration; throws std::system_error naming the call and fd on failure.
  virtual void add(int fd, uint64_t token, uint32_t interest) = 0;
  virtual void modify(int fd, uint64_t token, uint32_t interest) = 0;
  virtual void remove(int fd) = 0;  // before the descriptor is closed
  // Waits at most timeout_ns (< 0: until something is ready, 0: just looks)
  // and fills `out`. Returns how many; 0 on timeout or a signal.
  virtual size_t wait(std::span<ReadyEvent> out, int64_t timeout_ns) = 0;
};

std::unique_ptr<Poller> make_epoll_poller();
std::unique_ptr<Poller> make_poll_poller();
std::unique_ptr<Poller> make_poller(PollMechanism m);

}  // namespace tailscope::net
