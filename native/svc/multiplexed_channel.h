// The multiplexed RPC client: a few long-lived connections to one service,
// many calls in flight on each, responses matched by request id. The sockets
// belong to one ChannelLoop per service process (net/event_loop.h), not to a
// thread per connection: a call encodes its frame into its connection's
// output buffer and, if the loop has nothing queued for that connection yet,
// queues it (waking the loop only when it sleeps); the loop sends what a
// connection gathered in one send() per iteration, reads responses, decodes
// them in place and runs each call's callback on the loop thread, so a
// completion reaches the model's executor with one wake-up (the model's
// post). Request ids index a slot table (internal/pending_calls.h), so
// nothing on the hot path allocates once buffers have grown. Per-call
// timeouts through the TimerService. Used by pool-blocking (which then
// blocks on a future), pool-callback and coroutine; the other client model
// is svc/blocking_client_pool.h. How a call ends: svc/rpc_call.h.
//
// A nonzero LinkDelay (svc/link_delay.h) holds each request frame until its
// deadline: the channel loop keeps the held frames per connection and wakes
// at the earliest deadline (its wait timeout, nanoseconds: epoll_pwait2).
// Zero delay takes the paths above unchanged.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "net/event_loop.h"
#include "svc/internal/pending_calls.h"
#include "svc/link_delay.h"
#include "svc/rpc_call.h"
#include "svc/timer_service.h"
#include "svc/transport.h"

namespace tailscope::svc {

// A call's timeout deadline, rounded up to a grid of 1 % of the timeout (1 µs
// … 10 ms). Calls due in one grid step share a deadline, so the timer thread
// wakes once per step for all of them instead of once per call — with 1 s
// timeouts and thousands of calls a second that was most of its CPU, and
// nearly every one of those timers finds its call long answered. A call
// times out at most 1 % (10 ms) later than asked.
int64_t coarse_deadline_ns(int64_t now_ns, int64_t timeout_ns);

namespace internal {

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

}  // namespace tailscope::svc
