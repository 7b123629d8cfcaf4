// RPC clients. Two shapes, because the models need both:
//
//  * MultiplexedChannel — a few long-lived connections to one service, many
//    calls in flight on each, responses matched by request id. The sockets
//    belong to one ChannelLoop per service process (net/event_loop.h), not to
//    a thread per connection: a call encodes its frame into its connection's
//    output buffer and, if the loop has nothing queued for that connection
//    yet, queues it (waking the loop only when it sleeps); the loop sends what
//    a connection gathered in one send() per iteration, reads responses,
//    decodes them in place and runs each call's callback on the loop thread,
//    so a completion reaches the model's executor with one wake-up (the
//    model's post). Request ids index a slot table, so nothing on the hot
//    path allocates once buffers have grown. Per-call timeouts through the
//    TimerService. Used by pool-blocking (which then blocks on a future),
//    pool-callback and coroutine.
//  * BlockingClientPool — DeathStarBench's ClientPool: a call borrows an idle
//    connection (opening one if none is idle, up to max_connections), sends,
//    and reads its response on the calling thread; one call per connection at
//    a time. Used by std-async and std-thread, which serve each connection with
//    one thread, so the callee's concurrency is the number of connections —
//    exactly DeathStarBench's Thrift setup. It stays blocking: that is the
//    model being studied.
//
// Either way a call ends exactly once: with the response, kTimeout when the
// deadline passes, or kUnavailable when the connection fails or cannot be
// opened. A failed connection is reopened on a later call, so the graph
// recovers when a killed service comes back.
//
// A service's peers live at host:port; every host passes the allow-list
// (net/allow_list.h) when a client is built, before any socket exists. A
// nonzero LinkDelay (svc/link_delay.h) holds each request frame until its
// deadline: the channel loop keeps the held frames per connection and wakes
// at the earliest deadline (its wait timeout, nanoseconds: epoll_pwait2); a
// blocking pool's call thread, which waits for the answer anyway, sleeps
// until then before it sends. Zero delay takes the paths above unchanged.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "net/event_loop.h"
#include "svc/link_delay.h"
#include "svc/timer_service.h"
#include "svc/transport.h"

namespace tailscope::svc {

struct CallResult {
  RpcStatus status = RpcStatus::kOk;
  std::string payload;
};
using CallCallback = std::function<void(CallResult&&)>;

// A call's timeout deadline, rounded up to a grid of 1 % of the timeout (1 µs
// … 10 ms). Calls due in one grid step share a deadline, so the timer thread
// wakes once per step for all of them instead of once per call — with 1 s
// timeouts and thousands of calls a second that was most of its CPU, and
// nearly every one of those timers finds its call long answered. A call
// times out at most 1 % (10 ms) later than asked.
int64_t coarse_deadline_ns(int64_t now_ns, int64_t timeout_ns);

// Opens a blocking TCP connection (TCP_NODELAY) to host:port within
// timeout_ms; -1 on failure. Throws std::invalid_argument, before any socket
// exists, when host is not numeric or not on the allow-list.
int connect_to(const std::string& host, int port, int timeout_ms);

namespace internal {

// Calls in flight on one connection. A request id is the slot index (low 32
// bits) and the slot's generation (high 32 bits): a late response or a
// timeout for a slot already reused finds another generation and does nothing.
class PendingCalls {
 public:
  uint64_t add(CallCallback done);
  // The callback of `id`, removed; empty when the call already ended.
  CallCallback take(uint64_t id);
  // Every pending callback, removed.
  std::vector<CallCallback> take_all();
  size_t size() const { return in_use_; }

 private:
  struct Slot {
    uint32_t generation = 0;
    bool used = false;
    CallCallback done;
  };
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  size_t in_use_ = 0;
};

// One multiplexed connection. Callers touch the fields under `mu`; the loop
// owns the `loop_*` fields.
struct ChannelConnection {
  ChannelConnection(std::string h, int p, size_t max_frame_bytes, LinkDelay delay)
      : host(std::move(h)), port(p), loop_parser(max_frame_bytes) {
    if (!delay.zero()) loop_delayed = std::make_unique<DelayedFrames>(delay);
  }
  const std::string host;
  const int port;
  std::mutex mu;
  int fd = -1;                // open socket; the loop closes it (after setting -1 here)
  std::string out;            // encoded requests the loop has not taken yet
  bool flush_queued = false;  // on the loop's list of connections to service
  bool closed = false;        // the channel closed: no more calls
  PendingCalls pending;
  // Loop side only.
  int loop_fd = -1;  // the descriptor registered in the loop's poller
  std::string loop_sending;
  size_t loop_sent = 0;
  bool loop_want_write = false;
  bool loop_known = false;
  net::FrameParser loop_parser;
  std::unique_ptr<DelayedFrames> loop_delayed;  // the link-delay shim; null: zero delay
};

}  // namespace internal

// The event loop that owns every multiplexed client connection of a process
// (one thread). Started on construction, stopped by stop() or the destructor.
//
// Or, constructed with Driven, no thread at all: its sockets live in a host
// loop (a server's event loop) and are serviced on that loop's thread
// (net::LoopDriven). A call made on the host thread then costs no hand-off:
// its frame leaves in the host's service() at the end of the iteration, and
// its response is read and its callback run when the host sees the socket
// ready. Calls may then be made only on the host thread, and stop() only
// after the host loop has stopped.
class ChannelLoop final : public net::LoopDriven {
 public:
  struct Driven {};
  explicit ChannelLoop(size_t max_frame_bytes = kDefaultMaxFrameBytes);
  ChannelLoop(Driven, net::EventLoop& host, size_t max_frame_bytes = kDefaultMaxFrameBytes);
  ~ChannelLoop() override;
  ChannelLoop(const ChannelLoop&) = delete;
  ChannelLoop& operator=(const ChannelLoop&) = delete;
  // Joins the thread (if any) and closes every connection it owns; calls
  // still in flight are the channels' to fail (MultiplexedChannel::close).
  void stop();
  // Any thread (driven: the host's only): the loop services `c` (registers a
  // new socket, sends what was queued) in its next iteration.
  void queue(internal::ChannelConnection* c);
  // Driven only, on the host's thread (net::LoopDriven).
  void on_ready(const net::ReadyEvent& e) override;
  int64_t service() override;
  bool driven() const { return own_events_ == nullptr; }
  int64_t late_responses() const { return late_responses_.load(std::memory_order_relaxed); }
  int64_t iterations() const { return iterations_.load(std::memory_order_relaxed); }
  int64_t sends() const { return sends_.load(std::memory_order_relaxed); }
  // Request batches the link-delay shim held before sending.
  int64_t delayed_batches() const { return delayed_batches_.load(std::memory_order_relaxed); }
  size_t max_frame_bytes() const { return max_frame_bytes_; }

