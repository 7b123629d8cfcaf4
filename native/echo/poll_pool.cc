// Model `poll-pool`: the thesis's poll + custom thread pool. One thread
// poll()s the idle sockets; a ready socket leaves the poll set and goes to a
// fixed pool of --threads workers, which read, answer and hand it back
// through a queue plus an eventfd that wakes the poll thread. A socket is
// owned by exactly one thread at a time, so sessions need no locks.
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "echo/server.h"
#include "net/accept.h"
#include "net/event_loop.h"

namespace tailscope::echo {
namespace {

struct Connection {
  int fd;
  net::StreamSession session;
  uint32_t ready = 0;  // the readiness that sent it to the pool
};

// Workers hand connections back here and wake the poll thread's loop.
class HandBackQueue {
 public:
  explicit HandBackQueue(net::EventLoop& loop) : loop_(loop) {}
  void push(Connection* c) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(c);
    }
    loop_.wake();
  }
  std::vector<Connection*> drain() {
    std::lock_guard lock(mu_);
    std::vector<Connection*> out;
    out.swap(items_);
    return out;
  }

 private:
  net::EventLoop& loop_;
  std::mutex mu_;
  std::vector<Connection*> items_;
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

// Tokens: a Connection*, or one of these (pointers are never 0 or 1).
constexpr uint64_t kListenerToken = 0, kStopToken = 1;

}  // namespace

void run_poll_pool(ServerContext& ctx) {
  pin_worker(ctx.config, 0);
  net::Acceptor acceptor(ctx.listen_fds.at(0));
  net::EventLoop loop(net::PollMechanism::kPoll);
  loop.add(ctx.listen_fds[0], kListenerToken, net::kReadable);
  loop.add(ctx.stop.fd(), kStopToken, net::kReadable);
  HandBackQueue back(loop);
  WorkQueue work;
  std::vector<std::thread> workers;
  const int worker_count = std::max(1, ctx.config.threads);
  for (int w = 0; w < worker_count; ++w) {
    workers.emplace_back([&, w] {
      pin_worker(ctx.config, w + 1);
      StallSchedule stall(ctx.config);
      while (Connection* c = work.pop()) {
        stall.maybe_stall();
        if (net::on_ready(c->fd, c->ready, c->session) == net::IoVerdict::kClose) {
          ::close(c->fd);
          c->fd = -1;
        }
        back.push(c);  // the poll thread frees closed ones: one owner of the set
      }
    });
  }

  std::unordered_map<Connection*, std::unique_ptr<Connection>> all;  // owner of every live Connection
  auto park = [&](Connection* c) { loop.add(c->fd, reinterpret_cast<uint64_t>(c), net::interest_of(c->session)); };
  bool stopping = false;
  while (!stopping && !ctx.stop.requested()) {
    for (const net::ReadyEvent& e : loop.wait(-1)) {
      if (e.token == kStopToken) {
        stopping = true;
        break;
      }
      if (e.token == kListenerToken) {
        acceptor.accept_ready(/*nonblocking=*/true, [&](int fd) {
          auto c =
              std::make_unique<Connection>(Connection{fd, net::StreamSession(ctx.config.protocol, ctx.config.limits)});
          park(c.get());
          all.emplace(c.get(), std::move(c));
        });
        continue;
      }
      // A ready socket leaves the poll set while a worker owns it.
      auto* c = reinterpret_cast<Connection*>(e.token);
      loop.remove(c->fd);
      c->ready = e.ready;
      work.push(c);
    }
    for (Connection* c : back.drain()) {
      if (c->fd >= 0)
        park(c);
      else
        all.erase(c);
    }
  }
  work.close();
  for (std::thread& t : workers) t.join();
  for (auto& [ptr, c] : all)
    if (c->fd >= 0) ::close(c->fd);
}

}  // namespace tailscope::echo
