// RPC clients. Two shapes, because the models need both:
//
//  * MultiplexedChannel — a few long-lived connections to one service, many
//    calls in flight on each, responses matched by request id on a reader
//    thread per connection and delivered to a callback. Per-call timeouts
//    through the TimerService. Used by pool-blocking (which then blocks on a
//    future), pool-callback and coroutine.
//  * BlockingClientPool — DeathStarBench's ClientPool: a call borrows an idle
//    connection (opening one if none is idle, up to max_connections), sends,
//    and reads its response on the calling thread; one call per connection at
//    a time. Used by std-async and std-thread, which serve each connection with
//    one thread, so the callee's concurrency is the number of connections —
//    exactly DeathStarBench's Thrift setup.
//
// Either way a call ends exactly once: with the response, kTimeout when the
// deadline passes, or kUnavailable when the connection fails or cannot be
// opened. A failed connection is reopened on a later call, so the graph
// recovers when a killed service comes back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/frame.h"
#include "svc/timer_service.h"

namespace tailscope::svc {

// The client speaks the RPC frame of net/frame.h.
using net::append_frame;
using net::Frame;
using net::FrameKind;
using net::FrameParser;
using net::kDefaultMaxFrameBytes;
using net::RpcStatus;
using net::TraceContext;

struct CallResult {
  RpcStatus status = RpcStatus::kOk;
  std::string payload;
};
using CallCallback = std::function<void(CallResult&&)>;

// Opens a blocking TCP connection to 127.0.0.1:port within timeout_ms; -1 on failure.
int connect_loopback(int port, int timeout_ms);

class MultiplexedChannel {
 public:
  MultiplexedChannel(int port, size_t connections, TimerService& timers,
                     size_t max_frame_bytes = kDefaultMaxFrameBytes);
  ~MultiplexedChannel();
  MultiplexedChannel(const MultiplexedChannel&) = delete;
  MultiplexedChannel& operator=(const MultiplexedChannel&) = delete;

  // Sends the request; `done` runs once, on a reader thread, the timer
  // thread, or (connection cannot be opened) the calling thread.
  void call(const std::string& method, std::string payload, const TraceContext& trace, int64_t timeout_ns,
            CallCallback done);
  void close();
  int64_t late_responses() const { return late_responses_.load(); }

 private:
  struct Connection {
    std::mutex mu;  // guards fd, reader and (re)connection
    int fd = -1;
    std::thread reader;
    std::mutex write_mu;
    std::mutex pending_mu;
    std::unordered_map<uint64_t, CallCallback> pending;
    std::atomic<bool> alive{false};
  };
  bool ensure_connected(Connection& c);
  void read_loop(Connection* c, int fd);
  void fail_all(Connection& c, RpcStatus status);

  int port_;
  TimerService& timers_;
  size_t max_frame_bytes_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> round_robin_{0};
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> late_responses_{0};
};

class BlockingClientPool {
 public:
  BlockingClientPool(int port, size_t max_connections, size_t max_frame_bytes = kDefaultMaxFrameBytes);
  ~BlockingClientPool();
  BlockingClientPool(const BlockingClientPool&) = delete;
  BlockingClientPool& operator=(const BlockingClientPool&) = delete;

  CallResult call(const std::string& method, std::string payload, const TraceContext& trace, int64_t timeout_ns);
  void close();
  size_t open_connections() const;

 private:
  int borrow(int64_t deadline_ns);
  void give_back(int fd, bool reusable);

  int port_;
  size_t max_connections_;
  size_t max_frame_bytes_;
  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  std::vector<int> idle_;
  size_t open_ = 0;
  bool closed_ = false;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace tailscope::svc
