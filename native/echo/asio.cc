// Models `asio` and `asio-mt`: Boost.Asio with completion callbacks, the
// thesis's two Asio servers. They differ only in how many threads run the one
// io_context (1 vs --threads), so they share this file; every session is one
// chain of read → write → read operations, hence never runs on two threads at
// once and needs no strand.
#include <sys/socket.h>

#include <array>
#include <utility>  // Boost 1.74's awaitable.hpp uses std::exchange without it
#include <boost/asio.hpp>
#include <memory>
#include <thread>
#include <vector>

#include "echo/server.h"
#include "net/socket.h"

namespace tailscope::echo {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

class AsioSession : public std::enable_shared_from_this<AsioSession> {
 public:
  AsioSession(tcp::socket socket, const ServerConfig& config, const StallSchedule& stall)
      : socket_(std::move(socket)), session_(config.protocol, config.limits), stall_(stall) {}

  void read_more() {
    const size_t budget = std::min(session_.read_budget(), buffer_.size());
    if (budget == 0) return after_io();
    socket_.async_read_some(asio::buffer(buffer_.data(), budget),
                            [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                              self->stall_.maybe_stall();
                              if (ec == asio::error::eof) self->session_.on_peer_closed();
                              else if (ec) return;  // reset/aborted: dropping self closes the socket
                              else self->session_.on_received(self->buffer_.data(), n);
                              self->after_io();
                            });
  }

 private:
  void after_io() {
    if (session_.wants_write()) {
      std::string_view out = session_.pending_output();  // stable until on_sent()
      asio::async_write(socket_, asio::buffer(out.data(), out.size()),
                        [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                          if (ec) return;
                          self->session_.on_sent(n);
                          self->after_io();
                        });
    } else if (!session_.finished() && session_.wants_read()) {
      read_more();
    }
  }

  tcp::socket socket_;
  net::StreamSession session_;
  const StallSchedule& stall_;
  std::array<char, 16384> buffer_;
};

class AsioServer {
 public:
  AsioServer(ServerContext& ctx, asio::io_context& io)
      : ctx_(ctx), io_(io), acceptor_(io), backoff_(io), stop_watch_(io), stall_(ctx.config) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(ctx.listen_fds.at(0), reinterpret_cast<sockaddr*>(&ss), &len);
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
        // EMFILE and friends: the connection stays in the backlog; retry
        // after a pause instead of spinning on a listener that stays ready.
        backoff_.expires_after(std::chrono::milliseconds(10));
        backoff_.async_wait([this](boost::system::error_code) { accept_next(); });
        return;
      }
      net::set_nodelay(socket.native_handle());
      std::make_shared<AsioSession>(std::move(socket), ctx_.config, stall_)->read_more();
      accept_next();
    });
  }

  ServerContext& ctx_;
  asio::io_context& io_;
  tcp::acceptor acceptor_;
  asio::steady_timer backoff_;
  asio::posix::stream_descriptor stop_watch_;
  StallSchedule stall_;
};

void serve(ServerContext& ctx, int threads) {
  asio::io_context io(threads);
  {
    AsioServer server(ctx, io);
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
  // Destroying io releases the pending handlers and with them every session.
}

}  // namespace

void run_asio(ServerContext& ctx) { serve(ctx, 1); }
void run_asio_mt(ServerContext& ctx) { serve(ctx, std::max(1, ctx.config.threads)); }

}  // namespace tailscope::echo
