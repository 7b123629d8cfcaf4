// Models `asio` and `asio-mt`: Boost.Asio with completion callbacks, the
// thesis's two Asio servers. They differ only in how many threads run the one
// io_context (1 vs --threads), so they share this file; every session is one
// chain of read → write → read operations, hence never runs on two threads at
// once and needs no strand. Listener, accept loop and threads:
// echo/internal/asio_server.h.
#include <array>
#include <memory>

#include "echo/internal/asio_server.h"

namespace tailscope::echo {
namespace {

using internal::asio::ip::tcp;
namespace asio = internal::asio;

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
                              if (ec == asio::error::eof)
                                self->session_.on_peer_closed();
                              else if (ec)
                                return;  // reset/aborted: dropping self closes the socket
                              else
                                self->session_.on_received(self->buffer_.data(), n);
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

void serve(ServerContext& ctx, int threads) {
  const ServerConfig& config = ctx.config;
  internal::run_asio_server(ctx, threads, [&config](tcp::socket socket, const StallSchedule& stall) {
    std::make_shared<AsioSession>(std::move(socket), config, stall)->read_more();
  });
}

}  // namespace

void run_asio(ServerContext& ctx) { serve(ctx, 1); }
void run_asio_mt(ServerContext& ctx) { serve(ctx, std::max(1, ctx.config.threads)); }

}  // namespace tailscope::echo
