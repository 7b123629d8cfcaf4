#include "analyze/delays.h"

#include <string_view>

namespace tailscope::analyze {

namespace {

constexpr std::string_view kClientSuffix = "_client";
constexpr std::string_view kServerSuffix = "_server";

// DeathStarBench names an RPC's two spans <call>_client and <call>_server.
bool client_server_names(const SpanTree& tree, const trace::NameTable* names, std::uint32_t parent,
                         std::uint32_t child) {
  if (names == nullptr) return false;
  const std::string_view p = names->name(tree.span(parent).operation);
  const std::string_view c = names->name(tree.span(child).operation);
  return p.size() > kClientSuffix.size() && c.size() > kServerSuffix.size() && p.ends_with(kClientSuffix) &&
         c.ends_with(kServerSuffix) &&
         p.substr(0, p.size() - kClientSuffix.size()) == c.substr(0, c.size() - kServerSuffix.size());
}

bool other_process(const SpanTree& tree, std::uint32_t parent, std::uint32_t child) {
  const trace::Span& p = tree.span(parent);
  const trace::Span& c = tree.span(child);
  if (p.service != c.service) return true;
  // Two processes of one service (replicas) have distinct Jaeger processIDs.
  const std::string_view pp = tree.trace().str(p.process_id);
  const std::string_view cp = tree.trace().str(c.process_id);
  return !pp.empty() && !cp.empty() && pp != cp;
}

}  // namespace

bool rpc_pair_rule(const SpanTree& tree, const trace::NameTable* names, std::uint32_t parent, std::uint32_t child,
                   PairRule* rule) {
  const trace::SpanKind pk = tree.span(parent).kind;
  const trace::SpanKind ck = tree.span(child).kind;
  if (pk == trace::SpanKind::kClient && ck == trace::SpanKind::kServer) {
    *rule = PairRule::kTag;
    return true;
  }
  // A tag that names another role (internal, producer/consumer, a server
  // parent, a client child) is believed over any inference.
  const bool parent_may_be_client = pk == trace::SpanKind::kUnspecified || pk == trace::SpanKind::kClient;
  const bool child_may_be_server = ck == trace::SpanKind::kUnspecified || ck == trace::SpanKind::kServer;
  if (!parent_may_be_client || !child_may_be_server) return false;
  if (tree.span(child).parent_ref != trace::RefType::kChildOf) return false;  // follows-from: not waited for
  if (other_process(tree, parent, child)) {
    *rule = PairRule::kCrossProcess;
    return true;
  }
  if (client_server_names(tree, names, parent, child)) {
    *rule = PairRule::kName;
    return true;
  }
  return false;
}

void DelayExtractor::extract(const SpanTree& tree, TraceAnalysis& analysis) {
  analysis.rpc_delays.clear();
  analysis.pairing = PairingCounts{};
  analysis.launch_stagger.clear();
  analysis.probe_scheduling_ns.clear();
  analysis.probe_join_ns.clear();
  analysis.probe_spans.clear();
  analysis.delay_on_path_ns = 0;
  paired_client_.assign(tree.size(), 0);
  for (std::uint32_t s : tree.preorder()) {
    const trace::Span& span = tree.span(s);
    if (span.probe_scheduling_delay_ns >= 0 || span.probe_join_delay_ns >= 0) analysis.probe_spans.push_back(s);
    if (span.probe_scheduling_delay_ns >= 0) analysis.probe_scheduling_ns.push_back(span.probe_scheduling_delay_ns);
    if (span.probe_join_delay_ns >= 0) analysis.probe_join_ns.push_back(span.probe_join_delay_ns);
    // Server children of s, by start: the first of each (service, operation)
    // is the call; later ones with the same callee are retries.
    const std::size_t first_pair = analysis.rpc_delays.size();
    for (std::uint32_t c : tree.children(s)) {
      PairRule rule = PairRule::kTag;
      if (!rpc_pair_rule(tree, names_, s, c, &rule)) continue;
      const trace::Span& server = tree.span(c);
      bool retry = false;
      for (std::size_t i = first_pair; i < analysis.rpc_delays.size() && !retry; ++i) {
        const trace::Span& earlier = tree.span(analysis.rpc_delays[i].server_span);
        retry = earlier.service == server.service && earlier.operation == server.operation;
      }
      if (retry) {
        ++analysis.pairing.retried_server_children;
        continue;
      }
      const std::int64_t scheduling = tree.start(c) - tree.start(s);
      const std::int64_t join = tree.end(s) - tree.end(c);
      // Across services SpanTree has already counted this overflow as skew.
      if ((scheduling < 0 || join < 0) && server.service == span.service) analysis.warnings.add(Warning::kClockSkew);
      analysis.rpc_delays.push_back(RpcDelay{s, c, scheduling < 0 ? 0 : scheduling, join < 0 ? 0 : join, rule});
      ++analysis.pairing.by_rule[static_cast<std::size_t>(rule)];
      if (rule == PairRule::kCrossProcess && client_server_names(tree, names_, s, c)) ++analysis.pairing.name_confirmed;
      paired_client_[s] = 1;
    }
  }
  // Launch stagger: children come by start time, so a group is a run of
  // paired client siblings starting within the window of the run's first.
  for (std::uint32_t parent : tree.preorder()) {
    clients_.clear();
    for (std::uint32_t c : tree.children(parent)) {
      if (paired_client_[c] != 0) clients_.push_back(c);
    }
    std::size_t first = 0;
    for (std::size_t i = 1; i < clients_.size(); ++i) {
      const std::int64_t stagger = tree.start(clients_[i]) - tree.start(clients_[first]);
      if (stagger > stagger_window_ns_) {
        first = i;
        continue;
      }
      analysis.launch_stagger.push_back(LaunchStagger{parent, clients_[i], stagger});
    }
  }
  for (const SpanOnPath& p : analysis.path.spans) {
    if (paired_client_[p.span] != 0) analysis.delay_on_path_ns += p.exclusive_ns;
  }
}

}  // namespace tailscope::analyze
