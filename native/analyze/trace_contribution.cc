#include "analyze/trace_contribution.h"

#include <algorithm>

namespace tailscope::analyze {

void TraceContribution::assign(const TraceAnalysis& a) {
  trace_id = a.trace != nullptr ? a.trace->trace_id : std::string();
  warnings = a.warnings;
  analyzed = a.analyzed;
  end_to_end_ns = a.end_to_end_ns;
  by_operation.clear();
  by_service.clear();
  path.clear();
  path_spans_beyond_key = 0;
  rpcs.clear();
  probe_scheduling_ns.clear();
  probe_join_ns.clear();
  probe_calls.clear();
  pairing = {};
  launch_stagger_ns.clear();
  delay_on_path_ns = 0;
  what_if.clear();
  if (!a.analyzed) return;
  const std::vector<trace::Span>& spans = a.trace->spans;
  by_operation = a.by_operation;
  by_service = a.by_service;
  const std::size_t n = std::min(a.path.spans.size(), kMaxPathKeyOperations);
  for (std::size_t i = 0; i < n; ++i) {
    const trace::Span& s = spans[a.path.spans[i].span];
    path.emplace_back(s.service, s.operation);
  }
  path_spans_beyond_key = a.path.spans.size() - n;
  for (const RpcDelay& d : a.rpc_delays) {
    const trace::Span& client = spans[d.client_span];
    const trace::Span& server = spans[d.server_span];
    rpcs.push_back({client.service, server.service, server.operation, d.scheduling_ns, d.join_ns});
  }
  probe_scheduling_ns = a.probe_scheduling_ns;
  probe_join_ns = a.probe_join_ns;
  for (std::uint32_t s : a.probe_spans) {
    const trace::Span& span = spans[s];
    probe_calls.push_back({span.service, span.operation, span.probe_scheduling_delay_ns, span.probe_join_delay_ns});
  }
  pairing = a.pairing;
  for (const LaunchStagger& l : a.launch_stagger) launch_stagger_ns.push_back(l.stagger_ns);
  delay_on_path_ns = a.delay_on_path_ns;
  what_if = a.what_if;
}

void TraceContribution::remap(const std::vector<trace::NameId>& to_run) {
  for (OperationTime& op : by_operation) op.service = to_run[op.service], op.operation = to_run[op.operation];
  for (ServiceTime& s : by_service) s.service = to_run[s.service];
  for (auto& [service, operation] : path) service = to_run[service], operation = to_run[operation];
  for (RpcSample& r : rpcs) {
    r.client_service = to_run[r.client_service];
    r.server_service = to_run[r.server_service];
    r.server_operation = to_run[r.server_operation];
  }
  for (ProbeCall& c : probe_calls) c.service = to_run[c.service], c.operation = to_run[c.operation];
  for (WhatIfOutcome& w : what_if) {
    for (OperationTime& op : w.by_operation) op.service = to_run[op.service], op.operation = to_run[op.operation];
  }
}

}  // namespace tailscope::analyze
