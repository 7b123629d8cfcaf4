// io_uring mechanics shared by the io-uring echo model and the load
// generator's io_uring path (--io uring), written once: ring setup with the
// newest task-run mode the kernel takes, a provided-buffer ring, and the
// multishot-recv probe. What each side does with a completion is its own.
#pragma once

#include <liburing.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace tailscope::net {

// strerror of an errno or a negative io_uring result.
std::string uring_error_text(int err);

// A ring setup mode, newest first in uring_setup_candidates(): SINGLE_ISSUER +
// DEFER_TASKRUN (6.1) run completions only when the owning thread enters the
// kernel to reap them (no task work interrupting the loop); COOP_TASKRUN
// (5.19) at least avoids the IPIs; default otherwise.
struct UringSetup {
  unsigned flags;
  const char* text;
};
std::span<const UringSetup> uring_setup_candidates();

// io_uring_queue_init_params with `flags` and a completion queue of
// cq_entries (multishot operations post many completions per submission);
// SQPOLL's kernel thread pinned to sq_cpu when >= 0. 0 or -errno.
int init_uring(io_uring* ring, unsigned sq_entries, unsigned cq_entries, unsigned flags, int sq_cpu = -1);

// A provided-buffer ring: `count` (a power of two) buffers of `bytes`,
// registered as buffer group `group`. Multishot recv picks a buffer per
// completion; the owner gives each back once it has consumed the bytes.
class UringBufferRing {
 public:
  UringBufferRing(unsigned count, unsigned bytes, uint16_t group) : count_(count), bytes_(bytes), group_(group) {}
  ~UringBufferRing() { release(); }
  UringBufferRing(const UringBufferRing&) = delete;
  UringBufferRing& operator=(const UringBufferRing&) = delete;

  // Registers with `ring`; 0 or -errno.
  int setup(io_uring* ring);
  // The ring is about to be torn down (which unregisters the buffers): only
  // the memory is ours to free then.
  void detach() { ring_ = nullptr; }
  const char* data(uint16_t bid) const { return storage_.get() + static_cast<size_t>(bid) * bytes_; }
  // Returns a buffer to the kernel; visible after publish() (once per batch of completions).
  void give_back(uint16_t bid);
  void publish();
  unsigned count() const { return count_; }
  unsigned bytes() const { return bytes_; }
  uint16_t group() const { return group_; }

 private:
  void release();
  unsigned count_, bytes_;
  uint16_t group_;
  io_uring* ring_ = nullptr;
  io_uring_buf_ring* br_ = nullptr;
  size_t ring_bytes_ = 0;
  int added_ = 0;
  std::unique_ptr<char[]> storage_;
};

// Does a multishot recv from buffer group `group` (already registered on
// `ring`) deliver and stay armed? "" if so, else the reason. With
// fixed_files the ring has a sparse file table and slot 0 is used.
// Completions of earlier probes on the same ring are consumed and ignored.
std::string probe_multishot_recv(io_uring* ring, uint16_t group, bool fixed_files);

// Waits (1 s at most per completion) for the completion whose user_data is
// `tag`, consuming others; the caller marks the one returned seen.
bool wait_for_uring_tag(io_uring* ring, uint64_t tag, io_uring_cqe** out);

}  // namespace tailscope::net
