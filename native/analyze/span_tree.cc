#include "analyze/span_tree.h"

#include <algorithm>
#include <bit>

namespace tailscope::analyze {

void SpanTree::index_span_ids(Warnings& warnings) {
  const std::size_t n = size();
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, 2 * n));
  slots_.assign(capacity, kNoSpan);
  duplicate_.assign(n, 0);
  const std::size_t mask = capacity - 1;
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::string_view id = trace_->span_id(trace_->spans[i]);
    for (std::size_t slot = trace::quick_hash(id) & mask;; slot = (slot + 1) & mask) {
      if (slots_[slot] == kNoSpan) {
        slots_[slot] = i;
        break;
      }
      if (trace_->span_id(trace_->spans[slots_[slot]]) == id) {
        duplicate_[i] = 1;
        warnings.add(Warning::kDuplicateSpanId);
        break;
      }
    }
  }
}

std::uint32_t SpanTree::find_span_id(std::string_view id) const {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t slot = trace::quick_hash(id) & mask;; slot = (slot + 1) & mask) {
    if (slots_[slot] == kNoSpan) return kNoSpan;
    if (trace_->span_id(trace_->spans[slots_[slot]]) == id) return slots_[slot];
  }
}

void SpanTree::build(const trace::Trace& trace, Warnings& warnings) {
  trace_ = &trace;
  root_ = kNoSpan;
  const std::size_t n = trace.spans.size();
  start_.resize(n);
  end_.resize(n);
  parent_.assign(n, kNoSpan);
  depth_.assign(n, -1);
  child_begin_.assign(n + 1, 0);
  child_list_.clear();
  preorder_.clear();
  if (n == 0) {
    warnings.add(Warning::kEmptyTrace);
    return;
  }

  for (std::size_t i = 0; i < n; ++i) {
    const trace::Span& s = trace.spans[i];
    std::int64_t start = s.start_ns;
    std::int64_t duration = s.duration_ns;
    if (duration < 0) {
      warnings.add(Warning::kNegativeDuration);
      duration = 0;
    }
    if (start > kMaxTimeNs || start < -kMaxTimeNs || duration > kMaxTimeNs) {
      warnings.add(Warning::kTimeOutOfRange);
      start = std::clamp(start, -kMaxTimeNs, kMaxTimeNs);
      duration = std::min(duration, kMaxTimeNs);
    }
    start_[i] = start;
    end_[i] = start + duration;
  }

  index_span_ids(warnings);

  // Resolve parents; collect root candidates.
  std::uint32_t best_root = kNoSpan;
  std::uint32_t best_orphan = kNoSpan;
  std::size_t roots = 0;
  auto better = [&](std::uint32_t a, std::uint32_t b) {  // is a a better root than b?
    if (b == kNoSpan) return true;
    const std::int64_t da = end_[a] - start_[a], db = end_[b] - start_[b];
    if (da != db) return da > db;
    return start_[a] < start_[b];
  };
  for (std::uint32_t i = 0; i < n; ++i) {
    if (duplicate_[i]) continue;
    const trace::Span& s = trace.spans[i];
    if (s.parent_ref == trace::RefType::kNone) {
      ++roots;
      if (better(i, best_root)) best_root = i;
      continue;
    }
    const std::uint32_t p = find_span_id(trace.parent_span_id(s));
    if (p == kNoSpan) {
      warnings.add(Warning::kOrphanSpan);
      if (better(i, best_orphan)) best_orphan = i;
    } else if (p == i) {
      warnings.add(Warning::kCycle);
    } else {
      parent_[i] = p;
    }
  }
  if (roots > 1) warnings.add(Warning::kMultipleRoots, roots - 1);
  root_ = best_root;
  if (root_ == kNoSpan) {
    root_ = best_orphan;
    warnings.add(Warning::kMissingRoot);
  }

  // Spans whose parent chain loops: walk each chain once (state per span:
  // 0 unknown, 1 on the current walk, 2 reaches a top, 3 in or under a cycle).
  {
    std::vector<std::uint8_t>& state = duplicate_;  // reuse: duplicates are tops-to-skip
    for (std::uint32_t i = 0; i < n; ++i) state[i] = state[i] ? 2 : 0;
    std::uint64_t cyclic = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (state[i] != 0) continue;
      stack_.clear();
      std::uint32_t at = i;
      std::uint8_t outcome = 2;
      while (true) {
        if (state[at] == 1) {
          outcome = 3;
          break;
        }
        if (state[at] != 0) {
          outcome = state[at];
          break;
        }
        state[at] = 1;
        stack_.push_back(at);
        if (parent_[at] == kNoSpan) break;
        at = parent_[at];
      }
      for (std::uint32_t s : stack_) state[s] = outcome;
      if (outcome == 3) cyclic += stack_.size();
    }
    if (cyclic > 0) warnings.add(Warning::kCycle, cyclic);
  }

  // Children lists (CSR), from spans whose parent resolved.
  for (std::uint32_t i = 0; i < n; ++i) {
    if (parent_[i] != kNoSpan) ++child_begin_[parent_[i] + 1];
  }
  for (std::size_t i = 0; i < n; ++i) child_begin_[i + 1] += child_begin_[i];
  child_list_.resize(child_begin_[n]);
  fill_.assign(child_begin_.begin(), child_begin_.end() - 1);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (parent_[i] != kNoSpan) child_list_[fill_[parent_[i]]++] = i;
  }
  for (std::size_t i = 0; i < n; ++i) {
    auto first = child_list_.begin() + child_begin_[i];
    auto last = child_list_.begin() + child_begin_[i + 1];
    if (last - first > 1) {
      std::sort(first, last, [&](std::uint32_t a, std::uint32_t b) {
        return start_[a] != start_[b] ? start_[a] < start_[b] : a < b;
      });
    }
  }

  if (root_ == kNoSpan) return;  // every span is in a cycle

  // Preorder from the root (explicit stack: traces can be very deep).
  stack_.clear();
  stack_.push_back(root_);
  depth_[root_] = 0;
  while (!stack_.empty()) {
    const std::uint32_t s = stack_.back();
    stack_.pop_back();
    preorder_.push_back(s);
    const auto kids = children(s);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) {
      depth_[*it] = depth_[s] + 1;
      stack_.push_back(*it);
    }
  }

  // Children that overflow their parent (clipped later) or lie outside it
  // (dropped later); across services that is clock skew between hosts.
  for (std::uint32_t c : preorder_) {
    const std::uint32_t p = parent_[c];
    if (p == kNoSpan || c == root_) continue;
    const bool outside = start_[c] >= start_[p] ? start_[c] >= end_[p] : end_[c] <= start_[p];
    const bool overflows = start_[c] < start_[p] || end_[c] > end_[p];
    if (outside) {
      warnings.add(Warning::kChildOutsideParent);
    } else if (overflows) {
      warnings.add(Warning::kChildOutlivesParent);
    }
    if ((outside || overflows) && trace.spans[c].service != trace.spans[p].service) {
      warnings.add(Warning::kClockSkew);
    }
  }
}

}  // namespace tailscope::analyze
