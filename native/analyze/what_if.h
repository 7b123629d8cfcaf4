// What-if retiming: replays a trace with some time taken out and returns the
// trace as it would have run, so the critical path can be recomputed (not
// just subtracted: removing time can move the path to another branch).
//
// Model: inside a span, a child waits for the sibling that finished last
// before it started (its predecessor) or, without one, for the span's start;
// the gap in between is the span's own time. The span ends its original tail
// after its last child. Removing a service sets its spans' own time (gaps,
// tail, leaf duration) to 0; removing delays sets to 0 the gaps of a client
// span before and after its server child, and probe-measured delays. The
// (client, server) pairs are the ones the delay analysis found (tag,
// cross-process parent or <call>_client/_server name, retries not paired),
// so an untagged export gets the same what-if as a tagged one.
// With nothing removed the replay reproduces the input exactly.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "analyze/clipped_tree.h"
#include "analyze/span_tree.h"
#include "analyze/trace_analysis.h"
#include "trace/trace.h"

namespace tailscope::analyze {

class WhatIfRetimer {
 public:
  // `clipped` must be tree's Jaeger-style ClippedTree; `rpc_pairs` the
  // trace's RPC pairs (TraceAnalysis::rpc_delays, span indices of `tree`).
  // `out` receives the spans `clipped` keeps, with new times and the same ids.
  void retime(const SpanTree& tree, const ClippedTree& clipped, const WhatIfScenario& scenario,
              std::span<const RpcDelay> rpc_pairs, trace::Trace& out);

 private:
  void retime_span(const SpanTree& tree, const ClippedTree& clipped, const WhatIfScenario& scenario, std::uint32_t s);

  bool is_rpc(std::uint32_t parent, std::uint32_t child) const;

  // Per span: the client span it is the paired server of, or kNoSpan.
  std::vector<std::uint32_t> paired_client_of_;
  std::vector<std::int64_t> new_duration_;
  std::vector<std::int64_t> offset_;  // start relative to the parent's new start
  std::vector<std::int64_t> new_start_;
  std::vector<std::uint32_t> position_;
  std::vector<std::uint32_t> by_start_;
  std::vector<std::uint32_t> by_end_;
};

}  // namespace tailscope::analyze
