// The load worker's io_uring path (--io uring): the same scheduling, stamps
// and response matching as the epoll path (worker.cc), with the bytes moved
// by completions so one system call serves a whole loop turn:
//   - one multishot recv per connection, drawing from a provided buffer ring
//     (net/uring.h): no recv() per response;
//   - every send queued in a loop turn goes to the kernel in the single
//     io_uring_enter that also waits for (or peeks at) completions; the
//     requests are stamped just before it (RequestTiming::stamp_queued);
//   - sockets in the ring's registered file table (no fd lookup per op);
//   - connects stay non-blocking connect() calls, their completion watched
//     by a poll operation.
// Every completion carries the connection's index and generation: a late
// completion of a dropped socket (a cancelled recv, a send in flight) is
// recognised and only gives back what it holds.
#include <liburing.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <stdexcept>
#include <unordered_map>

#include "load/request_timing.h"
#include "load/worker.h"
#include "net/uring.h"

namespace tailscope::load {
namespace {

constexpr uint16_t kBufferGroup = 0;
constexpr unsigned kBufferBytes = 4096;
constexpr unsigned kMinBuffers = 256, kMaxBuffers = 4096;
constexpr unsigned kSqEntries = 1024;
// user_data: connection index << 32 | generation (24 bits) << 8 | operation.
enum : uint64_t { kConnectOp = 1, kRecvOp = 2, kSendOp = 3, kIgnoreOp = 4, kOpMask = 0xff };
constexpr uint32_t kGenerationMask = 0xffffff;

unsigned buffer_count_for(size_t connections) {
  // One buffer per connection covers one response in flight each; the
  // bounds keep a small run small and a 10 000-connection run at 16 MiB.
  const auto wanted = static_cast<unsigned>(std::min<size_t>(connections * 2, kMaxBuffers));
  return std::bit_ceil(std::max(wanted, kMinBuffers));
}

}  // namespace

struct LoadWorker::UringState {
  io_uring ring{};
  net::UringBufferRing buffers;
  bool ring_ready = false;
  // Send buffers of dropped connections whose send was still in flight: the
  // kernel may read them until that send's (cancelled) completion arrives.
  std::unordered_map<uint64_t, std::string> orphaned_sends;
  explicit UringState(unsigned buffer_count) : buffers(buffer_count, kBufferBytes, kBufferGroup) {}
  ~UringState() {
    if (!ring_ready) return;
    buffers.detach();
    io_uring_queue_exit(&ring);
  }
};

void LoadWorker::UringStateDeleter::operator()(UringState* state) const { delete state; }

std::string probe_uring_load_plan(UringLoadPlan* plan) {
  io_uring ring{};
  int r = -EINVAL;
  for (const net::UringSetup& s : net::uring_setup_candidates()) {
    r = net::init_uring(&ring, 8, 64, s.flags);
    if (r == 0) {
      plan->setup_flags = s.flags;
      plan->setup_text = s.text;
      break;
    }
  }
  if (r != 0) return "io_uring_setup failed: " + net::uring_error_text(r);
  std::string reason;
  r = io_uring_register_files_sparse(&ring, 1);
  plan->registered_files = r == 0;
  if (r != 0) plan->registered_files_reason = "IORING_REGISTER_FILES (sparse) failed: " + net::uring_error_text(r);
  {
    net::UringBufferRing buffers(kMinBuffers, kBufferBytes, kBufferGroup);
    r = buffers.setup(&ring);
    if (r != 0)
      reason = "provided buffer ring (IORING_REGISTER_PBUF_RING) failed: " + net::uring_error_text(r);
    else
      reason = net::probe_multishot_recv(&ring, kBufferGroup, plan->registered_files);
  }
  io_uring_queue_exit(&ring);
  return reason;
}

uint64_t LoadWorker::uring_token(const Connection& c, uint64_t op) const {
  const auto index = static_cast<uint64_t>(&c - connections_.data());
  return index << 32 | static_cast<uint64_t>(c.generation & kGenerationMask) << 8 | op;
}

void LoadWorker::uring_start() {
  uring_.reset(new UringState(buffer_count_for(connections_.size())));
  UringState& u = *uring_;
  // Multishot recv posts a completion per response; an overflowing queue is
  // kept by the kernel (IORING_FEAT_NODROP), so this only sizes the fast path.
  const unsigned cq_entries = std::bit_ceil(std::max<unsigned>(4 * kSqEntries, 2 * u.buffers.count()));
  int r = net::init_uring(&u.ring, kSqEntries, cq_entries, uring_plan_->setup_flags);
  if (r != 0) throw std::runtime_error("--io uring: io_uring_setup failed: " + net::uring_error_text(r));
  u.ring_ready = true;
  if (uring_plan_->registered_files) {
    r = io_uring_register_files_sparse(&u.ring, static_cast<unsigned>(connections_.size()));
    if (r != 0)
      throw std::runtime_error("--io uring: registering " + std::to_string(connections_.size()) +
                               " file slots failed: " + net::uring_error_text(r));
  }
  r = u.buffers.setup(&u.ring);
  if (r != 0) throw std::runtime_error("--io uring: provided buffer ring failed: " + net::uring_error_text(r));
}

io_uring_sqe* LoadWorker::uring_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&uring_->ring);
  while (sqe == nullptr) {  // submission queue full: stamp what is queued, hand it over
    timing_->stamp_queued([&](const InFlightRequest& r) {
      if (mix_ && timing_->in_window(r.intended_ns)) mix_->on_sent(r.endpoint);
    });
    result_.syscalls += counting_;
    io_uring_submit(&uring_->ring);
    sqe = io_uring_get_sqe(&uring_->ring);
  }
  return sqe;
}

