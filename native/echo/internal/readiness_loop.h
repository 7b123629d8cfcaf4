// The single-threaded readiness loop of the `epoll`, `poll` and
// `epoll-reuseport` models (one loop per thread there, each on its own
// listener). The models differ only in the kernel mechanism that reports
// readiness (net/poller.h); the loop, the accept burst and the
// read/write/close dispatch are the same code.
#pragma once

#include "echo/server.h"
#include "net/poller.h"

namespace tailscope::echo::internal {

// Serves listen_fd until ctx.stop is requested; closes its connections.
void serve_with_readiness_loop(ServerContext& ctx, int listen_fd, int worker_index, net::PollMechanism mechanism);

}  // namespace tailscope::echo::internal
