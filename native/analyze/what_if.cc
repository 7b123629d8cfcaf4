#include "analyze/what_if.h"

#include <algorithm>

namespace tailscope::analyze {

namespace {
std::int64_t probe_ns(std::int64_t v) { return v < 0 ? 0 : v; }
}  // namespace

bool WhatIfRetimer::is_rpc(std::uint32_t parent, std::uint32_t child) const {
  return paired_client_of_[child] == parent;
}

void WhatIfRetimer::retime_span(const SpanTree& tree, const ClippedTree& clipped, const WhatIfScenario& scenario,
                                std::uint32_t s) {
  const bool removed = std::find(scenario.removed_services.begin(), scenario.removed_services.end(),
                                 tree.span(s).service) != scenario.removed_services.end();
  const auto kids = clipped.children(s);
  if (kids.empty()) {
    new_duration_[s] = removed ? 0 : clipped.duration(s);
    return;
  }
  by_start_.assign(kids.begin(), kids.end());
  std::sort(by_start_.begin(), by_start_.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (clipped.start(a) != clipped.start(b)) return clipped.start(a) < clipped.start(b);
    if (clipped.end(a) != clipped.end(b)) return clipped.end(a) < clipped.end(b);
    return a < b;
  });
  for (std::uint32_t k = 0; k < by_start_.size(); ++k) position_[by_start_[k]] = k;
  by_end_.assign(by_start_.begin(), by_start_.end());
  std::sort(by_end_.begin(), by_end_.end(), [&](std::uint32_t a, std::uint32_t b) {
    return clipped.end(a) != clipped.end(b) ? clipped.end(a) < clipped.end(b) : position_[a] < position_[b];
  });

  std::int64_t last_end = 0;  // relative to the span's new start
  for (std::uint32_t k = 0; k < by_start_.size(); ++k) {
    const std::uint32_t c = by_start_[k];
    // Predecessor: the latest-ending sibling that ended by c's start and
    // comes before c in start order (zero-length ties cannot wait on c).
    auto it = std::upper_bound(by_end_.begin(), by_end_.end(), clipped.start(c),
                               [&](std::int64_t t, std::uint32_t x) { return t < clipped.end(x); });
    std::uint32_t pred = kNoSpan;
    while (it != by_end_.begin()) {
      --it;
      if (position_[*it] < k) {
        pred = *it;
        break;
      }
    }
    const std::int64_t gap = clipped.start(c) - (pred != kNoSpan ? clipped.end(pred) : clipped.start(s));
    std::int64_t removable = 0;
    if (scenario.remove_delays) {
      removable = is_rpc(s, c)
                      ? gap
                      : std::min(gap, probe_ns(tree.span(c).probe_scheduling_delay_ns) +
                                          (pred != kNoSpan ? probe_ns(tree.span(pred).probe_join_delay_ns) : 0));
    }
    const std::int64_t effective_gap = removed ? 0 : gap - removable;
    offset_[c] = (pred != kNoSpan ? offset_[pred] + new_duration_[pred] : 0) + effective_gap;
    last_end = std::max(last_end, offset_[c] + new_duration_[c]);
  }
  const std::uint32_t last = by_end_.back();
  const std::int64_t tail = clipped.end(s) - clipped.end(last);
  std::int64_t removable_tail = 0;
  if (scenario.remove_delays) {
    removable_tail = is_rpc(s, last) ? tail : std::min(tail, probe_ns(tree.span(last).probe_join_delay_ns));
  }
  new_duration_[s] = last_end + (removed ? 0 : tail - removable_tail);
}

void WhatIfRetimer::retime(const SpanTree& tree, const ClippedTree& clipped, const WhatIfScenario& scenario,
                           std::span<const RpcDelay> rpc_pairs, trace::Trace& out) {
  out.clear();
  const trace::Trace& in = tree.trace();
  out.trace_id = in.trace_id;
  if (!tree.has_root()) return;
  const std::size_t n = tree.size();
  new_duration_.assign(n, 0);
  offset_.assign(n, 0);
  new_start_.assign(n, 0);
  position_.assign(n, 0);
  paired_client_of_.assign(n, kNoSpan);
  for (const RpcDelay& pair : rpc_pairs) paired_client_of_[pair.server_span] = pair.client_span;
  const auto& preorder = tree.preorder();
  for (auto it = preorder.rbegin(); it != preorder.rend(); ++it) {  // children first
    if (clipped.alive(*it)) retime_span(tree, clipped, scenario, *it);
  }
  for (std::uint32_t s : preorder) {  // parents first
    if (!clipped.alive(s)) continue;
    new_start_[s] = s == tree.root() ? clipped.start(s) : new_start_[tree.parent(s)] + offset_[s];
    trace::Span span = in.spans[s];
    span.start_ns = new_start_[s];
    span.duration_ns = new_duration_[s];
    span.span_id = out.store(in.span_id(in.spans[s]));
    span.parent_span_id = out.store(in.parent_span_id(in.spans[s]));
    if (s == tree.root()) span.parent_ref = trace::RefType::kNone;  // an orphan root stays the root
    out.spans.push_back(span);
  }
}

}  // namespace tailscope::analyze
