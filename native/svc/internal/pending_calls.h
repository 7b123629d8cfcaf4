// The multiplexed channel's calls in flight on one connection
// (svc/multiplexed_channel.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "svc/rpc_call.h"

namespace tailscope::svc::internal {

// A request id is the slot index (low 32 bits) and the slot's generation
// (high 32 bits): a late response or a timeout for a slot already reused
// finds another generation and does nothing. Slots are reused, so nothing
// allocates once the table has grown to the calls in flight.
class PendingCalls {
 public:
  uint64_t add(CallCallback done);
  // The callback of `id`, removed; empty when the call already ended.
  CallCallback take(uint64_t id);
  // Every pending callback, removed.
  std::vector<CallCallback> take_all();
  size_t size() const { return in_use_; }

 private:
  struct Slot {
    uint32_t generation = 0;
    bool used = false;
    CallCallback done;
  };
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  size_t in_use_ = 0;
};

}  // namespace tailscope::svc::internal
