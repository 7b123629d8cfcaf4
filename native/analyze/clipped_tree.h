// A span tree's intervals after an algorithm's sanitizing rules: children
// clipped into their parents, children outside dropped (with their subtrees),
// parents processed before children so a child is clipped to its parent's
// already-clipped interval.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "analyze/span_tree.h"

namespace tailscope::analyze {

class ClippedTree {
 public:
  // Jaeger UI's rules (also used by the capstone model and by the what-if
  // retiming): a consumer child of a producer span is not blocking and is
  // pruned; a child starting at or after its parent's end, or ending at or
  // before its start, is dropped; overflowing children are clipped.
  void build_jaeger(const SpanTree& tree);
  // CRISP's rules: only CHILD_OF children count; a child is kept when it lies
  // within its parent, clipped when it overflows one side, and dropped when it
  // is outside or overflows both sides.
  void build_crisp(const SpanTree& tree);

  bool alive(std::uint32_t i) const { return alive_[i] != 0; }
  std::int64_t start(std::uint32_t i) const { return start_[i]; }
  std::int64_t end(std::uint32_t i) const { return end_[i]; }
  std::int64_t duration(std::uint32_t i) const { return end_[i] - start_[i]; }
  // Alive children, by start time then input order.
  std::span<const std::uint32_t> children(std::uint32_t i) const {
    return std::span<const std::uint32_t>(child_list_).subspan(child_begin_[i], child_begin_[i + 1] - child_begin_[i]);
  }

 private:
  template <typename Rule>
  void build(const SpanTree& tree, Rule rule);

  std::vector<std::uint8_t> alive_;
  std::vector<std::int64_t> start_;
  std::vector<std::int64_t> end_;
  std::vector<std::uint32_t> child_begin_;
  std::vector<std::uint32_t> child_list_;
};

}  // namespace tailscope::analyze
