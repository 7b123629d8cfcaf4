// Scheduling and join delays of a trace: the time between a client span and
// the server span it calls (before the server starts, after it ends), the
// launch stagger of sibling client spans, and the delays tailscope's own async
// probe recorded as span tags.
//
// RPC pairs come from span.kind tags where both sides carry them; real
// exports often do not (DeathStarBench's spans have no span.kind), so a child
// in another service or process than its parent is read as the server side of
// its parent, and DeathStarBench's <call>_client / <call>_server naming pairs
// spans inside one process. Every pair records the rule that made it.
#pragma once

#include <cstdint>
#include <vector>

#include "analyze/trace_analysis.h"

namespace tailscope::analyze {

// Sibling client spans starting within this much of the first one's start
// are one fan-out launch (docs/critical-path.md, "Launch stagger").
inline constexpr std::int64_t kDefaultStaggerWindowNs = 1'000'000;

class DelayExtractor {
 public:
  // `names` (may be null: no naming rule) resolves operation names for the
  // <call>_client / <call>_server rule.
  explicit DelayExtractor(const trace::NameTable* names = nullptr,
                          std::int64_t stagger_window_ns = kDefaultStaggerWindowNs)
      : names_(names), stagger_window_ns_(stagger_window_ns) {}

  // Fills rpc_delays, pairing, launch_stagger, probe_* and delay_on_path_ns
  // (needs analysis.path); negative RPC delays are clamped and counted as
  // clock skew.
  void extract(const SpanTree& tree, TraceAnalysis& analysis);
  std::int64_t stagger_window_ns() const { return stagger_window_ns_; }

 private:
  const trace::NameTable* names_;
  std::int64_t stagger_window_ns_;
  std::vector<std::uint8_t> paired_client_;  // per span: 1 when it is the client side of a pair
  std::vector<std::uint32_t> clients_;       // scratch: paired client children of one parent
};

// Whether `parent` -> `child` is an RPC edge and by which rule (false when the
// tags say it is not, e.g. producer/consumer or a tagged internal span).
bool rpc_pair_rule(const SpanTree& tree, const trace::NameTable* names, std::uint32_t parent, std::uint32_t child,
                   PairRule* rule);

}  // namespace tailscope::analyze
