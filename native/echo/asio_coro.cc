// Model `asio-coro`: Boost.Asio with C++20 coroutines. The same read → answer
// → write chain as `asio`, written as straight-line code with co_await; one
// io_context run by --threads threads.
#include <sys/socket.h>

#include <array>
#include <utility>  // Boost 1.74's awaitable.hpp uses std::exchange without it
#include <boost/asio.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <thread>
#include <vector>

#include "echo/server.h"
#include "net/socket.h"

namespace tailscope::echo {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

asio::awaitable<void> serve_connection(tcp::socket socket, const ServerConfig& config, const StallSchedule& stall) {
  net::StreamSession session(config.protocol, config.limits);
  std::array<char, 16384> buffer;
  boost::system::error_code ec;
  for (;;) {
    const size_t budget = std::min(session.read_budget(), buffer.size());
    if (budget > 0) {
      size_t n = co_await socket.async_read_some(asio::buffer(buffer.data(), budget),
                                                 asio::redirect_error(asio::use_awaitable, ec));
      stall.maybe_stall();
      if (ec == asio::error::eof) session.on_peer_closed();
      else if (ec) co_return;
      else session.on_received(buffer.data(), n);
    }
    while (session.wants_write()) {
      std::string_view out = session.pending_output();
      size_t n = co_await asio::async_write(socket, asio::buffer(out.data(), out.size()),
                                            asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      session.on_sent(n);
    }
    if (session.finished()) co_return;
  }
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, const ServerConfig& config, const StallSchedule& stall) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer backoff(executor);
  boost::system::error_code ec;
  for (;;) {
    tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) {  // EMFILE: pause rather than spin on a listener that stays ready
      backoff.expires_after(std::chrono::milliseconds(10));
      co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    net::set_nodelay(socket.native_handle());
    asio::co_spawn(executor, serve_connection(std::move(socket), config, stall), asio::detached);
  }
}

}  // namespace

void run_asio_coro(ServerContext& ctx) {
  const int threads = std::max(1, ctx.config.threads);
  asio::io_context io(threads);
  StallSchedule stall(ctx.config);
  {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(ctx.listen_fds.at(0), reinterpret_cast<sockaddr*>(&ss), &len);
    tcp::acceptor acceptor(io);
    acceptor.assign(ss.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), ::dup(ctx.listen_fds[0]));
    asio::posix::stream_descriptor stop_watch(io, ::dup(ctx.stop.fd()));
    stop_watch.async_wait(asio::posix::stream_descriptor::wait_read, [&](boost::system::error_code) { io.stop(); });
    asio::co_spawn(io, accept_loop(acceptor, ctx.config, stall), asio::detached);
    std::vector<std::thread> pool;
    for (int i = 1; i < threads; ++i) {
      pool.emplace_back([&, i] {
        pin_worker(ctx.config, i);
        io.run();
      });
    }
    pin_worker(ctx.config, 0);
    io.run();
    for (std::thread& t : pool) t.join();
  }
}

}  // namespace tailscope::echo
