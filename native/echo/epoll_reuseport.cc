// Model `epoll-reuseport`: --threads independent epoll loops, each with its
// own SO_REUSEPORT listener, so the kernel spreads connections across loops
// and no state is shared between threads (the shape of Seastar/nginx).
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "echo/internal/readiness_loop.h"

namespace tailscope::echo {

void run_epoll_reuseport(ServerContext& ctx) {
  std::vector<std::thread> loops;
  // Several loops can fail at once (each pins itself, each waits): the first
  // failure is kept and rethrown, under a lock, and stops the others.
  std::mutex failure_mu;
  std::exception_ptr failure;
  for (size_t i = 0; i < ctx.listen_fds.size(); ++i) {
    loops.emplace_back([&ctx, &failure_mu, &failure, i] {
      try {
        internal::serve_with_readiness_loop(ctx, ctx.listen_fds[i], static_cast<int>(i), net::PollMechanism::kEpoll);
      } catch (...) {
        {
          std::lock_guard lock(failure_mu);
          if (!failure) failure = std::current_exception();
        }
        ctx.stop.request();
      }
    });
  }
  for (std::thread& t : loops) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tailscope::echo
