// The idle side of a connection pool, shared by the blocking RPC client
// (svc/blocking_client_pool.h) and the real stores' blocking pools
// (svc/stores/store_set.h): the most recently given back is reused first, so
// the longest idle sit at the front, and those idle longer than the timeout
// are handed out to be closed. Without the expiry a pool keeps a burst's
// high-water mark of connections — and the server one thread or socket per
// connection — for the rest of the run (the 30-minute soak of
// docs/measurements.md saw a service's fds grow 59 → 234 that way).
// Not thread-safe: the owning pool holds its own lock around every call.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace tailscope::svc {

template <class Connection>
class IdleConnections {
 public:
  // idle_timeout_ns <= 0: nothing ever expires.
  explicit IdleConnections(int64_t idle_timeout_ns) : idle_timeout_ns_(idle_timeout_ns > 0 ? idle_timeout_ns : 0) {}

  bool empty() const { return idle_.empty(); }
  size_t size() const { return idle_.size(); }

  void give_back(Connection c, int64_t now_ns) { idle_.push_back(Idle{std::move(c), now_ns}); }
  // The most recently given back (the caller checked !empty()).
  Connection take_newest() {
    Connection c = std::move(idle_.back().connection);
    idle_.pop_back();
    return c;
  }
  // Moves every connection idle longer than the timeout into `out`; returns how many.
  size_t take_expired(int64_t now_ns, std::vector<Connection>& out) {
    if (idle_timeout_ns_ == 0) return 0;
    size_t n = 0;
    while (!idle_.empty() && now_ns - idle_.front().since_ns > idle_timeout_ns_) {
      out.push_back(std::move(idle_.front().connection));
      idle_.pop_front();
      ++n;
    }
    return n;
  }
  // Every idle connection, for close().
  size_t take_all(std::vector<Connection>& out) {
    const size_t n = idle_.size();
    for (Idle& i : idle_) out.push_back(std::move(i.connection));
    idle_.clear();
    return n;
  }

 private:
  struct Idle {
    Connection connection;
    int64_t since_ns;  // when it was given back
  };
  int64_t idle_timeout_ns_;
  std::deque<Idle> idle_;
};

}  // namespace tailscope::svc
