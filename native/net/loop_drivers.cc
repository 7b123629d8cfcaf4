#include "net/loop_drivers.h"

#include <algorithm>
#include <stdexcept>

namespace tailscope::net {

uint64_t LoopDrivers::add(LoopDriven* d) {
  if (members_.size() >= kMaxMembers) throw std::length_error("LoopDrivers: more than 128 members on one loop");
  members_.push_back(d);
  return member_bits(members_.size() - 1);
}

void LoopDrivers::on_ready(const ReadyEvent& e) {
  const size_t index = static_cast<size_t>((e.token & ~kTokenTag) >> kMemberShift);
  if (index < members_.size()) members_[index]->on_ready(e);
}

int64_t LoopDrivers::service() {
  int64_t due_ns = INT64_MAX;
  for (LoopDriven* d : members_) due_ns = std::min(due_ns, d->service());
  return due_ns;
}

}  // namespace tailscope::net
