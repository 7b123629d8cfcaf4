// Model `epoll-reuseport`: --threads independent epoll loops, each with its
// own SO_REUSEPORT listener, so the kernel spreads connections across loops
// and no state is shared between threads (the shape of Seastar/nginx).
#include <exception>
#include <thread>
#include <vector>

#include "echo/internal/epoll_loop.h"

namespace tailscope::echo {

void run_epoll_reuseport(ServerContext& ctx) {
  std::vector<std::thread> loops;
  std::exception_ptr failure;
  for (size_t i = 0; i < ctx.listen_fds.size(); ++i) {
    loops.emplace_back([&ctx, &failure, i] {
      try {
        internal::serve_with_epoll(ctx, ctx.listen_fds[i], static_cast<int>(i));
      } catch (...) {
        failure = std::current_exception();
        ctx.stop.request();
      }
    });
  }
  for (std::thread& t : loops) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tailscope::echo
