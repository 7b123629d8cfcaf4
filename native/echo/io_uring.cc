// Model `io-uring`: one thread, completion-based I/O through liburing.
// Accept is multishot where the kernel supports it (5.19+; else one accept
// per completion); each connection has at most one recv or send in flight
// (the same half-duplex chain as the Asio models), into a per-connection
// buffer. Multishot recv with provided-buffer rings is not used: it would
// trade the bounded per-connection buffer for a shared pool.
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <string>
#include <unordered_set>

#include "echo/server.h"
#include "net/accept.h"
#include "net/socket.h"

namespace tailscope::echo {
namespace {

struct Connection {
  Connection(int fd_in, net::StreamSession session_in) : fd(fd_in), session(std::move(session_in)) {}
  int fd;
  net::StreamSession session;
  std::array<char, 16384> buffer;  // not zeroed: untouched pages cost no RSS (like the Asio models)
};

// user_data: a Connection* with the operation in the low bits, or a tag.
enum : uint64_t { kRecv = 1, kSend = 2, kTagMask = 3 };
constexpr uint64_t kAcceptTag = 4, kStopTag = 8, kBackoffTag = 12;

class UringServer {
 public:
  UringServer(ServerContext& ctx) : ctx_(ctx), stall_(ctx.config) {
    int r = io_uring_queue_init(1024, &ring_, 0);
    if (r < 0) throw ModelUnavailable(std::string("io_uring_setup failed: ") + std::strerror(-r));
  }
  ~UringServer() {
    io_uring_queue_exit(&ring_);
    for (Connection* c : connections_) {
      ::close(c->fd);
      delete c;
    }
  }

  void run() {
    const int listen_fd = ctx_.listen_fds.at(0);
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_poll_add(sqe, ctx_.stop.fd(), POLLIN);
    io_uring_sqe_set_data64(sqe, kStopTag);
    arm_accept(listen_fd);
    while (!ctx_.stop.requested()) {
      io_uring_submit_and_wait(&ring_, 1);
      io_uring_cqe* cqe;
      unsigned head, seen = 0;
      bool stalled = false;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        if (!stalled) {
          stall_.maybe_stall();
          stalled = true;
        }
        handle(cqe, listen_fd);
      }
      io_uring_cq_advance(&ring_, seen);
    }
  }

 private:
  io_uring_sqe* get_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {  // submission queue full: flush it
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  void arm_accept(int listen_fd) {
    io_uring_sqe* sqe = get_sqe();
    if (multishot_accept_)
      io_uring_prep_multishot_accept(sqe, listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    else
      io_uring_prep_accept(sqe, listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, kAcceptTag);
  }

  void arm_io(Connection* c) {
    if (c->session.wants_write()) {
      std::string_view out = c->session.pending_output();
      io_uring_sqe* sqe = get_sqe();
      io_uring_prep_send(sqe, c->fd, out.data(), out.size(), MSG_NOSIGNAL);
      io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(c) | kSend);
    } else if (!c->session.finished() && c->session.wants_read()) {
      const size_t budget = std::min(c->session.read_budget(), c->buffer.size());
      io_uring_sqe* sqe = get_sqe();
      io_uring_prep_recv(sqe, c->fd, c->buffer.data(), budget, 0);
      io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(c) | kRecv);
    } else {
      close_connection(c);
    }
  }

  void close_connection(Connection* c) {
    ::close(c->fd);
    connections_.erase(c);
    delete c;
  }

  void handle(io_uring_cqe* cqe, int listen_fd) {
    const uint64_t data = io_uring_cqe_get_data64(cqe);
    const int res = cqe->res;
    if (data == kStopTag) return;  // the loop condition sees the request
    if (data == kBackoffTag) return arm_accept(listen_fd);
    if (data == kAcceptTag) {
      const bool more = cqe->flags & IORING_CQE_F_MORE;
      if (res >= 0) {
        net::set_nodelay(res);
        auto* c = new Connection(res, net::StreamSession(ctx_.config.protocol, ctx_.config.limits));
        connections_.insert(c);
        arm_io(c);
        if (!more) arm_accept(listen_fd);
      } else if (res == -EINVAL && multishot_accept_) {
        multishot_accept_ = false;  // kernel without multishot accept
        arm_accept(listen_fd);
      } else if (!more) {
        // EMFILE and friends: pause net/'s back-off (a timeout op), then accept again.
        io_uring_sqe* sqe = get_sqe();
        io_uring_prep_timeout(sqe, &backoff_, 0, 0);
        io_uring_sqe_set_data64(sqe, kBackoffTag);
      }
      return;
    }
    auto* c = reinterpret_cast<Connection*>(data & ~kTagMask);
    if ((data & kTagMask) == kRecv) {
      if (res == 0)
        c->session.on_peer_closed();
      else if (res < 0)
        return close_connection(c);
      else
        c->session.on_received(c->buffer.data(), static_cast<size_t>(res));
    } else {
      if (res <= 0) return close_connection(c);
      c->session.on_sent(static_cast<size_t>(res));
    }
    arm_io(c);
  }

  ServerContext& ctx_;
  StallSchedule stall_;
  io_uring ring_{};
  bool multishot_accept_ = true;
  __kernel_timespec backoff_{0, net::kAcceptBackoffMs * 1'000'000};
  std::unordered_set<Connection*> connections_;
};

}  // namespace

void run_io_uring(ServerContext& ctx) {
  pin_worker(ctx.config, 0);
  UringServer server(ctx);
  server.run();
}

}  // namespace tailscope::echo
