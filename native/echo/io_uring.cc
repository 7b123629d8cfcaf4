// Model `io-uring`: one thread, completion-based I/O through liburing, with
// the interface users compare against epoll:
//   - multishot accept straight into the ring's registered file table
//     (direct descriptors: no fd table lookups per operation);
//   - one multishot recv per connection drawing from a provided buffer ring
//     (one SQE serves every read of the connection's life);
//   - sends from a per-connection buffer that the session cannot move while
//     the send is in flight;
//   - batched submission: every SQE prepared while handling one batch of
//     completions goes to the kernel in the single io_uring_enter that also
//     waits for the next batch (io_uring_submit_and_wait);
//   - optional SQPOLL (--sqpoll): a kernel thread polls the submission queue.
// Every feature is probed at start on a throwaway ring (uring_plan()); what
// the kernel lacks falls back (one-shot accept, one-shot recv into a
// per-connection buffer, plain descriptors, no SQPOLL) and the reason is
// printed in the ready line's "features" (model_features()), so each result
// says what was measured.
//
// Memory stays bounded like every other model: while the session's output
// (plus the send in flight) is at its bound, the multishot recv is cancelled
// and re-armed once output drains, so a client that never reads costs at most
// the bound plus the buffers already delivered.
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "echo/server.h"
#include "net/accept.h"
#include "net/socket.h"
#include "net/uring.h"

