// The two ways a model can own connections, written once:
//
//  * ThreadPerConnectionServer — an accept thread and one thread per
//    connection that reads a request and runs its handler to completion
//    before reading the next (Thrift's TThreadedServer, what DeathStarBench
//    services use). std-async and std-thread.
//  * EventLoopServer — N event loops (net/event_loop.h, epoll) sharing the
//    listener (exclusive wake-ups); each reads its connections and hands every
//    request to the model's dispatch function; each also runs closures posted
//    to it (the loop's eventfd wake), which is how the coroutine model resumes
//    handlers on their own loop.
//
// Both accept through net::Acceptor (its back-off, once) and, at the HTTP
// front, answer a request still incomplete after http_request_timeout_ns with
// 408 and close (a slowloris client cannot hold a connection forever).
//
// BoundedPool is the processing pool of pool-blocking and pool-callback: a
// fixed number of workers behind a queue with a capacity; a full queue
// rejects (overload is an answer, not unbounded memory).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/event_loop.h"
#include "svc/transport.h"

namespace tailscope::svc {

using RequestSink = std::function<void(InboundRequest&&)>;

struct ListenSpec {
  int fd = -1;  // a listening socket (the server does not close it)
  WireKind kind = WireKind::kRpc;
  const HttpRoute* route = nullptr;                                // HTTP only
  int64_t http_request_timeout_ns = kDefaultHttpRequestTimeoutNs;  // HTTP only
  // The link-delay shim for answers (RPC only): matched by each connection's
  // peer address when it is accepted; null or no match: no delay.
  const LinkDelayTable* link_delays = nullptr;
  TimerService* timers = nullptr;  // fires the held answers; required with link_delays
};

// The connection object for an accepted fd, with the shim applied when its peer has a link delay.
std::shared_ptr<ServerConnection> make_server_connection(int fd, const ListenSpec& listen, ServiceCounters& counters);

class ThreadPerConnectionServer {
 public:
  ThreadPerConnectionServer(ListenSpec listen, ServiceCounters& counters, RequestSink handle);
  ~ThreadPerConnectionServer();
  void start();
  void stop();  // closes every connection and joins every thread
  int64_t threads_started() const { return threads_started_.load(); }
  int64_t threads_failed() const { return threads_failed_.load(); }  // connections refused for want of a thread

 private:
  void accept_loop();
  void serve(const std::shared_ptr<ServerConnection>& conn);
  void reap_finished();

  ListenSpec listen_;
  ServiceCounters& counters_;
  RequestSink handle_;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  struct Worker {
    std::thread thread;
    std::shared_ptr<ServerConnection> conn;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Worker> workers_;
  std::atomic<int64_t> threads_started_{0};
  std::atomic<int64_t> threads_failed_{0};
};

class EventLoopServer {
 public:
  // dispatch(loop_index, request) runs on the loop's thread.
  using Dispatch = std::function<void(size_t, InboundRequest&&)>;
  EventLoopServer(ListenSpec listen, size_t loops, ServiceCounters& counters, Dispatch dispatch);
  ~EventLoopServer();
  void start();
  void stop();
  // Runs fn on loop `index`'s thread, soon. Safe from any thread; dropped after stop().
  // From the loop's own thread it costs no wake-up: fn runs before the loop waits again.
  void post(size_t index, std::function<void()> fn);
  // Runs fn on loop `index`'s thread at deadline_ns (monotonic) or as soon
  // after as the loop is free. Only from that loop's own thread (a handler
  // running on it): the loop keeps its timers without a lock and sleeps in its
  // readiness wait until the earliest one, so a timer costs no other thread's
  // wake-up and no cross-thread post. Dropped after stop().
  void schedule_on_loop(size_t index, int64_t deadline_ns, std::function<void()> fn);
  size_t loops() const { return loops_.size(); }
  // Before start(): loop `index` also drives `d` on its thread (net::LoopDriven):
  // it hands `d` the ready events whose token has kTokenTag set and calls
  // d->service() once per iteration before it waits. `d` registers its
  // descriptors in events(index) and must outlive the loop's thread.
  void drive(size_t index, net::LoopDriven* d) { loops_[index % loops_.size()]->driven = d; }
  net::EventLoop& events(size_t index) { return loops_[index % loops_.size()]->events; }
  // Called on each loop thread when it starts (the coroutine model records
  // which loop a thread is).
  std::function<void(size_t)> on_loop_start;

 private:
  struct LoopTimer {
    int64_t deadline_ns;
    uint64_t seq;  // equal deadlines fire in the order they were set
    std::function<void()> fn;
    bool operator>(const LoopTimer& o) const {
      return deadline_ns != o.deadline_ns ? deadline_ns > o.deadline_ns : seq > o.seq;
    }
  };
  struct Loop {
    net::EventLoop events;
    std::thread thread;
    std::mutex mu;
    std::vector<std::function<void()>> posted;
    std::unordered_map<int, std::shared_ptr<ServerConnection>> conns;
    // The loop thread's own: no lock.
    std::priority_queue<LoopTimer, std::vector<LoopTimer>, std::greater<LoopTimer>> timers;
    uint64_t timer_seq = 0;
    net::LoopDriven* driven = nullptr;  // set before start()
    bool posted_by_self = false;        // the loop thread's own: it posted to itself (no eventfd)
  };
  // Fires the loop's due timers; returns how long the loop may wait for
  // events before the next one is due (at most kIdleWaitNs).
  int64_t fire_due_timers(Loop& loop, int64_t idle_wait_ns);
  void run(size_t index);
  void read_conn(Loop& loop, size_t index, int fd);
  // Stops reading fd; close_now also ends the connection (EOF, reset),
  // otherwise it ends itself once its last answer is sent.
  void drop_conn(Loop& loop, int fd, bool close_now);
  void expire_requests(Loop& loop);

  ListenSpec listen_;
  ServiceCounters& counters_;
  Dispatch dispatch_;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::atomic<bool> stop_{false};
};

class BoundedPool {
 public:
  BoundedPool(size_t workers, size_t queue_capacity);
  ~BoundedPool();
  // False when the queue is full or the pool stopped: the caller rejects the request.
  bool try_submit(std::function<void()> fn);
  // Continuations of admitted requests are never refused (their number is
  // bounded by the admitted requests); dropped only after stop().
  void submit_continuation(std::function<void()> fn);
  void stop();                                                       // runs what is queued, then joins
  size_t workers() const { return started_; }                        // threads created (still reported after stop())
  int64_t threads_failed() const { return threads_failed_.load(); }  // workers the system refused to create
  size_t queue_capacity() const { return capacity_; }
  int64_t max_queue_depth() const { return max_depth_.load(); }

 private:
  void work();
  size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::atomic<int64_t> max_depth_{0};
  std::atomic<int64_t> threads_failed_{0};
  size_t started_ = 0;
};

}  // namespace tailscope::svc
