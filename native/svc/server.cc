#include "svc/server.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "net/accept.h"
#include "net/socket.h"

namespace tailscope::svc {

// ---------------------------------------------------------------- thread per connection

ThreadPerConnectionServer::ThreadPerConnectionServer(ListenSpec listen, ServiceCounters& counters, RequestSink handle)
    : listen_(listen), counters_(counters), handle_(std::move(handle)) {}

ThreadPerConnectionServer::~ThreadPerConnectionServer() { stop(); }

void ThreadPerConnectionServer::start() { acceptor_ = std::thread([this] { accept_loop(); }); }

void ThreadPerConnectionServer::accept_loop() {
  net::Acceptor acceptor(listen_.fd);
  while (!stop_.load(std::memory_order_acquire)) {
    pollfd p{listen_.fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) {
      reap_finished();
      continue;
    }
    const auto r = acceptor.accept_one(false);
    if (r.outcome == net::Acceptor::Outcome::kBackedOff) ::usleep(net::kAcceptBackoffMs * 1000);
    if (r.outcome != net::Acceptor::Outcome::kAccepted) continue;
    counters_.connections_accepted.fetch_add(1, std::memory_order_relaxed);
    auto conn = std::make_shared<ServerConnection>(r.fd, listen_.kind, listen_.route, counters_);
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard lock(mu_);
    if (stop_) {
      conn->close();
      break;
    }
    std::thread thread;
    try {
      thread = std::thread([this, conn, done] {
        serve(conn);
        done->store(true, std::memory_order_release);
      });
    } catch (const std::system_error&) {
      // No thread for this connection (a task limit at run time): the
      // connection is refused and counted as a rejection; serving goes on.
      counters_.rejections.fetch_add(1, std::memory_order_relaxed);
      threads_failed_.fetch_add(1, std::memory_order_relaxed);
      conn->close();
      continue;
    }
    threads_started_.fetch_add(1, std::memory_order_relaxed);
    workers_.push_back(Worker{std::move(thread), conn, done});
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

void ThreadPerConnectionServer::serve(std::shared_ptr<ServerConnection> conn) {
  char buf[16 * 1024];
  for (;;) {
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

EventLoopServer::EventLoopServer(ListenSpec listen, size_t loops, ServiceCounters& counters, Dispatch dispatch)
    : listen_(listen), counters_(counters), dispatch_(std::move(dispatch)) {
  for (size_t i = 0; i < std::max<size_t>(1, loops); ++i) {
    auto l = std::make_unique<Loop>();
    l->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    l->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->epoll_fd < 0 || l->wake_fd < 0) throw std::runtime_error("event loop: epoll/eventfd failed");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = l->wake_fd;
    ::epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, l->wake_fd, &ev);
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;
    ev.data.fd = listen_.fd;
    ::epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, listen_.fd, &ev);
    loops_.push_back(std::move(l));
  }
}

EventLoopServer::~EventLoopServer() {
  stop();
  for (auto& l : loops_) {
    ::close(l->epoll_fd);
    ::close(l->wake_fd);
  }
}

void EventLoopServer::start() {
  for (size_t i = 0; i < loops_.size(); ++i) loops_[i]->thread = std::thread([this, i] { run(i); });
}

void EventLoopServer::post(size_t index, std::function<void()> fn) {
  Loop& l = *loops_[index % loops_.size()];
  {
    std::lock_guard lock(l.mu);
    l.posted.push_back(std::move(fn));
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t w = ::write(l.wake_fd, &one, sizeof one);
}

void EventLoopServer::close_conn(Loop& loop, int fd) {
  auto it = loop.conns.find(fd);
  if (it == loop.conns.end()) return;
  ::epoll_ctl(loop.epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
  it->second->close();
  loop.conns.erase(it);  // the fd closes once no in-flight request holds the connection
}

void EventLoopServer::run(size_t index) {
  Loop& loop = *loops_[index];
  if (on_loop_start) on_loop_start(index);
  net::set_nonblocking(listen_.fd);
  net::Acceptor acceptor(listen_.fd);
  epoll_event events[128];
  char buf[64 * 1024];
  std::vector<std::function<void()>> posted;
  while (!stop_.load(std::memory_order_acquire)) {
    const int n = ::epoll_wait(loop.epoll_fd, events, 128, 100);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == loop.wake_fd) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = ::read(loop.wake_fd, &v, sizeof v);
        continue;
      }
      if (fd == listen_.fd) {
        for (int k = 0; k < 64; ++k) {
          const auto r = acceptor.accept_one(true);
          if (r.outcome != net::Acceptor::Outcome::kAccepted) break;
          counters_.connections_accepted.fetch_add(1, std::memory_order_relaxed);
          auto conn = std::make_shared<ServerConnection>(r.fd, listen_.kind, listen_.route, counters_);
          epoll_event ev{};
          ev.events = EPOLLIN | EPOLLRDHUP;
          ev.data.fd = r.fd;
          ::epoll_ctl(loop.epoll_fd, EPOLL_CTL_ADD, r.fd, &ev);
          loop.conns.emplace(r.fd, std::move(conn));
        }
        continue;
      }
      auto it = loop.conns.find(fd);
      if (it == loop.conns.end()) continue;
      std::shared_ptr<ServerConnection> conn = it->second;
      bool open = true;
      for (int reads = 0; reads < 16; ++reads) {  // fairness: at most 16 reads per wake-up
        const ssize_t got = ::recv(fd, buf, sizeof buf, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (got <= 0) {
          open = false;
          break;
        }
        if (!conn->on_bytes(buf, static_cast<size_t>(got),
                            [this, index](InboundRequest&& r) { dispatch_(index, std::move(r)); })) {
          open = false;
          break;
        }
        if (static_cast<size_t>(got) < sizeof buf) break;
      }
      if (!open || conn->closed()) close_conn(loop, fd);
    }
    {
      std::lock_guard lock(loop.mu);
      posted.swap(loop.posted);
    }
    for (auto& fn : posted) fn();
    posted.clear();
  }
  for (auto& [fd, conn] : loop.conns) conn->close();
  loop.conns.clear();
}

void EventLoopServer::stop() {
  if (stop_.exchange(true)) return;
  for (auto& l : loops_) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(l->wake_fd, &one, sizeof one);
  }
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
      threads_.emplace_back([this] { work(); });
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