 private:
  void run();
  // Flushes every connection queued since the last call, then what the shim
  // holds that is due; returns the shim's next deadline (INT64_MAX: none), or
  // kStopped (nothing flushed) once stop() has begun.
  static constexpr int64_t kStopped = -1;
  int64_t flush_queued(std::vector<internal::ChannelConnection*>& batch);
  // Closes every connection it owns (the loop has stopped).
  void close_all();
  // Sends what the shim holds that is due; returns the next deadline (INT64_MAX: none).
  int64_t release_delayed();
  void read_ready(internal::ChannelConnection& c);
  void flush(internal::ChannelConnection& c);
  void send_some(internal::ChannelConnection& c);
  void fail(internal::ChannelConnection& c);

  size_t max_frame_bytes_;
  std::unique_ptr<net::EventLoop> own_events_;  // null when driven
  net::EventLoop* events_;                      // own_events_ or the host's
  std::mutex mu_;                               // guards queued_, sleeping_, stop_
  std::vector<internal::ChannelConnection*> queued_;
  bool sleeping_ = false;
  bool stop_ = false;
  std::vector<internal::ChannelConnection*> known_;         // loop thread only
  std::string read_buf_;                                    // loop thread only
  std::vector<internal::ChannelConnection*> driven_batch_;  // driven: service()'s, kept for its capacity
  bool stopped_ = false;                                    // close_all() ran
  // Loop thread only: (deadline, connection) for every batch the shim holds;
  // a min-heap, so the loop knows the earliest deadline. An entry of a
  // connection that failed meanwhile finds nothing due and is dropped.
  using Deadline = std::pair<int64_t, internal::ChannelConnection*>;
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<Deadline>> delayed_;
  std::atomic<int64_t> delayed_batches_{0};
  std::atomic<int64_t> late_responses_{0};
  std::atomic<int64_t> iterations_{0};
  std::atomic<int64_t> sends_{0};
  std::thread thread_;
};

class MultiplexedChannel {
 public:
  // Throws std::invalid_argument when host is not on the allow-list.
  MultiplexedChannel(const std::string& host, int port, size_t connections, TimerService& timers, ChannelLoop& loop,
                     LinkDelay delay = {});
  // 127.0.0.1:port, no delay.
  MultiplexedChannel(int port, size_t connections, TimerService& timers, ChannelLoop& loop)
      : MultiplexedChannel("127.0.0.1", port, connections, timers, loop) {}
  ~MultiplexedChannel();
  MultiplexedChannel(const MultiplexedChannel&) = delete;
  MultiplexedChannel& operator=(const MultiplexedChannel&) = delete;

  // Queues the request; `done` runs once, on the channel loop, the timer
  // thread, or (connection cannot be opened, frame too large) the calling thread.
  void call(std::string_view method, std::string_view payload, const TraceContext& trace, int64_t timeout_ns,
            CallCallback done);
  // Fails every call in flight with kUnavailable and refuses new ones.
  void close();

 private:
  std::string host_;
  int port_;
  TimerService& timers_;
  ChannelLoop& loop_;
  std::vector<std::unique_ptr<internal::ChannelConnection>> connections_;
  std::atomic<uint64_t> round_robin_{0};
};

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

  struct Idle {
    int fd;
    int64_t since_ns;  // when it was given back
  };

  std::string host_;
  int port_;
  size_t max_connections_;
  size_t max_frame_bytes_;
  LinkDelay delay_;
  int64_t idle_timeout_ns_;
  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  // Most recently given back at the back (reused first), so the front holds
  // the longest idle: a burst's extra connections sink to the front and
  // expire there, instead of the pool keeping its high-water mark for good.
  std::deque<Idle> idle_;
  size_t open_ = 0;
  bool closed_ = false;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace tailscope::svc
