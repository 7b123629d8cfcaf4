#include "analyze/delays.h"

namespace tailscope::analyze {

namespace {
bool waits_on_server(const SpanTree& tree, std::uint32_t span) {
  if (tree.span(span).kind != trace::SpanKind::kClient) return false;
  for (std::uint32_t c : tree.children(span)) {
    if (tree.span(c).kind == trace::SpanKind::kServer) return true;
  }
  return false;
}
}  // namespace

void extract_delays(const SpanTree& tree, TraceAnalysis& analysis) {
  analysis.rpc_delays.clear();
  analysis.probe_scheduling_ns.clear();
  analysis.probe_join_ns.clear();
  analysis.delay_on_path_ns = 0;
  for (std::uint32_t s : tree.preorder()) {
    const trace::Span& span = tree.span(s);
    if (span.probe_scheduling_delay_ns >= 0) analysis.probe_scheduling_ns.push_back(span.probe_scheduling_delay_ns);
    if (span.probe_join_delay_ns >= 0) analysis.probe_join_ns.push_back(span.probe_join_delay_ns);
    if (span.kind != trace::SpanKind::kClient) continue;
    for (std::uint32_t c : tree.children(s)) {
      if (tree.span(c).kind != trace::SpanKind::kServer) continue;
      std::int64_t scheduling = tree.start(c) - tree.start(s);
      std::int64_t join = tree.end(s) - tree.end(c);
      // Across services SpanTree has already counted this overflow as skew.
      if ((scheduling < 0 || join < 0) && tree.span(c).service == span.service) {
        analysis.warnings.add(Warning::kClockSkew);
      }
      analysis.rpc_delays.push_back(RpcDelay{s, c, scheduling < 0 ? 0 : scheduling, join < 0 ? 0 : join});
    }
  }
  for (const SpanOnPath& p : analysis.path.spans) {
    if (waits_on_server(tree, p.span)) analysis.delay_on_path_ns += p.exclusive_ns;
  }
}

}  // namespace tailscope::analyze