namespace tailscope::echo {
namespace {

constexpr unsigned kSqEntries = 4096;
constexpr unsigned kCqEntries = 16384;   // multishot ops post many CQEs per SQE
constexpr unsigned kBufferCount = 1024;  // power of two (buffer ring)
constexpr unsigned kBufferBytes = 4096;
constexpr uint16_t kBufferGroup = 0;
constexpr unsigned kMaxRegisteredFiles = 65536;
constexpr size_t kFallbackBufferBytes = 16384;

std::string errno_text(int err) { return net::uring_error_text(err); }

// What this kernel gives us; decided once by probing, used by the server.
struct UringPlan {
  unsigned setup_flags = 0;
  std::string setup_text = "default";
  bool sqpoll = false;
  std::string sqpoll_reason;
  bool registered_files = false;
  unsigned file_slots = 0;
  std::string registered_files_reason;
  bool buffer_ring = false;
  std::string buffer_ring_reason;
  bool multishot_recv = false;
  std::string multishot_recv_reason;
  bool multishot_accept = false;
  std::string multishot_accept_reason;
};

unsigned file_slots_allowed() {
  // The table counts against RLIMIT_NOFILE, so --max-fds bounds this model too.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kMaxRegisteredFiles;
  return static_cast<unsigned>(std::min<rlim_t>(rl.rlim_cur, kMaxRegisteredFiles));
}

int init_ring(io_uring* ring, unsigned flags, int sq_cpu) {
  return net::init_uring(ring, kSqEntries, kCqEntries, flags, sq_cpu);
}

// The SQPOLL thread shares the worker's core unless a second CPU is given:
// on one server core it competes with the loop it serves (the study runs
// without it; --sqpoll is for machines with a core to spare).
int sq_cpu_of(const ServerConfig& config) {
  if (config.cpus.empty()) return -1;
  return config.cpus[config.cpus.size() > 1 ? 1 : 0];
}

// kBufferCount buffers of kBufferBytes, registered as group kBufferGroup.
class BufferRing : public net::UringBufferRing {
 public:
  BufferRing() : net::UringBufferRing(kBufferCount, kBufferBytes, kBufferGroup) {}
};

constexpr uint64_t kProbeAcceptTag = 2;

// Does a multishot accept (into the file table when it is registered) stay armed?
std::string probe_multishot_accept(io_uring* ring, bool direct) {
  int listener = -1, client = -1;
  std::string reason;
  try {
    listener = net::make_listener("127.0.0.1", 0, false, 4);
    const int port = net::bound_port(listener);
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    if (direct)
      io_uring_prep_multishot_accept_direct(sqe, listener, nullptr, nullptr, 0);
    else
      io_uring_prep_multishot_accept(sqe, listener, nullptr, nullptr, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, kProbeAcceptTag + (direct ? 0 : 1));
    io_uring_submit(ring);
    client = net::start_connect("127.0.0.1", port);
    io_uring_cqe* cqe = nullptr;
    if (client < 0)
      reason = "connect to the probe listener failed: " + errno_text(errno);
    else if (!net::wait_for_uring_tag(ring, kProbeAcceptTag + (direct ? 0 : 1), &cqe))
      reason = "no completion within 1 s";
    else if (cqe->res < 0)
      reason = "multishot accept failed: " + errno_text(cqe->res);
    else if (!(cqe->flags & IORING_CQE_F_MORE))
      reason = "accept completed without IORING_CQE_F_MORE (not multishot)";
    if (cqe != nullptr) {
      if (cqe->res >= 0 && !direct) ::close(cqe->res);
      io_uring_cqe_seen(ring, cqe);
    }
  } catch (const std::exception& e) {
    reason = std::string("probe listener: ") + e.what();
  }
  if (client >= 0) ::close(client);
  if (listener >= 0) ::close(listener);
  return reason;
}

// Probes, on a throwaway ring, what the server will use. Throws
// ModelUnavailable when io_uring itself cannot be set up.
UringPlan uring_plan(const ServerConfig& config) {
  UringPlan plan;
  io_uring ring{};
  int r = -EINVAL;
  if (config.io_uring_sqpoll) {
    r = init_ring(&ring, IORING_SETUP_SQPOLL, sq_cpu_of(config));
    if (r == 0) {
      plan.sqpoll = true;
      plan.setup_flags = IORING_SETUP_SQPOLL;
      plan.setup_text = "sqpoll";
    } else {
      plan.sqpoll_reason = "requested, but IORING_SETUP_SQPOLL failed: " + errno_text(r);
    }
  } else {
    plan.sqpoll_reason = "not requested (--sqpoll)";
  }
  std::string first_error;
  for (const net::UringSetup& c : net::uring_setup_candidates()) {
    if (plan.sqpoll) break;
    r = init_ring(&ring, c.flags, -1);
    if (r == 0) {
      plan.setup_flags = c.flags;
      plan.setup_text = c.text;
      break;
    }
    if (first_error.empty()) first_error = errno_text(r);
  }
  if (r != 0) throw ModelUnavailable("io_uring_setup failed: " + errno_text(r));

  plan.file_slots = file_slots_allowed();
  r = io_uring_register_files_sparse(&ring, plan.file_slots);
  plan.registered_files = r == 0;
  if (r != 0) plan.registered_files_reason = "IORING_REGISTER_FILES (sparse) failed: " + errno_text(r);

  {
    BufferRing buffers;
    r = buffers.setup(&ring);
    plan.buffer_ring = r == 0;
    if (r != 0) plan.buffer_ring_reason = "IORING_REGISTER_PBUF_RING failed: " + errno_text(r);
    if (plan.buffer_ring) {
      plan.multishot_recv_reason = net::probe_multishot_recv(&ring, kBufferGroup, plan.registered_files);
      plan.multishot_recv = plan.multishot_recv_reason.empty();
    } else {
      plan.multishot_recv_reason = "needs the provided buffer ring";
    }
  }
  plan.multishot_accept_reason = probe_multishot_accept(&ring, plan.registered_files);
  plan.multishot_accept = plan.multishot_accept_reason.empty();
  if (!plan.multishot_accept && plan.registered_files) {
    // Direct accept may be what is missing: plain descriptors, then.
    const std::string direct_reason = plan.multishot_accept_reason;
    plan.multishot_accept_reason = probe_multishot_accept(&ring, false);
    plan.multishot_accept = plan.multishot_accept_reason.empty();
    if (plan.multishot_accept) {
      plan.registered_files = false;
      plan.registered_files_reason = "multishot accept into the file table failed: " + direct_reason;
    }
  }
  io_uring_queue_exit(&ring);
  return plan;
}

nlohmann::json feature(bool used, const std::string& reason) {
  nlohmann::json f = {{"used", used}};
  if (!used) f["reason"] = reason;
  return f;
}

struct Connection {
  Connection(int file_in, net::StreamSession session_in) : file(file_in), session(std::move(session_in)) {}
  int file;  // registered-file index, or a descriptor without registered files
  net::StreamSession session;
  std::string sending;  // the bytes of the send in flight (stable while the kernel reads them)
  size_t sending_head = 0;
  bool recv_armed = false, recv_cancelled = false, send_in_flight = false, closing = false;
  std::vector<char> buffer;  // one-shot recv only (no buffer ring)
};

// user_data: a Connection* with the operation in the low bits, or a tag.
// Connections come from new (16-byte aligned, far above the tags).
enum : uint64_t { kRecv = 1, kSend = 2, kOpMask = 7 };
constexpr uint64_t kAcceptTag = 16, kStopTag = 32, kBackoffTag = 48, kIgnoreTag = 64;

class UringServer {
 public:
  UringServer(ServerContext& ctx, UringPlan plan) : ctx_(ctx), plan_(std::move(plan)), stall_(ctx.config) {
    const int r = init_ring(&ring_, plan_.setup_flags, sq_cpu_of(ctx.config));
    if (r < 0) throw ModelUnavailable("io_uring_setup failed: " + errno_text(r));
    if (plan_.registered_files && io_uring_register_files_sparse(&ring_, plan_.file_slots) != 0)
      plan_.registered_files = false;
    if (plan_.buffer_ring && buffers_.setup(&ring_) != 0) {
      plan_.buffer_ring = false;
      plan_.multishot_recv = false;
    }
  }
  ~UringServer() {
    buffers_.detach();
    io_uring_queue_exit(&ring_);  // cancels what is in flight; closes registered files
    for (Connection* c : connections_) {
      if (!plan_.registered_files) ::close(c->file);
      delete c;
    }
  }

