// Model `epoll`: one thread, non-blocking sockets, level-triggered epoll.
// Interest follows the session: EPOLLIN only while it takes input, EPOLLOUT
// only while output is pending, so a client that never reads costs one
// bounded buffer and no CPU.
#include <sys/epoll.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <unordered_map>

#include "echo/internal/epoll_loop.h"
#include "net/accept.h"

namespace tailscope::echo {
namespace internal {
namespace {

struct Connection {
  int fd;
  net::StreamSession session;
  uint32_t interest = 0;
};

// EPOLLRDHUP only while reading: it is level-triggered, so a half-closed
// peer whose output is still blocked would otherwise wake the loop forever.
uint32_t interest_of(const net::StreamSession& s) {
  return (s.wants_read() ? EPOLLIN | EPOLLRDHUP : 0u) | (s.wants_write() ? EPOLLOUT : 0u);
}

}  // namespace

void serve_with_epoll(ServerContext& ctx, int listen_fd, int worker_index) {
  pin_worker(ctx.config, worker_index);
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) throw std::runtime_error("epoll_create1 failed");
  // data.u64: 0 = listener, 1 = stop, else Connection* (pointers are never 0 or 1).
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev);
  ev.data.u64 = 1;
  epoll_ctl(ep, EPOLL_CTL_ADD, ctx.stop.fd(), &ev);
  net::Acceptor acceptor(listen_fd);
  StallSchedule stall(ctx.config);
  std::unordered_map<int, std::unique_ptr<Connection>> connections;

  auto close_connection = [&](Connection* c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
    ::close(c->fd);
    connections.erase(c->fd);
  };
  auto update_interest = [&](Connection* c) {
    uint32_t want = interest_of(c->session);
    if (want == c->interest) return;
    epoll_event e{};
    e.events = want;
    e.data.ptr = c;
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
    c->interest = want;
  };

  epoll_event events[256];
  while (!ctx.stop.requested()) {
    int n = ::epoll_wait(ep, events, 256, -1);
    if (n < 0) continue;  // EINTR
    stall.maybe_stall();
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == 1) break;
      if (events[i].data.u64 == 0) {
        for (int k = 0; k < 64; ++k) {  // bounded burst, then serve the others
          net::Acceptor::Result r = acceptor.accept_one(/*nonblocking=*/true);
          if (r.outcome == net::Acceptor::Outcome::kAccepted) {
            auto c = std::make_unique<Connection>(Connection{r.fd, net::StreamSession(ctx.config.protocol, ctx.config.limits)});
            c->interest = interest_of(c->session);
            epoll_event e{};
            e.events = c->interest;
            e.data.ptr = c.get();
            epoll_ctl(ep, EPOLL_CTL_ADD, r.fd, &e);
            connections[r.fd] = std::move(c);
          } else if (r.outcome != net::Acceptor::Outcome::kShed) {
            break;
          }
        }
        continue;
      }
      auto* c = static_cast<Connection*>(events[i].data.ptr);
      net::IoVerdict v = net::IoVerdict::kOpen;
      if (events[i].events & (EPOLLERR | EPOLLHUP)) v = net::IoVerdict::kClose;
      else if (events[i].events & (EPOLLIN | EPOLLRDHUP)) v = net::read_ready(c->fd, c->session);
      else if (events[i].events & EPOLLOUT) v = net::write_ready(c->fd, c->session);
      if (v == net::IoVerdict::kClose) close_connection(c);
      else update_interest(c);
    }
  }
  for (auto& [fd, c] : connections) ::close(fd);
  ::close(ep);
}

}  // namespace internal

void run_epoll(ServerContext& ctx) { internal::serve_with_epoll(ctx, ctx.listen_fds.at(0), 0); }

}  // namespace tailscope::echo
