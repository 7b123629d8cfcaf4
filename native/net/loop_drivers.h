// Several net::LoopDriven components on one event loop. A loop hands its
// tagged events to exactly one LoopDriven (svc/server.h EventLoopServer::drive);
// the coroutine model's loops drive both their RPC client connections
// (svc/multiplexed_channel.h ChannelLoop) and their store connections
// (svc/stores/store_loop.h), so a loop drives a LoopDrivers that routes each
// event to the member whose token it carries and services every member.
//
// Tokens: member i sets bits 56..62 to i (member_bits(i)) besides kTokenTag;
// the rest (bits 0..55) are its own. Member 0's bits are zero, so a member
// that tags its tokens with a user-space pointer (the ChannelLoop) needs no
// change as member 0: pointers never reach bit 56.
//
// Loop thread only (members are added before the loop starts).
#pragma once

#include <cstdint>
#include <vector>

#include "net/event_loop.h"

namespace tailscope::net {

class LoopDrivers final : public LoopDriven {
 public:
  static constexpr int kMemberShift = 56;
  static constexpr size_t kMaxMembers = 128;  // bits 56..62
  static constexpr uint64_t kPayloadMask = (uint64_t{1} << kMemberShift) - 1;
  static constexpr uint64_t member_bits(size_t index) { return static_cast<uint64_t>(index) << kMemberShift; }

  // Adds `d` (not owned; outlives the loop's thread) and returns the bits it
  // ORs into its tokens. Throws std::length_error beyond kMaxMembers.
  uint64_t add(LoopDriven* d);
  size_t size() const { return members_.size(); }

  // Routes by the member bits; an event of no member (a stale token) is dropped.
  void on_ready(const ReadyEvent& e) override;
  // Every member's service(), in the order they were added; the earliest due time.
  int64_t service() override;

 private:
  std::vector<LoopDriven*> members_;
};

}  // namespace tailscope::net