  void run() {
    const int listen_fd = ctx_.listen_fds.at(0);
    // Direct descriptors take no setsockopt: accepted sockets inherit
    // TCP_NODELAY from the listener on Linux.
    net::set_nodelay(listen_fd);
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_poll_add(sqe, ctx_.stop.fd(), POLLIN);
    io_uring_sqe_set_data64(sqe, kStopTag);
    arm_accept(listen_fd);
    while (!ctx_.stop.requested()) {
      io_uring_submit_and_wait(&ring_, 1);  // the one io_uring_enter of this iteration
      io_uring_cqe* cqe;
      unsigned head, seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        if (seen++ == 0) stall_.maybe_stall();
        handle(cqe, listen_fd);
      }
      io_uring_cq_advance(&ring_, seen);
      if (plan_.buffer_ring) buffers_.publish();
    }
  }

 private:
  io_uring_sqe* get_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {  // submission queue full: flush it (rare: 4096 entries)
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }
  void use_file(io_uring_sqe* sqe) const {
    if (plan_.registered_files) sqe->flags |= IOSQE_FIXED_FILE;
  }

  void arm_accept(int listen_fd) {
    io_uring_sqe* sqe = get_sqe();
    if (plan_.registered_files) {
      if (plan_.multishot_accept)
        io_uring_prep_multishot_accept_direct(sqe, listen_fd, nullptr, nullptr, 0);
      else
        io_uring_prep_accept_direct(sqe, listen_fd, nullptr, nullptr, 0, IORING_FILE_INDEX_ALLOC);
    } else if (plan_.multishot_accept) {
      io_uring_prep_multishot_accept(sqe, listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    } else {
      io_uring_prep_accept(sqe, listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    }
    io_uring_sqe_set_data64(sqe, kAcceptTag);
  }

  void arm_recv(Connection* c) {
    io_uring_sqe* sqe = get_sqe();
    if (plan_.buffer_ring) {
      if (plan_.multishot_recv)
        io_uring_prep_recv_multishot(sqe, c->file, nullptr, 0, 0);
      else
        io_uring_prep_recv(sqe, c->file, nullptr, kBufferBytes, 0);
      sqe->flags |= IOSQE_BUFFER_SELECT;
      sqe->buf_group = kBufferGroup;
    } else {
      if (c->buffer.empty()) c->buffer.resize(kFallbackBufferBytes);
      io_uring_prep_recv(sqe, c->file, c->buffer.data(), std::min(c->session.read_budget(), c->buffer.size()), 0);
    }
    use_file(sqe);
    io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(c) | kRecv);
    c->recv_armed = true;
  }

  void submit_send(Connection* c) {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_send(sqe, c->file, c->sending.data() + c->sending_head, c->sending.size() - c->sending_head,
                       MSG_NOSIGNAL);
    use_file(sqe);
    io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(c) | kSend);
    c->send_in_flight = true;
  }

  void cancel(Connection* c, uint64_t op) {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_cancel64(sqe, reinterpret_cast<uint64_t>(c) | op, 0);
    io_uring_sqe_set_data64(sqe, kIgnoreTag);
  }

  // Output pending in the session plus the send in flight: what the bound covers.
  size_t output_bytes(const Connection* c) const {
    return c->session.pending_output().size() + (c->sending.size() - c->sending_head);
  }

  // After every completion of a connection: send what is pending, keep
  // reading while output is under its bound, close when the session is over.
  void drive(Connection* c) {
    if (!c->closing) {
      if (!c->send_in_flight && c->session.wants_write()) {
        c->sending.assign(c->session.pending_output());
        c->sending_head = 0;
        c->session.on_sent(c->sending.size());  // the session's buffer may move now; ours may not
        submit_send(c);
      }
      if (c->session.finished() && !c->send_in_flight) {
        begin_close(c);
      } else {
        const bool may_read = c->session.wants_read() && output_bytes(c) < ctx_.config.limits.max_pending_output_bytes;
        if (may_read && !c->recv_armed) arm_recv(c);
        if (!may_read && c->recv_armed && plan_.multishot_recv && !c->recv_cancelled) {
          cancel(c, kRecv);  // flow control: stop taking input until output drains
          c->recv_cancelled = true;
        }
      }
    }
    if (c->closing && !c->recv_armed && !c->send_in_flight) finish_close(c);
  }

