#include "echo/internal/readiness_loop.h"

#include <unistd.h>

#include <memory>
#include <unordered_map>

#include "net/accept.h"
#include "net/event_loop.h"

namespace tailscope::echo::internal {
namespace {

struct Connection {
  int fd;
  net::StreamSession session;
  uint32_t interest = 0;
};

// Tokens: a Connection*, or one of these (pointers are never 0 or 1).
constexpr uint64_t kListenerToken = 0, kStopToken = 1;

}  // namespace

void serve_with_readiness_loop(ServerContext& ctx, int listen_fd, int worker_index, net::PollMechanism mechanism) {
  pin_worker(ctx.config, worker_index);
  net::EventLoop loop(mechanism);
  loop.add(listen_fd, kListenerToken, net::kReadable);
  loop.add(ctx.stop.fd(), kStopToken, net::kReadable);
  net::Acceptor acceptor(listen_fd);
  StallSchedule stall(ctx.config);
  std::unordered_map<int, std::unique_ptr<Connection>> connections;

  // Interest follows the session: readable only while it takes input,
  // writable only while output is pending, so a client that never reads
  // costs one bounded buffer and no CPU.
  auto update_interest = [&](Connection* c) {
    const uint32_t want = net::interest_of(c->session);
    if (want == c->interest) return;
    loop.modify(c->fd, reinterpret_cast<uint64_t>(c), want);
    c->interest = want;
  };
  auto close_connection = [&](Connection* c) {
    loop.remove(c->fd);
    ::close(c->fd);
    connections.erase(c->fd);
  };

  while (!ctx.stop.requested()) {
    const auto events = loop.wait(-1);
    stall.maybe_stall();
    for (const net::ReadyEvent& e : events) {
      if (e.token == kStopToken) break;
      if (e.token == kListenerToken) {
        acceptor.accept_ready(/*nonblocking=*/true, [&](int fd) {
          auto c =
              std::make_unique<Connection>(Connection{fd, net::StreamSession(ctx.config.protocol, ctx.config.limits)});
          c->interest = net::interest_of(c->session);
          loop.add(fd, reinterpret_cast<uint64_t>(c.get()), c->interest);
          connections[fd] = std::move(c);
        });
        continue;
      }
      auto* c = reinterpret_cast<Connection*>(e.token);
      if (net::on_ready(c->fd, e.ready, c->session) == net::IoVerdict::kClose)
        close_connection(c);
      else
        update_interest(c);
    }
  }
  for (auto& [fd, c] : connections) ::close(fd);
}

}  // namespace tailscope::echo::internal
