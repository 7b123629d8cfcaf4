// Aggregates per-trace analyses into the result document's summary sections:
// end-to-end latency, distinct critical paths, per operation / per service
// critical-path time, bottleneck rankings, delays, what-if projections and
// warning counts. Memory is bounded by the number of distinct names and paths
// (capped), not by the number of traces.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analyze/duration_distribution.h"
#include "analyze/trace_analysis.h"
#include "analyze/trace_contribution.h"
#include "trace/trace.h"
#include "trace/trace_reader.h"

namespace tailscope::analyze {

struct AggregateOptions {
  std::size_t top_n = 20;  // length of rankings and top lists
  std::size_t max_distinct_paths = 10'000;
  std::size_t max_listed = 1'000;              // operations / services / edges listed
  std::int64_t stagger_window_ns = 1'000'000;  // as given to the DelayExtractor: named in reasons
};

// {"count", "mean", "stddev", "cv", "min", "p50", "p90", "p99", "max", "exact"};
// an empty distribution has every figure, count included, null and
// "unavailable": `reason_if_empty` (never a 0 that looks measured).
nlohmann::ordered_json distribution_json(const DurationDistribution& d, std::string_view reason_if_empty);

// The derived distributions as tailscope.result/1 measurements
// (docs/formats.md), so the driver stores them like any engine's: the
// "measurements" array, and "unavailable" entries (with a reason) for those
// that are empty.
struct MeasurementLists {
  nlohmann::ordered_json measurements = nlohmann::ordered_json::array();
  nlohmann::ordered_json unavailable = nlohmann::ordered_json::array();
};

class CriticalPathAggregator {
 public:
  CriticalPathAggregator(const trace::NameTable& names, std::vector<WhatIfScenario> scenarios,
                         AggregateOptions options = {});

  void add(const TraceAnalysis& analysis);
  // The same from a detached contribution whose names are this run's
  // (tailscope-critpath --jobs N adds them in input order).
  void add(const TraceContribution& contribution);
  void add_reader_stats(const trace::ReadStats& stats);
  void add_warning(Warning w, std::uint64_t n = 1) { warnings_.add(w, n); }

  std::uint64_t traces() const { return traces_; }
  std::uint64_t traces_analyzed() const { return analyzed_; }
  const Warnings& warnings() const { return warnings_; }

  // The summary sections, keyed as in docs/critical-path.md.
  nlohmann::ordered_json to_json() const;
  // end_to_end, cp_time per service, rpc_scheduling, rpc_join,
  // probe_scheduling, probe_join, delay_on_path and what_if per scenario;
  // `algorithm` is the variant of the per-run ones.
  MeasurementLists measurements(std::string_view algorithm) const;

 private:
  struct Accumulator {  // critical-path time of one operation or service
    trace::NameId service = 0;
    trace::NameId operation = 0;
    std::uint64_t traces_on_path = 0;
    double total_ns = 0;
    double sum_squares = 0;  // over traces where present; absent traces add 0
    DurationDistribution when_on_path;
  };
  struct PathStats {
    std::vector<std::uint64_t> operations;  // service << 32 | operation
    std::uint64_t count = 0;
    DurationDistribution end_to_end;
    std::string example_trace_id;
  };
  struct EdgeStats {
    trace::NameId client_service = 0;
    trace::NameId server_service = 0;
    trace::NameId server_operation = 0;
    DurationDistribution scheduling;
    DurationDistribution join;
  };
  struct ProbeCallStats {  // tailscope's async probe, per called operation
    trace::NameId service = 0;
    trace::NameId operation = 0;
    DurationDistribution scheduling;
    DurationDistribution join;
  };
  struct WhatIfStats {
    DurationDistribution end_to_end;
    std::unordered_map<std::uint64_t, double> operation_total_ns;
  };

  nlohmann::ordered_json accumulator_json(const Accumulator& acc, bool with_operation) const;
  nlohmann::ordered_json ranking(const std::unordered_map<std::uint64_t, Accumulator>& table, bool with_operation,
                                 bool by_variability) const;
  double stddev_over_all_traces(const Accumulator& acc) const;
  // Why an empty per-trace distribution is empty.
  std::string_view no_traces_reason() const;

  const trace::NameTable& names_;
  std::vector<WhatIfScenario> scenarios_;
  AggregateOptions options_;
  std::uint64_t traces_ = 0;
  std::uint64_t analyzed_ = 0;
  double end_to_end_total_ns_ = 0;
  DurationDistribution end_to_end_;
  std::unordered_map<std::uint64_t, Accumulator> operations_;
  std::unordered_map<std::uint64_t, Accumulator> services_;
  std::unordered_map<std::string, PathStats> paths_;
  std::uint64_t paths_over_cap_ = 0;
  struct EdgeKeyHash {
    std::size_t operator()(const std::array<trace::NameId, 3>& k) const {
      std::uint64_t h = (std::uint64_t{k[0]} << 32 | k[1]) * 0x9E3779B97F4A7C15ull ^ k[2];
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };
  // (client service, server service, server operation)
  std::unordered_map<std::array<trace::NameId, 3>, EdgeStats, EdgeKeyHash> edges_;
  DurationDistribution rpc_scheduling_;
  DurationDistribution rpc_join_;
  DurationDistribution probe_scheduling_;
  DurationDistribution probe_join_;
  DurationDistribution delay_on_path_;
  double delay_on_path_total_ns_ = 0;
  double end_to_end_with_pairs_total_ns_ = 0;  // denominator of the on-path share
  std::uint64_t traces_with_pairs_ = 0;
  PairingCounts pairing_;
  DurationDistribution launch_stagger_;
  std::unordered_map<std::uint64_t, ProbeCallStats> probe_calls_;
  std::string no_stagger_reason_;
  std::string no_on_path_reason() const;
  std::vector<WhatIfStats> what_if_;
  Warnings warnings_;
  std::string key_scratch_;
  TraceContribution contribution_scratch_;
};

}  // namespace tailscope::analyze
