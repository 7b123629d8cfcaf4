// Model `asio-coro`: Boost.Asio with C++20 coroutines. The same read → answer
// → write chain as `asio`, written as straight-line code with co_await; one
// io_context run by --threads threads. Listener, accept loop and threads:
// echo/internal/asio_server.h.
// asio_server.h brings <utility> before Boost (see there).
// clang-format off
#include "echo/internal/asio_server.h"
// clang-format on

#include <array>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace tailscope::echo {
namespace {

using internal::asio::ip::tcp;
namespace asio = internal::asio;

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
      if (ec == asio::error::eof)
        session.on_peer_closed();
      else if (ec)
        co_return;
      else
        session.on_received(buffer.data(), n);
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

}  // namespace

void run_asio_coro(ServerContext& ctx) {
  const ServerConfig& config = ctx.config;
  internal::run_asio_server(
      ctx, std::max(1, config.threads), [&config](tcp::socket socket, const StallSchedule& stall) {
        const auto executor = socket.get_executor();
        asio::co_spawn(executor, serve_connection(std::move(socket), config, stall), asio::detached);
      });
}

}  // namespace tailscope::echo
