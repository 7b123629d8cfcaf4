// What the analyzer learns from one trace: its critical path, the time each
// service and operation holds on it, the RPC scheduling and join delays, and
// the projected end-to-end latency under each what-if scenario.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/critical_path.h"
#include "analyze/span_tree.h"
#include "analyze/warnings.h"
#include "trace/trace.h"

namespace tailscope::analyze {

struct WhatIfScenario {
  std::string name;  // "remove:<service>" or "no_delays"
  std::vector<trace::NameId> removed_services;
  bool remove_delays = false;  // RPC scheduling/join delay and probe delays
};

struct OperationTime {
  trace::NameId service;
  trace::NameId operation;
  std::int64_t exclusive_ns;
};

struct ServiceTime {
  trace::NameId service;
  std::int64_t exclusive_ns;
};

// Which rule made a (client, server) pair (docs/critical-path.md, "RPC
// pairs"): both span.kind tags; else, with a tag absent, a child in another
// service/process than its parent; else DeathStarBench's naming
// (<call>_client parent, <call>_server child) inside one process.
enum class PairRule : std::uint8_t { kTag, kCrossProcess, kName, kCount };
inline constexpr std::array<std::string_view, static_cast<std::size_t>(PairRule::kCount)> kPairRuleNames = {
    "span_kind_tag", "cross_process_parent", "client_server_name"};

// A client span and the server span it waits for: scheduling delay = server
// start - client start, join delay = client end - server end (raw times,
// clamped at 0; a negative value is counted as clock skew).
struct RpcDelay {
  std::uint32_t client_span;
  std::uint32_t server_span;
  std::int64_t scheduling_ns;
  std::int64_t join_ns;
  PairRule rule = PairRule::kTag;
};

// How the RPC pairs of a trace were found, for the result's "pairing" block.
struct PairingCounts {
  std::array<std::uint64_t, static_cast<std::size_t>(PairRule::kCount)> by_rule{};
  // Cross-process pairs whose names also follow the <call>_client/_server
  // convention: the naming confirms the structural rule.
  std::uint64_t name_confirmed = 0;
  // Further server children of one client span with the first one's service
  // and operation (retries): not paired, counted.
  std::uint64_t retried_server_children = 0;

  void add(const PairingCounts& o) {
    for (std::size_t i = 0; i < by_rule.size(); ++i) by_rule[i] += o.by_rule[i];
    name_confirmed += o.name_confirmed;
    retried_server_children += o.retried_server_children;
  }
};

// A client span launched after an earlier sibling client span of the same
// parent, within the stagger window: stagger = its start - the first start.
struct LaunchStagger {
  std::uint32_t parent_span;
  std::uint32_t client_span;
  std::int64_t stagger_ns;
};

struct WhatIfOutcome {
  std::int64_t end_to_end_ns = 0;
  std::vector<OperationTime> by_operation;  // on the recomputed path
};

struct TraceAnalysis {
  const trace::Trace* trace = nullptr;
  const SpanTree* tree = nullptr;
  bool analyzed = false;  // false when the trace has no usable root
  std::uint32_t root = kNoSpan;
  std::int64_t start_ns = 0;
  std::int64_t end_to_end_ns = 0;
  CriticalPath path;
  std::vector<OperationTime> by_operation;  // in path order, each (service, operation) once
  std::vector<ServiceTime> by_service;      // in path order, each service once
  std::vector<RpcDelay> rpc_delays;
  PairingCounts pairing;
  std::vector<LaunchStagger> launch_stagger;
  std::vector<std::int64_t> probe_scheduling_ns;  // from tailscope's async probe tags
  std::vector<std::int64_t> probe_join_ns;
  std::vector<std::uint32_t> probe_spans;  // spans carrying either probe tag, in preorder
  // Path time of client spans waiting on a server span; meaningful only when
  // rpc_delays is not empty (else no RPC was found and the figure is unavailable).
  std::int64_t delay_on_path_ns = 0;
  std::vector<WhatIfOutcome> what_if;  // one per scenario
  Warnings warnings;
};

}  // namespace tailscope::analyze
