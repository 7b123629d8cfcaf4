// The parent/child tree of one trace, repaired: times normalized, duplicate
// ids ignored, parents resolved, one root chosen, cycles and orphans cut off.
// Every repair is counted in Warnings. All three critical-path algorithms start
// from this tree; each then applies its own clipping rules.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "analyze/warnings.h"
#include "trace/trace.h"

namespace tailscope::analyze {

inline constexpr std::uint32_t kNoSpan = 0xFFFFFFFFu;
// Times are clamped to ±2^61 ns (73 years) so start + duration never overflows.
inline constexpr std::int64_t kMaxTimeNs = std::int64_t{1} << 61;

class SpanTree {
 public:
  // Rebuilds the tree for `trace` (which must outlive the tree's use);
  // reuses memory across traces.
  void build(const trace::Trace& trace, Warnings& warnings);

  const trace::Trace& trace() const { return *trace_; }
  const trace::Span& span(std::uint32_t i) const { return trace_->spans[i]; }
  std::size_t size() const { return start_.size(); }
  bool has_root() const { return root_ != kNoSpan; }
  std::uint32_t root() const { return root_; }

  // Normalized times: duration >= 0, |start| <= kMaxTimeNs.
  std::int64_t start(std::uint32_t i) const { return start_[i]; }
  std::int64_t end(std::uint32_t i) const { return end_[i]; }
  std::uint32_t parent(std::uint32_t i) const { return parent_[i]; }
  // Children of a span reachable from the root, by start time then input order.
  std::span<const std::uint32_t> children(std::uint32_t i) const {
    return std::span<const std::uint32_t>(child_list_).subspan(child_begin_[i], child_begin_[i + 1] - child_begin_[i]);
  }
  // Spans reachable from the root, parents before children, siblings by start.
  const std::vector<std::uint32_t>& preorder() const { return preorder_; }
  bool in_tree(std::uint32_t i) const { return depth_[i] >= 0; }
  int depth(std::uint32_t i) const { return depth_[i]; }

 private:
  std::uint32_t find_span_id(std::string_view id) const;
  void index_span_ids(Warnings& warnings);

  const trace::Trace* trace_ = nullptr;
  std::uint32_t root_ = kNoSpan;
  std::vector<std::int64_t> start_;
  std::vector<std::int64_t> end_;
  std::vector<std::uint32_t> parent_;
  std::vector<std::uint8_t> duplicate_;
  std::vector<std::uint32_t> child_begin_;
  std::vector<std::uint32_t> child_list_;
  std::vector<std::uint32_t> preorder_;
  std::vector<int> depth_;
  std::vector<std::uint32_t> slots_;  // open-addressing index: span id -> span
  std::vector<std::uint32_t> stack_;
  std::vector<std::uint32_t> fill_;
};

}  // namespace tailscope::analyze