void LoadWorker::uring_watch_connect(Connection& c) {
  io_uring_sqe* sqe = uring_sqe();
  io_uring_prep_poll_add(sqe, c.fd, POLLOUT);
  io_uring_sqe_set_data64(sqe, uring_token(c, kConnectOp));
  c.connect_armed = true;
}

void LoadWorker::uring_attach(Connection& c) {
  if (uring_plan_->registered_files) {
    result_.syscalls += counting_;
    const auto slot = static_cast<unsigned>(&c - connections_.data());
    c.file_registered = io_uring_register_files_update(&uring_->ring, slot, &c.fd, 1) == 1;
  }
  uring_arm_recv(c);
}

void LoadWorker::uring_arm_recv(Connection& c) {
  io_uring_sqe* sqe = uring_sqe();
  if (c.file_registered) {
    io_uring_prep_recv_multishot(sqe, static_cast<int>(&c - connections_.data()), nullptr, 0, 0);
    sqe->flags |= IOSQE_FIXED_FILE;
  } else {
    io_uring_prep_recv_multishot(sqe, c.fd, nullptr, 0, 0);
  }
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = kBufferGroup;
  io_uring_sqe_set_data64(sqe, uring_token(c, kRecvOp));
  c.recv_armed = true;
}

// One send in flight per connection: what send_due appends meanwhile waits
// in c.out and leaves when this one completes (the kernel keeps the order).
void LoadWorker::uring_send_pending(Connection& c) {
  if (c.send_in_flight || c.out.empty()) return;
  c.sending.swap(c.out);  // c.out keeps the old buffer's capacity: no allocation per request
  c.out.clear();
  c.out_head = 0;
  c.sending_head = 0;
  uring_submit_send(c);
}

void LoadWorker::uring_submit_send(Connection& c) {
  io_uring_sqe* sqe = uring_sqe();
  const char* data = c.sending.data() + c.sending_head;
  const size_t n = c.sending.size() - c.sending_head;
  if (c.file_registered) {
    io_uring_prep_send(sqe, static_cast<int>(&c - connections_.data()), data, n, MSG_NOSIGNAL);
    sqe->flags |= IOSQE_FIXED_FILE;
  } else {
    io_uring_prep_send(sqe, c.fd, data, n, MSG_NOSIGNAL);
  }
  io_uring_sqe_set_data64(sqe, uring_token(c, kSendOp));
  c.send_in_flight = true;
}

// The socket is going away (drop): cancel what is in flight, keep a send's
// bytes alive until its completion, free the file slot, start a new generation.
void LoadWorker::uring_detach(Connection& c) {
  auto cancel = [&](uint64_t op) {
    io_uring_sqe* sqe = uring_sqe();
    io_uring_prep_cancel64(sqe, uring_token(c, op), 0);
    io_uring_sqe_set_data64(sqe, kIgnoreOp);
  };
  if (c.connect_armed) cancel(kConnectOp);
  if (c.recv_armed) cancel(kRecvOp);
  if (c.send_in_flight) {
    cancel(kSendOp);
    uring_->orphaned_sends[uring_token(c, kSendOp)] = std::move(c.sending);
  }
  if (c.file_registered) {
    const int none = -1;
    result_.syscalls += counting_;
    io_uring_register_files_update(&uring_->ring, static_cast<unsigned>(&c - connections_.data()), &none, 1);
  }
  c.connect_armed = c.recv_armed = c.send_in_flight = c.file_registered = false;
  c.sending.clear();
  c.sending_head = 0;
  ++c.generation;
}

