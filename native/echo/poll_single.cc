// Model `poll`: the thesis's single-thread hybrid. One thread calls poll()
// over every socket and reads/writes right after readiness. Unlike the
// thesis (blocking read/write after poll) sockets are non-blocking: a blocking
// write to a client that never reads would stall every other connection.
#include <poll.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "echo/server.h"
#include "net/accept.h"

namespace tailscope::echo {
namespace {

short events_of(const net::StreamSession& s) {
  return static_cast<short>((s.wants_read() ? POLLIN : 0) | (s.wants_write() ? POLLOUT : 0));
}

}  // namespace

void run_poll(ServerContext& ctx) {
  pin_worker(ctx.config, 0);
  net::Acceptor acceptor(ctx.listen_fds.at(0));
  StallSchedule stall(ctx.config);
  // pollfds[0] = listener, [1] = stop, [2 + i] = sessions[i]; rebuilt lazily.
  std::vector<pollfd> pollfds = {{ctx.listen_fds[0], POLLIN, 0}, {ctx.stop.fd(), POLLIN, 0}};
  std::vector<std::unique_ptr<net::StreamSession>> sessions;
  while (!ctx.stop.requested()) {
    for (size_t i = 0; i < sessions.size(); ++i) pollfds[2 + i].events = events_of(*sessions[i]);
    if (::poll(pollfds.data(), pollfds.size(), -1) <= 0) continue;
    stall.maybe_stall();
    if (pollfds[1].revents) break;
    // Sessions first (swap-remove closed ones), then new connections.
    for (size_t i = 0; i < sessions.size();) {
      pollfd& p = pollfds[2 + i];
      net::IoVerdict v = net::IoVerdict::kOpen;
      if (p.revents & (POLLERR | POLLNVAL)) v = net::IoVerdict::kClose;
      else if (p.revents & (POLLIN | POLLHUP)) v = net::read_ready(p.fd, *sessions[i]);
      else if (p.revents & POLLOUT) v = net::write_ready(p.fd, *sessions[i]);
      if (v == net::IoVerdict::kClose) {
        ::close(p.fd);
        p = pollfds.back();
        pollfds.pop_back();
        sessions[i] = std::move(sessions.back());
        sessions.pop_back();
        continue;  // re-examine the moved entry (its revents came along)
      }
      ++i;
    }
    if (pollfds[0].revents & POLLIN) {
      for (int k = 0; k < 64; ++k) {
        net::Acceptor::Result r = acceptor.accept_one(/*nonblocking=*/true);
        if (r.outcome == net::Acceptor::Outcome::kAccepted) {
          pollfds.push_back({r.fd, POLLIN, 0});
          sessions.push_back(std::make_unique<net::StreamSession>(ctx.config.protocol, ctx.config.limits));
        } else if (r.outcome != net::Acceptor::Outcome::kShed) {
          break;
        }
      }
    }
  }
  for (size_t i = 2; i < pollfds.size(); ++i) ::close(pollfds[i].fd);
}

}  // namespace tailscope::echo
