// Model `poll`: the thesis's single-thread hybrid. One thread calls poll()
// over every socket and reads/writes right after readiness. Unlike the
// thesis (blocking read/write after poll) sockets are non-blocking: a blocking
// write to a client that never reads would stall every other connection.
// The loop is echo/internal/readiness_loop.cc; this model differs from `epoll`
// only in the readiness mechanism: poll() hands the kernel the whole
// interest set on every wait, so a wait costs O(connections).
#include "echo/internal/readiness_loop.h"

namespace tailscope::echo {

void run_poll(ServerContext& ctx) {
  internal::serve_with_readiness_loop(ctx, ctx.listen_fds.at(0), 0, net::PollMechanism::kPoll);
}

}  // namespace tailscope::echo
