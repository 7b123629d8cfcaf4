// Model `thread-per-connection`: the classic blocking server. One thread
// accepts; every connection gets its own thread doing blocking recv/send.
// A slow or never-reading client blocks only its own thread. Threads get a
// 256 KiB stack (not the 8 MiB default) so 10 000 connections fit in memory.
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <unordered_set>

#include "echo/server.h"
#include "net/accept.h"

namespace tailscope::echo {
namespace {

constexpr size_t kStackBytes = 256 * 1024;

struct Registry {
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_set<int> fds;
  bool stopping = false;
};

struct ConnectionThreadArgs {
  ServerContext* ctx;
  Registry* registry;
  int fd;
};

void* serve_connection(void* raw) {
  auto* args = static_cast<ConnectionThreadArgs*>(raw);
  net::StreamSession session(args->ctx->config.protocol, args->ctx->config.limits);
  char buffer[16384];
  StallSchedule stall(args->ctx->config);
  while (net::serve_blocking_once(args->fd, session, buffer, sizeof buffer) == net::IoVerdict::kOpen) {
    stall.maybe_stall();
  }
  {
    std::lock_guard lock(args->registry->mu);
    args->registry->fds.erase(args->fd);
    ::close(args->fd);
    args->registry->cv.notify_all();
  }
  delete args;
  return nullptr;
}

}  // namespace

void run_thread_per_connection(ServerContext& ctx) {
  pin_worker(ctx.config, 0);
  const int listen_fd = ctx.listen_fds.at(0);
  net::Acceptor acceptor(listen_fd);
  Registry registry;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStackBytes);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pollfd fds[2] = {{listen_fd, POLLIN, 0}, {ctx.stop.fd(), POLLIN, 0}};
  while (!ctx.stop.requested()) {
    if (::poll(fds, 2, -1) <= 0 || (fds[1].revents & POLLIN)) continue;
    // The listener is non-blocking (accept_ready stops at EAGAIN); the
    // accepted sockets are blocking.
    acceptor.accept_ready(/*nonblocking=*/false, [&](int fd) {
      {
        std::lock_guard lock(registry.mu);
        registry.fds.insert(fd);
      }
      auto* args = new ConnectionThreadArgs{&ctx, &registry, fd};
      pthread_t tid;
      if (pthread_create(&tid, &attr, serve_connection, args) != 0) {
        // Out of threads: refuse this connection, keep serving the others.
        std::lock_guard lock(registry.mu);
        registry.fds.erase(fd);
        ::close(fd);
        delete args;
      }
    });
  }
  pthread_attr_destroy(&attr);
  // Wake every blocked recv/send, then wait for the threads to finish.
  std::unique_lock lock(registry.mu);
  for (int fd : registry.fds) ::shutdown(fd, SHUT_RDWR);
  registry.cv.wait(lock, [&] { return registry.fds.empty(); });
}

}  // namespace tailscope::echo
