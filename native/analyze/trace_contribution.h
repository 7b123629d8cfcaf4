// What one trace adds to the run's aggregates (CriticalPathAggregator::add),
// detached from the trace and the analyzer's buffers: a worker of
// `tailscope-critpath --jobs N` builds it beside the trace, and the main thread
// adds the contributions in input order, so every sum and distribution sees
// the same values in the same order as with one job (the output is
// byte-identical). Names are NameIds of the table the trace was read with;
// remap() moves them to the run's table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyze/trace_analysis.h"
#include "trace/trace.h"

namespace tailscope::analyze {

struct TraceContribution {
  struct RpcSample {  // one RPC pair: the edge it belongs to and its delays
    trace::NameId client_service;
    trace::NameId server_service;
    trace::NameId server_operation;
    std::int64_t scheduling_ns;
    std::int64_t join_ns;
  };
  struct ProbeCall {  // a span carrying tailscope's probe tags (-1: tag absent)
    trace::NameId service;
    trace::NameId operation;
    std::int64_t scheduling_ns;
    std::int64_t join_ns;
  };

  std::string trace_id;
  Warnings warnings;
  bool analyzed = false;
  std::int64_t end_to_end_ns = 0;
  std::vector<OperationTime> by_operation;
  std::vector<ServiceTime> by_service;
  // (service, operation) of the path spans, at most kMaxPathKeyOperations,
  // and how many path spans lie beyond them.
  std::vector<std::pair<trace::NameId, trace::NameId>> path;
  std::uint64_t path_spans_beyond_key = 0;
  std::vector<RpcSample> rpcs;
  std::vector<std::int64_t> probe_scheduling_ns;
  std::vector<std::int64_t> probe_join_ns;
  std::vector<ProbeCall> probe_calls;
  PairingCounts pairing;
  std::vector<std::int64_t> launch_stagger_ns;
  std::int64_t delay_on_path_ns = 0;
  std::vector<WhatIfOutcome> what_if;

  static constexpr std::size_t kMaxPathKeyOperations = 512;

  // Copies what the aggregator reads from `a` (and the trace it points to);
  // keeps the vectors' capacity.
  void assign(const TraceAnalysis& a);
  // Replaces every NameId x by to_run[x].
  void remap(const std::vector<trace::NameId>& to_run);
};

}  // namespace tailscope::analyze
