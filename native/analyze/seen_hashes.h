// The 64-bit hashes of the trace ids a run has met, to count a repeated id
// (Warning::kDuplicateTraceId): one array of slots, open addressing with
// linear probing, at most half full. std::unordered_set allocated a node per
// trace and cost 1.6 % of a one-job tailscope-critpath run (perf,
// docs/measurements.md#trace-analyzer); here a trace costs one probe into an
// array of 8-byte slots (16 bytes a trace at worst, against ~40).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tailscope::analyze {

class SeenHashes {
 public:
  // True when `hash` had not been inserted before (it now is).
  bool insert(std::uint64_t hash) {
    if (hash == kEmpty) {  // the empty slot's marker is kept aside
      const bool first = !has_empty_marker_;
      has_empty_marker_ = true;
      size_ += first ? 1 : 0;
      return first;
    }
    if (2 * (size_ + 1) > slots_.size()) grow();
    if (!place(slots_, hash)) return false;
    ++size_;
    return true;
  }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint64_t kEmpty = 0;

  // The slot to start probing at: the hash's top bits after a multiply, so a
  // hash function with weak low bits still spreads.
  static std::size_t home(std::uint64_t hash, std::size_t mask) {
    return static_cast<std::size_t>((hash * 0x9E3779B97F4A7C15ull) >> 32) & mask;
  }
  // False when `hash` is there already.
  static bool place(std::vector<std::uint64_t>& slots, std::uint64_t hash) {
    const std::size_t mask = slots.size() - 1;
    for (std::size_t i = home(hash, mask);; i = (i + 1) & mask) {
      if (slots[i] == hash) return false;
      if (slots[i] == kEmpty) {
        slots[i] = hash;
        return true;
      }
    }
  }
  void grow() {
    std::vector<std::uint64_t> bigger(slots_.empty() ? 1024 : 2 * slots_.size(), kEmpty);
    for (const std::uint64_t h : slots_) {
      if (h != kEmpty) place(bigger, h);
    }
    slots_.swap(bigger);
  }

  std::vector<std::uint64_t> slots_;  // a power of two in size
  std::size_t size_ = 0;
  bool has_empty_marker_ = false;
};

}  // namespace tailscope::analyze
