#include "svc/internal/pending_calls.h"

#include <utility>

namespace tailscope::svc::internal {

uint64_t PendingCalls::add(CallCallback done) {
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[index];
  s.used = true;
  s.done = std::move(done);
  ++in_use_;
  return (static_cast<uint64_t>(s.generation) << 32) | index;
}

CallCallback PendingCalls::take(uint64_t id) {
  const auto index = static_cast<uint32_t>(id);
  if (index >= slots_.size()) return {};
  Slot& s = slots_[index];
  if (!s.used || s.generation != static_cast<uint32_t>(id >> 32)) return {};
  CallCallback done = std::move(s.done);
  s.done = nullptr;
  s.used = false;
  ++s.generation;
  free_.push_back(index);
  --in_use_;
  return done;
}

std::vector<CallCallback> PendingCalls::take_all() {
  std::vector<CallCallback> out;
  for (uint32_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].used) out.push_back(take((static_cast<uint64_t>(slots_[i].generation) << 32) | i));
  return out;
}

}  // namespace tailscope::svc::internal