  void begin_close(Connection* c) {
    c->closing = true;
    if (c->recv_armed && !c->recv_cancelled) {
      cancel(c, kRecv);
      c->recv_cancelled = true;
    }
    if (c->send_in_flight) cancel(c, kSend);
  }

  void finish_close(Connection* c) {
    if (plan_.registered_files) {
      io_uring_sqe* sqe = get_sqe();
      io_uring_prep_close_direct(sqe, static_cast<unsigned>(c->file));
      io_uring_sqe_set_data64(sqe, kIgnoreTag);
    } else {
      ::close(c->file);
    }
    connections_.erase(c);
    delete c;
  }

  void on_accept(io_uring_cqe* cqe, int listen_fd) {
    const bool more = cqe->flags & IORING_CQE_F_MORE;
    const int res = cqe->res;
    if (res >= 0) {
      if (!plan_.registered_files) net::set_nodelay(res);
      auto* c = new Connection(res, net::StreamSession(ctx_.config.protocol, ctx_.config.limits));
      connections_.insert(c);
      drive(c);
      if (!more) arm_accept(listen_fd);
    } else if (!more) {
      // EMFILE/ENFILE (file table full) and friends: pause net/'s back-off
      // (a timeout op), then accept again.
      io_uring_sqe* sqe = get_sqe();
      io_uring_prep_timeout(sqe, &backoff_, 0, 0);
      io_uring_sqe_set_data64(sqe, kBackoffTag);
    }
  }

  void on_recv(Connection* c, io_uring_cqe* cqe) {
    const int res = cqe->res;
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
      c->recv_armed = false;
      c->recv_cancelled = false;
    }
    if (res > 0) {
      const char* data = c->buffer.data();
      if (cqe->flags & IORING_CQE_F_BUFFER) {
        const auto bid = static_cast<uint16_t>(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
        data = buffers_.data(bid);
        if (!c->closing) c->session.on_received(data, static_cast<size_t>(res));
        buffers_.give_back(bid);
      } else if (!c->closing) {
        c->session.on_received(data, static_cast<size_t>(res));
      }
    } else if (res == 0) {
      c->session.on_peer_closed();
    } else if (res != -ENOBUFS && res != -ECANCELED) {
      // ENOBUFS: every buffer was in use; re-armed below once they return.
      if (!c->closing) begin_close(c);
    }
    drive(c);
  }

  void on_send(Connection* c, int res) {
    c->send_in_flight = false;
    if (res <= 0) {
      if (!c->closing) begin_close(c);
    } else {
      c->sending_head += static_cast<size_t>(res);
      if (c->sending_head < c->sending.size() && !c->closing) {
        submit_send(c);  // a short send: the rest of the same bytes
        return;
      }
      c->sending.clear();
      c->sending_head = 0;
    }
    drive(c);
  }

  void handle(io_uring_cqe* cqe, int listen_fd) {
    const uint64_t data = io_uring_cqe_get_data64(cqe);
    if (data == kStopTag || data == kIgnoreTag) return;  // the loop condition sees the stop request
    if (data == kBackoffTag) return arm_accept(listen_fd);
    if (data == kAcceptTag) return on_accept(cqe, listen_fd);
    auto* c = reinterpret_cast<Connection*>(data & ~kOpMask);
    if ((data & kOpMask) == kRecv)
      on_recv(c, cqe);
    else
      on_send(c, cqe->res);
  }

  ServerContext& ctx_;
  UringPlan plan_;
  StallSchedule stall_;
  io_uring ring_{};
  BufferRing buffers_;
  __kernel_timespec backoff_{0, net::kAcceptBackoffMs * 1'000'000};
  std::unordered_set<Connection*> connections_;
};

}  // namespace

nlohmann::json io_uring_features(const ServerConfig& config) {
  const UringPlan plan = uring_plan(config);
  return {{"ring_setup", plan.setup_text},
          {"submission", "batched: one io_uring_enter per loop iteration (submit and wait)"},
          {"sqpoll", feature(plan.sqpoll, plan.sqpoll_reason)},
          {"registered_files", feature(plan.registered_files, plan.registered_files_reason)},
          {"provided_buffer_ring", feature(plan.buffer_ring, plan.buffer_ring_reason)},
          {"buffer_ring_buffers", plan.buffer_ring ? nlohmann::json(kBufferCount) : nlohmann::json(nullptr)},
          {"buffer_bytes", plan.buffer_ring ? nlohmann::json(kBufferBytes) : nlohmann::json(nullptr)},
          {"multishot_recv", feature(plan.multishot_recv, plan.multishot_recv_reason)},
          {"multishot_accept", feature(plan.multishot_accept, plan.multishot_accept_reason)}};
}

void run_io_uring(ServerContext& ctx) {
  pin_worker(ctx.config, 0);
  UringServer server(ctx, uring_plan(ctx.config));
  server.run();
}

}  // namespace tailscope::echo
