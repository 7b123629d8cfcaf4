#include "analyze/trace_analyzer.h"

namespace tailscope::analyze {

TraceAnalyzer::TraceAnalyzer(std::unique_ptr<CriticalPathAlgorithm> algorithm, std::vector<WhatIfScenario> scenarios)
    : algorithm_(std::move(algorithm)), scenarios_(std::move(scenarios)) {}

namespace {
constexpr std::uint64_t kEmptyKey = ~std::uint64_t{0};
std::size_t mix(std::uint64_t key) {
  key *= 0x9E3779B97F4A7C15ull;
  return static_cast<std::size_t>(key ^ (key >> 32));
}
}  // namespace

std::uint32_t TraceAnalyzer::slot_for(std::uint64_t key, std::uint32_t next_index, bool* inserted) {
  const std::size_t mask = slot_keys_.size() - 1;
  for (std::size_t slot = mix(key) & mask;; slot = (slot + 1) & mask) {
    if (slot_keys_[slot] == key) {
      *inserted = false;
      return slot_values_[slot];
    }
    if (slot_keys_[slot] == kEmptyKey) {
      slot_keys_[slot] = key;
      slot_values_[slot] = next_index;
      *inserted = true;
      return next_index;
    }
  }
}

void TraceAnalyzer::attribute(const SpanTree& tree, const CriticalPath& path, std::vector<OperationTime>& by_operation,
                              std::vector<ServiceTime>* by_service) {
  std::size_t capacity = 16;
  while (capacity < 2 * path.spans.size()) capacity *= 2;
  by_operation.clear();
  slot_keys_.assign(capacity, kEmptyKey);
  slot_values_.resize(capacity);
  bool inserted = false;
  for (const SpanOnPath& p : path.spans) {
    const trace::Span& span = tree.span(p.span);
    const std::uint64_t key = (std::uint64_t{span.service} << 32) | span.operation;
    const std::uint32_t index = slot_for(key, static_cast<std::uint32_t>(by_operation.size()), &inserted);
    if (inserted) by_operation.push_back(OperationTime{span.service, span.operation, 0});
    by_operation[index].exclusive_ns += p.exclusive_ns;
  }
  if (by_service == nullptr) return;
  by_service->clear();
  slot_keys_.assign(capacity, kEmptyKey);
  for (const OperationTime& op : by_operation) {
    const std::uint32_t index = slot_for(op.service, static_cast<std::uint32_t>(by_service->size()), &inserted);
    if (inserted) by_service->push_back(ServiceTime{op.service, 0});
    (*by_service)[index].exclusive_ns += op.exclusive_ns;
  }
}

const TraceAnalysis& TraceAnalyzer::analyze(const trace::Trace& trace) {
  TraceAnalysis& a = analysis_;
  a.trace = &trace;
  a.tree = &tree_;
  a.warnings.clear();
  a.path.clear();
  a.by_operation.clear();
  a.by_service.clear();
  a.rpc_delays.clear();
  a.pairing = PairingCounts{};
  a.launch_stagger.clear();
  a.probe_scheduling_ns.clear();
  a.probe_join_ns.clear();
  a.probe_spans.clear();
  a.delay_on_path_ns = 0;
  a.what_if.resize(scenarios_.size());
  tree_.build(trace, a.warnings);
  a.analyzed = tree_.has_root();
  if (!a.analyzed) {
    a.root = kNoSpan;
    a.start_ns = a.end_to_end_ns = 0;
    for (WhatIfOutcome& w : a.what_if) {
      w.end_to_end_ns = 0;
      w.by_operation.clear();
    }
    return a;
  }
  a.root = tree_.root();
  a.start_ns = tree_.start(a.root);
  a.end_to_end_ns = tree_.end(a.root) - a.start_ns;
  algorithm_->compute(tree_, a.path);
  attribute(tree_, a.path, a.by_operation, &a.by_service);
  delays_.extract(tree_, a);

  if (!scenarios_.empty()) {
    clipped_.build_jaeger(tree_);
    Warnings ignored;  // the replayed trace is clean by construction
    for (std::size_t i = 0; i < scenarios_.size(); ++i) {
      retimer_.retime(tree_, clipped_, scenarios_[i], a.rpc_delays, retimed_trace_);
      retimed_tree_.build(retimed_trace_, ignored);
      WhatIfOutcome& w = a.what_if[i];
      w.by_operation.clear();
      w.end_to_end_ns = 0;
      if (!retimed_tree_.has_root()) continue;
      w.end_to_end_ns = retimed_tree_.end(retimed_tree_.root()) - retimed_tree_.start(retimed_tree_.root());
      algorithm_->compute(retimed_tree_, retimed_path_);
      attribute(retimed_tree_, retimed_path_, w.by_operation, nullptr);
    }
  }
  return a;
}

}  // namespace tailscope::analyze
