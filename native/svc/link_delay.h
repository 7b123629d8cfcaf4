// The link-delay shim: a one-way delay (and jitter) per remote address,
// applied by the sender, for kernels without sch_netem (docs/lab-hosts.md).
// The RPC client holds each request frame, and the server each response
// frame, until its deadline, then sends it; the receiver sees the bytes that
// much later, as if the link were long.
//
// Per connection the deadlines never decrease: a frame's deadline is
//   max(previous deadline on this connection, now + delay + U[0, jitter])
// with U uniform over the integer nanoseconds in [0, jitter]. So frames leave
// in the order they were written (TCP order holds), and a frame written right
// behind one that drew a larger jitter waits for it — back to back, the added
// delay is then larger than the draw (the same head-of-line effect netem's
// jitter has unless it reorders).
//
// Zero delay costs nothing: callers ask LinkDelay::zero() and take their usual
// send path, never the queue. Nothing here sleeps or owns a thread; who wakes
// at next_deadline_ns() is the caller's (the channel loop's wait timeout, the
// process's TimerService). Time is passed in (now_ns), so tests use a fake clock.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>

namespace tailscope::svc {

inline constexpr int64_t kMaxLinkDelayUs = 10'000'000;  // 10 s, one way

struct LinkDelay {
  int64_t delay_ns = 0;
  int64_t jitter_ns = 0;  // 0 ≤ jitter_ns ≤ delay_ns
  bool zero() const { return delay_ns == 0 && jitter_ns == 0; }
  // One draw: delay_ns + U[0, jitter_ns].
  int64_t sample_ns(std::mt19937_64& rng) const;
};

// Remote address → one-way delay. Addresses are kept in canonical text
// (inet_ntop of the parsed address), so "::0:1" and "::1" are one key.
class LinkDelayTable {
 public:
  // "ADDR=DELAY_US[:JITTER_US],..." (IPv6 ADDR in brackets). Throws
  // std::invalid_argument naming `flag` and the item: not numeric, outside the
  // allow-list (net/allow_list.h), delay outside 0 … kMaxLinkDelayUs, jitter
  // outside 0 … delay, an address given twice.
  static LinkDelayTable parse(std::string_view text, std::string_view flag = "--link-delay");
  // Adds one entry (same checks as parse; `what` names the input in errors).
  void add(std::string_view address, int64_t delay_us, int64_t jitter_us, std::string_view what);
  // The delay towards `address` (canonical or not); zero when none is configured.
  LinkDelay for_address(std::string_view address) const;
  bool empty() const { return by_address_.empty(); }
  // The flag text that reproduces this table ("" when empty).
  std::string to_flag() const;
  // [{"address", "delay_us", "jitter_us"}, ...] in address order.
  nlohmann::json to_json() const;

 private:
  std::map<std::string, LinkDelay> by_address_;
};

// Canonical text of a numeric address ("" when it is not one).
std::string canonical_address(std::string_view address);
// The canonical address of a connected socket's peer ("" when unknown).
std::string peer_address(int fd);

// The frames of one connection waiting for their deadlines (a FIFO: the
// deadlines of one connection never decrease, so the oldest is the earliest).
// Not thread-safe: its owner serialises (the loop thread, a write lock).
class DelayedFrames {
 public:
  explicit DelayedFrames(LinkDelay delay, uint64_t seed = std::random_device{}());
  const LinkDelay& delay() const { return delay_; }
  // Holds `bytes` (one or more whole frames) written at now_ns; returns their deadline.
  int64_t hold(std::string_view bytes, int64_t now_ns);
  // Appends, in order, every held frame whose deadline is ≤ now_ns to `out`;
  // returns how many it moved.
  size_t release_due(int64_t now_ns, std::string& out);
  // The earliest deadline held; INT64_MAX when nothing is held.
  int64_t next_deadline_ns() const;
  bool empty() const { return held_.empty(); }
  size_t held() const { return held_.size(); }
  void clear() { held_.clear(); }

 private:
  struct Held {
    int64_t deadline_ns;
    std::string bytes;
  };
  LinkDelay delay_;
  std::mt19937_64 rng_;
  int64_t last_deadline_ns_ = 0;
  std::deque<Held> held_;
};

}  // namespace tailscope::svc
