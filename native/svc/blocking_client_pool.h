// The blocking RPC client: DeathStarBench's ClientPool. A call borrows an
// idle connection (opening one if none is idle, up to max_connections),
// sends, and reads its response on the calling thread; one call per
// connection at a time. Used by std-async and std-thread, which serve each
// connection with one thread, so the callee's concurrency is the number of
// connections — exactly DeathStarBench's Thrift setup. It stays blocking:
// that is the model being studied. The other client model is
// svc/multiplexed_channel.h; how a call ends: svc/rpc_call.h.
//
// A nonzero LinkDelay (svc/link_delay.h) holds each request until its
// deadline: the call thread, which waits for the answer anyway, sleeps until
// then before it sends. Zero delay sends at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "svc/idle_connections.h"
#include "svc/link_delay.h"
#include "svc/rpc_call.h"
#include "svc/transport.h"

namespace tailscope::svc {

class BlockingClientPool {
 public:
  // Throws std::invalid_argument when host is not on the allow-list.
  // `idle_timeout_ns` > 0: a pooled connection idle that long is closed at the
  // next borrow or give-back (0: kept until close()).
  BlockingClientPool(std::string host, int port, size_t max_connections, LinkDelay delay, int64_t idle_timeout_ns = 0,
                     size_t max_frame_bytes = kDefaultMaxFrameBytes);
  // 127.0.0.1:port, no delay.
  BlockingClientPool(int port, size_t max_connections, size_t max_frame_bytes = kDefaultMaxFrameBytes)
      : BlockingClientPool("127.0.0.1", port, max_connections, LinkDelay{}, 0, max_frame_bytes) {}
  ~BlockingClientPool();
  BlockingClientPool(const BlockingClientPool&) = delete;
  BlockingClientPool& operator=(const BlockingClientPool&) = delete;

  CallResult call(std::string_view method, std::string_view payload, const TraceContext& trace, int64_t timeout_ns);
  void close();
  size_t open_connections() const;

 private:
  int borrow(int64_t deadline_ns);
  void give_back(int fd, bool reusable);
  // Caller holds mu_: moves every idle connection older than the idle timeout
  // into `out` (closed by the caller once the lock is released).
  void take_expired(std::vector<int>& out);

  std::string host_;
  int port_;
  size_t max_connections_;
  size_t max_frame_bytes_;
  LinkDelay delay_;
  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  IdleConnections<int> idle_;  // fds
  size_t open_ = 0;
  bool closed_ = false;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace tailscope::svc
