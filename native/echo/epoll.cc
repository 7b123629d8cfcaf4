// Model `epoll`: one thread, non-blocking sockets, level-triggered epoll.
// The loop is echo/internal/readiness_loop.cc; this model differs from `poll`
// only in the readiness mechanism: epoll keeps the interest set in the kernel,
// so a wait costs O(ready), not O(connections).
#include "echo/internal/readiness_loop.h"

namespace tailscope::echo {

void run_epoll(ServerContext& ctx) {
  internal::serve_with_readiness_loop(ctx, ctx.listen_fds.at(0), 0, net::PollMechanism::kEpoll);
}

}  // namespace tailscope::echo
