// What the Asio models (`asio`, `asio-mt`, `asio-coro`) share, written once:
// the listener and the stop signal adopted by one io_context, the accept loop
// with net/'s back-off, and --threads threads (pinned) running the context.
// The models differ only in how a connection is served (completion callbacks
// or a C++20 coroutine), which is the on_accepted they pass.
//
// Header-only because Boost.Asio is: it is included by asio.cc and
// asio_coro.cc only (the slowest files to compile).
#pragma once

#include <sys/socket.h>
#include <unistd.h>

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>,
// so <utility> must come first and include sorting must not move it.
// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "echo/server.h"
#include "net/accept.h"
#include "net/socket.h"

namespace tailscope::echo::internal {

namespace asio = boost::asio;
using asio::ip::tcp;

// Called on an io_context thread for each accepted socket (TCP_NODELAY set).
using AsioOnAccepted = std::function<void(tcp::socket, const StallSchedule&)>;

class AsioAcceptLoop {
 public:
  AsioAcceptLoop(ServerContext& ctx, asio::io_context& io, AsioOnAccepted on_accepted)
      : io_(io),
        acceptor_(io),
        backoff_(io),
        stop_watch_(io),
        stall_(ctx.config),
        on_accepted_(std::move(on_accepted)) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(ctx.listen_fds.at(0), reinterpret_cast<sockaddr*>(&ss), &len);
    // dup: the context closes what it adopts; the listener stays main's.
    acceptor_.assign(ss.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), ::dup(ctx.listen_fds[0]));
    stop_watch_.assign(::dup(ctx.stop.fd()));
    stop_watch_.async_wait(asio::posix::stream_descriptor::wait_read,
                           [this](boost::system::error_code) { io_.stop(); });
    accept_next();
  }

 private:
  void accept_next() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        // EMFILE and friends: the connection stays in the backlog; accept
        // again after net/'s back-off instead of spinning on a listener that
        // stays ready.
        backoff_.expires_after(std::chrono::milliseconds(net::kAcceptBackoffMs));
        backoff_.async_wait([this](boost::system::error_code) { accept_next(); });
        return;
      }
      net::set_nodelay(socket.native_handle());
      on_accepted_(std::move(socket), stall_);
      accept_next();
    });
  }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  asio::steady_timer backoff_;
  asio::posix::stream_descriptor stop_watch_;
  StallSchedule stall_;
  AsioOnAccepted on_accepted_;
};

// Serves until ctx.stop is requested. Destroying the context at the end
// releases the pending handlers and with them every session.
inline void run_asio_server(ServerContext& ctx, int threads, AsioOnAccepted on_accepted) {
  // Pinned before the pool starts: a failure throws before any thread runs.
  pin_worker(ctx.config, 0);
  asio::io_context io(threads);
  AsioAcceptLoop accept_loop(ctx, io, std::move(on_accepted));
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) {
    pool.emplace_back([&, i] {
      pin_worker(ctx.config, i);
      io.run();
    });
  }
  io.run();
  for (std::thread& t : pool) t.join();
}

}  // namespace tailscope::echo::internal
