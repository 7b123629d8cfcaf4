// What the analyzer learns from one trace: its critical path, the time each
// service and operation holds on it, the RPC scheduling and join delays, and
// the projected end-to-end latency under each what-if scenario.
#pragma once

#include <cstdint>
#include <string>
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

// A client span and the server span it waits for: scheduling delay = server
// start - client start, join delay = client end - server end (raw times,
// clamped at 0; a negative value is counted as clock skew).
struct RpcDelay {
  std::uint32_t client_span;
  std::uint32_t server_span;
  std::int64_t scheduling_ns;
  std::int64_t join_ns;
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
  std::vector<std::int64_t> probe_scheduling_ns;  // from tailscope's async probe tags
  std::vector<std::int64_t> probe_join_ns;
  std::int64_t delay_on_path_ns = 0;   // path time of client spans waiting on a server span
  std::vector<WhatIfOutcome> what_if;  // one per scenario
  Warnings warnings;
};

}  // namespace tailscope::analyze
