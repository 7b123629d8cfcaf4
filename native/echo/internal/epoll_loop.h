// The single-threaded epoll event loop, shared by `epoll` (one loop) and
// `epoll-reuseport` (one loop per thread, each on its own listener).
#pragma once

#include "echo/server.h"

namespace tailscope::echo::internal {

// Serves listen_fd until ctx.stop is requested; closes its connections.
void serve_with_epoll(ServerContext& ctx, int listen_fd, int worker_index);

}  // namespace tailscope::echo::internal
