// What the non-blocking store clients share (the event-loop models: coroutine,
// pool-callback): a client per store system per event loop, driven on that
// loop's thread by a StoreLoop (svc/stores/store_loop.h), never blocking it.
// One file per client kind beside the blocking form: redis_client (hiredis'
// async API on our loop), memcached_client (our own text-protocol client),
// docstore_client (libpq's non-blocking API). When they may reconnect after
// a failed connect is one policy, reconnect_backoff.h.
//
// Every member runs on the loop's thread. An op ends exactly once through its
// `done`, on that thread — possibly before run() returns (an immediate
// failure). `done` must not start another op synchronously (the models post
// their continuation instead), so a client is never re-entered from its own
// completion.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "net/event_loop.h"
#include "svc/stores/store_client.h"

namespace tailscope::svc::stores {

using StoreDone = std::function<void(const StoreResult&)>;

// One descriptor of a client in its loop's poller. Tokens: the StoreLoop's
// base (kTokenTag, its member bits, the registration's slot) and a generation
// that changes with every new descriptor, so an event still queued for a
// descriptor already closed (or for an earlier one with the same number) is
// recognised and dropped.
class LoopRegistration {
 public:
  static constexpr int kGenerationShift = 16;                           // bits 0..15: the slot
  static constexpr uint64_t kGenerationMask = (uint64_t{1} << 40) - 1;  // bits 16..55
  LoopRegistration(net::EventLoop& events, uint64_t token_base) : events_(events), token_base_(token_base) {}
  ~LoopRegistration() { detach(); }
  LoopRegistration(const LoopRegistration&) = delete;
  LoopRegistration& operator=(const LoopRegistration&) = delete;

  // Registers fd (a new generation) with `interest`.
  void attach(int fd, uint32_t interest);
  // Changes the interest (a system call only when it changes).
  void want(uint32_t interest);
  // Unregisters, before the owner closes the descriptor. Tolerates a
  // descriptor the library already closed (libpq replaces its socket during a
  // handshake retry; the kernel dropped the registration with it).
  void detach();
  // Whether an event's token is this registration's current descriptor.
  bool current(uint64_t token) const { return fd_ >= 0 && token == token_now(); }
  int fd() const { return fd_; }

 private:
  uint64_t token_now() const { return token_base_ | ((generation_ & kGenerationMask) << kGenerationShift); }
  net::EventLoop& events_;
  uint64_t token_base_;
  uint64_t generation_ = 0;
  int fd_ = -1;
  uint32_t interest_ = 0;
};

// One store system's client on one loop.
class AsyncStoreClient {
 public:
  virtual ~AsyncStoreClient() = default;
  // Starts the op (connecting first when needed); it fails unavailable at deadline_ns at the latest.
  virtual void run(const StoreRequest& request, int64_t deadline_ns, StoreDone done) = 0;
  // A ready event of registration `sub` (its index among the client's registrations).
  virtual void on_ready(size_t sub, uint32_t ready) = 0;
  // Once per loop iteration: sends what run() queued, fails what is past its
  // deadline. Returns the next deadline (INT64_MAX: none).
  virtual int64_t service(int64_t now_ns) = 0;
  // Fails every op queued or in flight with `why` and closes the connections.
  virtual void close(const std::string& why) = 0;
};

// The failure an op ends with when the client cannot even try.
inline StoreResult unavailable(std::string why) { return {StoreStatus::kUnavailable, std::move(why)}; }

}  // namespace tailscope::svc::stores
