#include "net/uring.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tailscope::net {

std::string uring_error_text(int err) { return std::strerror(err < 0 ? -err : err); }

std::span<const UringSetup> uring_setup_candidates() {
  static const UringSetup candidates[] = {
      {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, "single_issuer+defer_taskrun"},
      {IORING_SETUP_COOP_TASKRUN, "coop_taskrun"},
      {0, "default"},
  };
  return candidates;
}

int init_uring(io_uring* ring, unsigned sq_entries, unsigned cq_entries, unsigned flags, int sq_cpu) {
  io_uring_params p{};
  p.flags = flags | IORING_SETUP_CQSIZE;
  p.cq_entries = cq_entries;
  if (flags & IORING_SETUP_SQPOLL) {
    p.sq_thread_idle = 50;  // ms of idleness before the kernel thread sleeps
    if (sq_cpu >= 0) {
      p.flags |= IORING_SETUP_SQ_AFF;
      p.sq_thread_cpu = static_cast<unsigned>(sq_cpu);
    }
  }
  return io_uring_queue_init_params(sq_entries, ring, &p);
}

int UringBufferRing::setup(io_uring* ring) {
  ring_bytes_ = count_ * sizeof(io_uring_buf);
  void* mem = ::mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (mem == MAP_FAILED) return -errno;
  br_ = static_cast<io_uring_buf_ring*>(mem);
  io_uring_buf_ring_init(br_);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<uint64_t>(br_);
  reg.ring_entries = count_;
  reg.bgid = group_;
  const int r = io_uring_register_buf_ring(ring, &reg, 0);
  if (r < 0) {
    release();
    return r;
  }
  ring_ = ring;
  // Not zeroed: pages are touched only when the kernel fills them.
  storage_.reset(new char[static_cast<size_t>(count_) * bytes_]);
  for (unsigned bid = 0; bid < count_; ++bid) give_back(static_cast<uint16_t>(bid));
  publish();
  return 0;
}

void UringBufferRing::give_back(uint16_t bid) {
  io_uring_buf_ring_add(br_, storage_.get() + static_cast<size_t>(bid) * bytes_, bytes_, bid,
                        io_uring_buf_ring_mask(count_), added_++);
}

void UringBufferRing::publish() {
  if (added_ == 0) return;
  io_uring_buf_ring_advance(br_, added_);
  added_ = 0;
}

void UringBufferRing::release() {
  if (ring_ != nullptr) io_uring_unregister_buf_ring(ring_, group_);
  if (br_ != nullptr) ::munmap(br_, ring_bytes_);
  br_ = nullptr;
  ring_ = nullptr;
}

bool wait_for_uring_tag(io_uring* ring, uint64_t tag, io_uring_cqe** out) {
  for (int tries = 0; tries < 64; ++tries) {
    __kernel_timespec ts{1, 0};
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe_timeout(ring, &cqe, &ts) != 0) return false;
    if (io_uring_cqe_get_data64(cqe) == tag) {
      *out = cqe;
      return true;
    }
    io_uring_cqe_seen(ring, cqe);
  }
  return false;
}

std::string probe_multishot_recv(io_uring* ring, uint16_t group, bool fixed_files) {
  constexpr uint64_t kProbeRecvTag = 1;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return "socketpair: " + uring_error_text(errno);
  int target = sv[0];
  if (fixed_files) {
    if (io_uring_register_files_update(ring, 0, &sv[0], 1) != 1)
      fixed_files = false;
    else
      target = 0;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  io_uring_prep_recv_multishot(sqe, target, nullptr, 0, 0);
  sqe->flags |= IOSQE_BUFFER_SELECT | (fixed_files ? IOSQE_FIXED_FILE : 0);
  sqe->buf_group = group;
  io_uring_sqe_set_data64(sqe, kProbeRecvTag);
  io_uring_submit(ring);
  std::string reason;
  [[maybe_unused]] ssize_t w = ::write(sv[1], "x", 1);
  io_uring_cqe* cqe = nullptr;
  if (!wait_for_uring_tag(ring, kProbeRecvTag, &cqe))
    reason = "no completion within 1 s";
  else if (cqe->res < 0)
    reason = "multishot recv failed: " + uring_error_text(cqe->res);
  else if (!(cqe->flags & IORING_CQE_F_MORE))
    reason = "recv completed without IORING_CQE_F_MORE (not multishot)";
  if (cqe != nullptr) io_uring_cqe_seen(ring, cqe);
  ::close(sv[1]);  // EOF ends the multishot recv
  ::close(sv[0]);
  if (fixed_files) {
    const int none = -1;
    io_uring_register_files_update(ring, 0, &none, 1);
  }
  return reason;
}

}  // namespace tailscope::net