size_t LoadWorker::uring_wait_and_handle(int64_t timeout_ns) {
  UringState& u = *uring_;
  // The requests of this turn leave with this enter: stamp them now.
  timing_->stamp_queued([&](const InFlightRequest& r) {
    if (mix_ && timing_->in_window(r.intended_ns)) mix_->on_sent(r.endpoint);
  });
  if (timeout_ns == 0) {
    io_uring_submit_and_get_events(&u.ring);  // busy-poll: submit and peek, never sleep
  } else {
    io_uring_cqe* first = nullptr;
    __kernel_timespec ts{};
    if (timeout_ns > 0) {
      ts.tv_sec = timeout_ns / 1'000'000'000;
      ts.tv_nsec = timeout_ns % 1'000'000'000;
    }
    io_uring_submit_and_wait_timeout(&u.ring, &first, 1, timeout_ns > 0 ? &ts : nullptr, nullptr);
  }
  size_t handled = 0;
  io_uring_cqe* cqe;
  unsigned head;
  io_uring_for_each_cqe(&u.ring, head, cqe) {
    uring_handle(*cqe);
    ++handled;
  }
  io_uring_cq_advance(&u.ring, static_cast<unsigned>(handled));
  u.buffers.publish();
  return handled;
}

void LoadWorker::uring_handle(const io_uring_cqe& cqe) {
  UringState& u = *uring_;
  const uint64_t data = cqe.user_data;
  const uint64_t op = data & kOpMask;
  if (op == kIgnoreOp) return;
  const bool has_buffer = (cqe.flags & IORING_CQE_F_BUFFER) != 0;
  const auto bid = static_cast<uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
  Connection& c = connections_[data >> 32];
  if (((data >> 8) & kGenerationMask) != (c.generation & kGenerationMask)) {
    // A completion of a socket already dropped: give back what it holds.
    if (has_buffer) u.buffers.give_back(bid);
    if (op == kSendOp) u.orphaned_sends.erase(data);
    return;
  }
  const int res = cqe.res;
  if (op == kConnectOp) {
    c.connect_armed = false;
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    on_connect_result(c, res < 0 ? -res : err, res > 0 && (res & (POLLERR | POLLHUP)) != 0);
    return;
  }
  if (op == kSendOp) {
    c.send_in_flight = false;
    if (res < 0) {
      on_peer_closed(c, monotonic_ns(), &result_.errors.write);
      return;
    }
    c.sending_head += static_cast<size_t>(res);
    if (c.sending_head < c.sending.size()) {
      uring_submit_send(c);  // a short send: the rest of the same bytes
      return;
    }
    c.sending.clear();
    c.sending_head = 0;
    uring_send_pending(c);
    return;
  }
  // kRecvOp
  if (!(cqe.flags & IORING_CQE_F_MORE)) c.recv_armed = false;
  if (res > 0) {
    const int64_t received = timing_->now();
    const bool still_open = on_bytes(c, std::string_view(u.buffers.data(bid), static_cast<size_t>(res)), received);
    u.buffers.give_back(bid);
    if (still_open && !c.recv_armed) uring_arm_recv(c);
    return;
  }
  if (has_buffer) u.buffers.give_back(bid);
  if (res == -ENOBUFS) {  // every buffer was in use: they return with this batch; read again
    if (!c.recv_armed) uring_arm_recv(c);
    return;
  }
  on_peer_closed(c, monotonic_ns(), &result_.errors.read);  // EOF (0) or a socket error
}

// After the last drop: hand the cancellations to the kernel and collect their
// completions (bounded), so no send is left reading freed memory.
void LoadWorker::uring_finish() {
  const int64_t deadline = monotonic_ns() + 200'000'000;
  while (!uring_->orphaned_sends.empty() && monotonic_ns() < deadline) uring_wait_and_handle(10'000'000);
  uring_wait_and_handle(0);
}

}  // namespace tailscope::load
