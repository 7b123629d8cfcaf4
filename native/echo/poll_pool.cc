// Model `poll-pool`: the thesis's poll + custom thread pool. One thread
// poll()s the idle sockets; a ready socket leaves the poll set and goes to a
// fixed pool of --threads workers, which read, answer and hand it back
// through a queue plus an eventfd that wakes the poll thread. A socket is
// owned by exactly one thread at a time, so sessions need no locks.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "echo/server.h"
#include "net/accept.h"

namespace tailscope::echo {
namespace {

struct Connection {
  int fd;
  net::StreamSession session;
  short revents = 0;
};

class HandBackQueue {
 public:
  HandBackQueue() : wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~HandBackQueue() { ::close(wake_fd_); }
  void push(Connection* c) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(c);
    }
    uint64_t one = 1;
    ssize_t r = ::write(wake_fd_, &one, sizeof one);
    (void)r;
  }
  std::vector<Connection*> drain() {
    uint64_t n;
    ssize_t r = ::read(wake_fd_, &n, sizeof n);
    (void)r;
    std::lock_guard lock(mu_);
    std::vector<Connection*> out(items_.begin(), items_.end());
    items_.clear();
    return out;
  }
  int fd() const { return wake_fd_; }

 private:
  int wake_fd_;
  std::mutex mu_;
  std::deque<Connection*> items_;
};

class WorkQueue {
 public:
  void push(Connection* c) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(c);
    }
    cv_.notify_one();
  }
  // nullptr once closed and empty.
  Connection* pop() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return nullptr;
    Connection* c = items_.front();
    items_.pop_front();
    return c;
  }
  void close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Connection*> items_;
  bool closed_ = false;
};

short events_of(const net::StreamSession& s) {
  return static_cast<short>((s.wants_read() ? POLLIN : 0) | (s.wants_write() ? POLLOUT : 0));
}

}  // namespace

void run_poll_pool(ServerContext& ctx) {
  pin_worker(ctx.config, 0);
  net::Acceptor acceptor(ctx.listen_fds.at(0));
  HandBackQueue back;
  WorkQueue work;
  std::vector<std::thread> workers;
  const int worker_count = std::max(1, ctx.config.threads);
  for (int w = 0; w < worker_count; ++w) {
    workers.emplace_back([&, w] {
      pin_worker(ctx.config, w + 1);
      StallSchedule stall(ctx.config);
      while (Connection* c = work.pop()) {
        stall.maybe_stall();
        net::IoVerdict v = net::IoVerdict::kOpen;
        if (c->revents & (POLLERR | POLLNVAL)) v = net::IoVerdict::kClose;
        else if (c->revents & (POLLIN | POLLHUP)) v = net::read_ready(c->fd, c->session);
        else if (c->revents & POLLOUT) v = net::write_ready(c->fd, c->session);
        if (v == net::IoVerdict::kClose) {
          ::close(c->fd);
          c->fd = -1;
        }
        back.push(c);  // the poll thread frees closed ones: one owner of the set
      }
    });
  }

  std::unordered_map<Connection*, std::unique_ptr<Connection>> all;  // owner of every live Connection
  std::vector<Connection*> parked;               // idle, in the poll set
  std::vector<pollfd> pollfds;
  while (!ctx.stop.requested()) {
    pollfds.assign({{ctx.listen_fds[0], POLLIN, 0}, {ctx.stop.fd(), POLLIN, 0}, {back.fd(), POLLIN, 0}});
    for (Connection* c : parked) pollfds.push_back({c->fd, events_of(c->session), 0});
    if (::poll(pollfds.data(), pollfds.size(), -1) <= 0) continue;
    if (pollfds[1].revents) break;
    std::vector<Connection*> still_parked;
    for (size_t i = 0; i < parked.size(); ++i) {
      if (pollfds[3 + i].revents) {
        parked[i]->revents = pollfds[3 + i].revents;
        work.push(parked[i]);
      } else {
        still_parked.push_back(parked[i]);
      }
    }
    parked.swap(still_parked);
    if (pollfds[2].revents & POLLIN) {
      for (Connection* c : back.drain()) {
        if (c->fd >= 0) {
          parked.push_back(c);
          continue;
        }
        all.erase(c);
      }
    }
    if (pollfds[0].revents & POLLIN) {
      for (int k = 0; k < 64; ++k) {
        net::Acceptor::Result r = acceptor.accept_one(/*nonblocking=*/true);
        if (r.outcome == net::Acceptor::Outcome::kAccepted) {
          auto c = std::make_unique<Connection>(Connection{r.fd, net::StreamSession(ctx.config.protocol, ctx.config.limits)});
          parked.push_back(c.get());
          all.emplace(c.get(), std::move(c));
        } else if (r.outcome != net::Acceptor::Outcome::kShed) {
          break;
        }
      }
    }
  }
  work.close();
  for (std::thread& t : workers) t.join();
  for (auto& [ptr, c] : all)
    if (c->fd >= 0) ::close(c->fd);
}

}  // namespace tailscope::echo
