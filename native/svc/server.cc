#include "svc/server.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <stdexcept>
#include <system_error>

#include "core/clock.h"
#include "core/thread_name.h"
#include "net/accept.h"
#include "net/socket.h"

namespace tailscope::svc {

std::shared_ptr<ServerConnection> make_server_connection(int fd, const ListenSpec& listen, ServiceCounters& counters) {
  auto conn = std::make_shared<ServerConnection>(fd, listen.kind, listen.route, counters);
  if (listen.link_delays && listen.timers && listen.kind == WireKind::kRpc && !listen.link_delays->empty())
    conn->set_link_delay(listen.link_delays->for_address(peer_address(fd)), *listen.timers);
  return conn;
}

// ---------------------------------------------------------------- thread per connection

ThreadPerConnectionServer::ThreadPerConnectionServer(ListenSpec listen, ServiceCounters& counters, RequestSink handle)
    : listen_(listen), counters_(counters), handle_(std::move(handle)) {}

ThreadPerConnectionServer::~ThreadPerConnectionServer() { stop(); }

void ThreadPerConnectionServer::start() {
  acceptor_ = std::thread([this] {
    name_this_thread("svc-accept");
    accept_loop();
  });
}

void ThreadPerConnectionServer::accept_loop() {
  // Non-blocking listener so one wake-up takes every waiting connection
  // (accept_ready stops at EAGAIN); the accepted sockets are blocking.
  net::set_nonblocking(listen_.fd);
  net::Acceptor acceptor(listen_.fd);
  while (!stop_.load(std::memory_order_acquire)) {
    pollfd p{listen_.fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) {
      reap_finished();
      continue;
    }
    acceptor.accept_ready(/*nonblocking=*/false, [this](int fd) {
      counters_.connections_accepted.fetch_add(1, std::memory_order_relaxed);
      auto conn = make_server_connection(fd, listen_, counters_);
      auto done = std::make_shared<std::atomic<bool>>(false);
      std::lock_guard lock(mu_);
      if (stop_) {
        conn->close();
        return;
      }
      std::thread thread;
      try {
        thread = std::thread([this, conn, done] {
          name_this_thread("svc-conn");  // once per connection, not per request
          serve(conn);
          done->store(true, std::memory_order_release);
        });
      } catch (const std::system_error&) {
        // No thread for this connection (a task limit at run time): the
        // connection is refused and counted as a rejection; serving goes on.
        counters_.rejections.fetch_add(1, std::memory_order_relaxed);
        threads_failed_.fetch_add(1, std::memory_order_relaxed);
        conn->close();
        return;
      }
      threads_started_.fetch_add(1, std::memory_order_relaxed);
      workers_.push_back(Worker{std::move(thread), conn, done});
    });
  }
}

void ThreadPerConnectionServer::reap_finished() {
  std::lock_guard lock(mu_);
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done->load(std::memory_order_acquire)) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

void ThreadPerConnectionServer::serve(const std::shared_ptr<ServerConnection>& conn) {
  char buf[16 * 1024];
  const int64_t timeout_ns = listen_.http_request_timeout_ns;
  for (;;) {
    if (const int64_t since = conn->partial_request_since_ns(); since != 0) {
      // Part of a request is here: wait for the rest at most until its timeout.
      const int64_t left_ns = since + timeout_ns - monotonic_ns();
      if (left_ns <= 0) {
        if (conn->expire_request(monotonic_ns(), timeout_ns)) break;
      } else {
        pollfd p{conn->fd(), POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>((left_ns + 999'999) / 1'000'000)) <= 0) continue;  // timeout, EINTR
      }
    }
    const ssize_t n = ::recv(conn->fd(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || stop_.load(std::memory_order_acquire)) break;
    // The handler runs here, on the connection's thread: one request at a time per connection.
    if (!conn->on_bytes(buf, static_cast<size_t>(n), [this](InboundRequest&& r) { handle_(std::move(r)); })) break;
    if (conn->closed()) break;
  }
  conn->close();
}

void ThreadPerConnectionServer::stop() {
  if (stop_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  std::list<Worker> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (auto& w : workers) w.conn->close();
  for (auto& w : workers) w.thread.join();
}

// ---------------------------------------------------------------- event loops

namespace {
// The longest a loop waits without an event: the cadence of its
// request-timeout checks (stop and posted closures wake it at once).
constexpr int64_t kIdleWaitNs = 100'000'000;
// The loop whose thread this is (null on any other thread): a post from a
// loop to itself needs no eventfd write.
thread_local const void* tl_this_loop = nullptr;
}  // namespace

EventLoopServer::EventLoopServer(ListenSpec listen, size_t loops, ServiceCounters& counters, Dispatch dispatch)
    : listen_(listen), counters_(counters), dispatch_(std::move(dispatch)) {
  net::set_nonblocking(listen_.fd);
  for (size_t i = 0; i < std::max<size_t>(1, loops); ++i) {
    auto l = std::make_unique<Loop>();
    // Exclusive: a new connection wakes one loop, not all of them.
    l->events.add(listen_.fd, static_cast<uint64_t>(listen_.fd), net::kReadable | net::kExclusive);
    loops_.push_back(std::move(l));
  }
}

EventLoopServer::~EventLoopServer() { stop(); }

void EventLoopServer::start() {
  for (size_t i = 0; i < loops_.size(); ++i)
    loops_[i]->thread = std::thread([this, i] {
      name_this_thread("svc-loop-" + std::to_string(i));
      run(i);
    });
}

void EventLoopServer::post(size_t index, std::function<void()> fn) {
  Loop& l = *loops_[index % loops_.size()];
  bool wake;
  {
    std::lock_guard lock(l.mu);
    // A non-empty list has been (or is being) announced by the post that
    // filled it first, and the loop takes the whole list at once: one
    // eventfd write per batch of completions, not per completion.
    l.posted.push_back(std::move(fn));
    if (tl_this_loop == &l) {
      l.posted_by_self = true;  // the loop checks it before it waits: no eventfd
      wake = false;
    } else {
      wake = l.posted.size() == 1;
    }
  }
  if (wake) l.events.wake();
}

void EventLoopServer::schedule_on_loop(size_t index, int64_t deadline_ns, std::function<void()> fn) {
  Loop& l = *loops_[index % loops_.size()];
  l.timers.push(LoopTimer{deadline_ns, l.timer_seq++, std::move(fn)});
}

int64_t EventLoopServer::fire_due_timers(Loop& loop, int64_t idle_wait_ns) {
  while (!loop.timers.empty()) {
    const int64_t now = monotonic_ns();
    const int64_t due = loop.timers.top().deadline_ns;
    if (due > now) return std::min(idle_wait_ns, due - now);
    auto fn = std::move(const_cast<LoopTimer&>(loop.timers.top()).fn);
    loop.timers.pop();
    fn();  // may set more timers on this loop
  }
  return idle_wait_ns;
}

void EventLoopServer::drop_conn(Loop& loop, int fd, bool close_now) {
  auto it = loop.conns.find(fd);
  if (it == loop.conns.end()) return;
  loop.events.remove(fd);
  if (close_now) it->second->close();
  loop.conns.erase(it);  // the fd closes once no in-flight request holds the connection
}

void EventLoopServer::read_conn(Loop& loop, size_t index, int fd) {
  auto it = loop.conns.find(fd);
  if (it == loop.conns.end()) return;
  std::shared_ptr<ServerConnection> conn = it->second;
  char buf[64 * 1024];
  for (int reads = 0; reads < 16; ++reads) {  // fairness: at most 16 reads per wake-up
    const ssize_t got = ::recv(fd, buf, sizeof buf, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (got <= 0) return drop_conn(loop, fd, /*close_now=*/true);  // EOF or reset
    if (!conn->on_bytes(buf, static_cast<size_t>(got),
                        [this, index](InboundRequest&& r) { dispatch_(index, std::move(r)); }))
      return drop_conn(loop, fd, /*close_now=*/false);  // malformed: it ends itself after its answer
    if (static_cast<size_t>(got) < sizeof buf) break;
  }
  if (conn->closed()) drop_conn(loop, fd, /*close_now=*/true);
}

void EventLoopServer::expire_requests(Loop& loop) {
  const int64_t now = monotonic_ns();
  std::vector<int> expired;
  for (auto& [fd, conn] : loop.conns)
    if (conn->expire_request(now, listen_.http_request_timeout_ns)) expired.push_back(fd);
  for (int fd : expired) drop_conn(loop, fd, /*close_now=*/false);
}

void EventLoopServer::run(size_t index) {
  Loop& loop = *loops_[index];
  // Loop timers (simulated store latencies) are ~100 µs: the default 50 µs
  // timer slack of the readiness wait would be half of one.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  if (on_loop_start) on_loop_start(index);
  tl_this_loop = &loop;
  net::Acceptor acceptor(listen_.fd);
  std::vector<std::function<void()>> posted;
  int64_t next_expiry_check_ns = 0;
  int64_t wait_ns = kIdleWaitNs;
  while (!stop_.load(std::memory_order_acquire)) {
    for (const net::ReadyEvent& e : loop.events.wait(wait_ns)) {
      if (e.token & net::LoopDriven::kTokenTag) {
        if (loop.driven) loop.driven->on_ready(e);  // e.g. a response: its callback posts to this loop
        continue;
      }
      const int fd = static_cast<int>(e.token);
      if (fd != listen_.fd) {
        read_conn(loop, index, fd);
        continue;
      }
      acceptor.accept_ready(/*nonblocking=*/true, [&](int conn_fd) {
        counters_.connections_accepted.fetch_add(1, std::memory_order_relaxed);
        loop.events.add(conn_fd, static_cast<uint64_t>(conn_fd), net::kReadable);
        loop.conns.emplace(conn_fd, make_server_connection(conn_fd, listen_, counters_));
      });
    }
    if (listen_.kind == WireKind::kHttp && monotonic_ns() >= next_expiry_check_ns) {
      expire_requests(loop);
      next_expiry_check_ns = monotonic_ns() + kIdleWaitNs;
    }
    {
      std::lock_guard lock(loop.mu);
      posted.swap(loop.posted);
      loop.posted_by_self = false;  // what it announced is in this batch
    }
    for (auto& fn : posted) fn();
    posted.clear();
    // A post from another thread that came after the swap above has written
    // the eventfd, so the wait returns at once for it; timers bound the wait from above.
    wait_ns = fire_due_timers(loop, kIdleWaitNs);
    if (loop.driven) {
      // Last, so what every handler above queued leaves before the loop waits.
      const int64_t due_ns = loop.driven->service();
      if (due_ns != std::numeric_limits<int64_t>::max())
        wait_ns = std::min(wait_ns, std::max<int64_t>(0, due_ns - monotonic_ns()));
    }
    // Posts from this thread wrote no eventfd: run them before sleeping (the flag is this thread's own).
    if (loop.posted_by_self) {
      loop.posted_by_self = false;
      wait_ns = 0;
    }
  }
  tl_this_loop = nullptr;
  for (auto& [fd, conn] : loop.conns) conn->close();
  loop.conns.clear();
}

void EventLoopServer::stop() {
  if (stop_.exchange(true)) return;
  for (auto& l : loops_) l->events.wake();
  for (auto& l : loops_)
    if (l->thread.joinable()) l->thread.join();
  // Closures posted after the loops ended are dropped with the loops.
  for (auto& l : loops_) {
    std::lock_guard lock(l->mu);
    l->posted.clear();
  }
}

// ---------------------------------------------------------------- bounded pool

BoundedPool::BoundedPool(size_t workers, size_t queue_capacity) : capacity_(std::max<size_t>(1, queue_capacity)) {
  // A thread the system refuses (EAGAIN: a task or memory limit reached at
  // run time) is counted, not fatal: the pool runs with the threads it got,
  // and with none it rejects every request (try_submit) instead of hanging.
  for (size_t i = 0; i < std::max<size_t>(1, workers); ++i) {
    try {
      threads_.emplace_back([this] {
        name_this_thread("svc-worker");
        work();
      });
    } catch (const std::system_error&) {
      threads_failed_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  started_ = threads_.size();
}

BoundedPool::~BoundedPool() { stop(); }

bool BoundedPool::try_submit(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || threads_.empty() || queue_.size() >= capacity_) return false;
    queue_.push_back(std::move(fn));
    const auto depth = static_cast<int64_t>(queue_.size());
    if (depth > max_depth_.load(std::memory_order_relaxed)) max_depth_.store(depth, std::memory_order_relaxed);
  }
  cv_.notify_one();
  return true;
}

void BoundedPool::submit_continuation(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    queue_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void BoundedPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;
    auto fn = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    fn();
    lock.lock();
  }
}

void BoundedPool::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

}  // namespace tailscope::svc
