// The per-trace pipeline: repair the tree, compute the critical path with the
// chosen algorithm, attribute path time to services and operations, extract
// delays and replay each what-if scenario. Reuses its buffers across traces.
#pragma once

#include <memory>
#include <vector>

#include "analyze/clipped_tree.h"
#include "analyze/critical_path.h"
#include "analyze/delays.h"
#include "analyze/span_tree.h"
#include "analyze/trace_analysis.h"
#include "analyze/what_if.h"

namespace tailscope::analyze {

class TraceAnalyzer {
 public:
  TraceAnalyzer(std::unique_ptr<CriticalPathAlgorithm> algorithm, std::vector<WhatIfScenario> scenarios);

  // RPC-pair inference and launch stagger (analyze/delays.h): `names` enables
  // the <call>_client / <call>_server naming rule.
  void set_delay_options(const trace::NameTable* names, std::int64_t stagger_window_ns) {
    delays_ = DelayExtractor(names, stagger_window_ns);
  }

  // The result (and the tree it points to) is valid until the next call.
  const TraceAnalysis& analyze(const trace::Trace& trace);
  const CriticalPathAlgorithm& algorithm() const { return *algorithm_; }
  const std::vector<WhatIfScenario>& scenarios() const { return scenarios_; }

 private:
  void attribute(const SpanTree& tree, const CriticalPath& path, std::vector<OperationTime>& by_operation,
                 std::vector<ServiceTime>* by_service);

  std::unique_ptr<CriticalPathAlgorithm> algorithm_;
  std::vector<WhatIfScenario> scenarios_;
  TraceAnalysis analysis_;
  DelayExtractor delays_;
  SpanTree tree_;
  ClippedTree clipped_;
  WhatIfRetimer retimer_;
  trace::Trace retimed_trace_;
  SpanTree retimed_tree_;
  CriticalPath retimed_path_;
  // (service, operation) -> index in the output, open addressing, reused.
  std::uint32_t slot_for(std::uint64_t key, std::uint32_t next_index, bool* inserted);
  std::vector<std::uint64_t> slot_keys_;
  std::vector<std::uint32_t> slot_values_;
};

}  // namespace tailscope::analyze
