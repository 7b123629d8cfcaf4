#include "analyze/aggregate.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "analyze/analysis_json.h"
#include "core/latency_summary.h"

namespace tailscope::analyze {

namespace {

std::uint64_t pack_operation(trace::NameId service, trace::NameId operation) {
  return (std::uint64_t{service} << 32) | operation;
}

double ratio(double numerator, double denominator) { return denominator > 0 ? numerator / denominator : 0.0; }

// A ratio of two figures where the denominator may be unmeasured (an empty
// distribution): null then, not 0.
nlohmann::ordered_json ratio_or_null(double numerator, double denominator) {
  return denominator > 0 ? nlohmann::ordered_json(numerator / denominator) : nlohmann::ordered_json(nullptr);
}

constexpr std::string_view kNoRpcReason =
    "no RPC pair found: no client/server span.kind tags, no span whose parent is in another service or "
    "process, no <call>_client/<call>_server span names";
constexpr std::string_view kNoProbeReason =
    "no span carries tailscope's async-probe tags (tailscope.scheduling_delay_ns / tailscope.join_delay_ns)";

// The percentile levels of a measurement's CDF: every percent, then the tail.
const std::vector<double>& cdf_percentiles() {
  static const std::vector<double> levels = [] {
    std::vector<double> v;
    for (int p = 0; p < 100; ++p) v.push_back(p);
    for (double p : {99.5, 99.9, 99.99, 100.0}) v.push_back(p);
    return v;
  }();
  return levels;
}

// The latency block of a result/1 measurement, from a non-empty distribution:
// nearest-rank percentiles (exact while the distribution is), and how many
// samples lie beyond each, as core/latency_summary reports them.
nlohmann::ordered_json latency_json(const DurationDistribution& d) {
  const auto count = d.count();
  nlohmann::ordered_json percentiles = nlohmann::ordered_json::object();
  nlohmann::ordered_json tail = nlohmann::ordered_json::object();
  nlohmann::ordered_json low = nlohmann::ordered_json::array();
  for (const auto& [key, p] : reported_percentiles()) {
    percentiles[key] = d.percentile(p);
    const double beyond = static_cast<double>(count) * (100.0 - p) / 100.0;
    tail[key] = beyond;
    if (beyond < kMinTailSamples) low.push_back(key);
  }
  return {{"unit", "ns"},
          {"count", count},
          {"out_of_range", 0},
          {"min", d.min()},
          {"mean", d.mean()},
          {"stddev", d.stddev()},
          {"max", d.max()},
          {"percentiles", percentiles},
          {"tail_samples", tail},
          {"low_confidence", low},
          {"exact_percentiles", d.exact()}};
}

void add_measurement(MeasurementLists& lists, std::string_view name, std::string_view variant, std::string_view what,
                     const DurationDistribution& d, std::string_view reason_if_empty) {
  if (d.count() == 0) {
    lists.unavailable.push_back({{"name", name}, {"variant", variant}, {"reason", reason_if_empty}});
    return;
  }
  nlohmann::ordered_json cdf = nlohmann::ordered_json::array();
  const std::vector<double>& levels = cdf_percentiles();
  const std::vector<std::int64_t> values = d.percentiles(levels);
  for (std::size_t i = 0; i < levels.size(); ++i) cdf.push_back({values[i], levels[i]});
  lists.measurements.push_back(
      {{"name", name}, {"variant", variant}, {"what", what}, {"latency", latency_json(d)}, {"cdf", std::move(cdf)}});
}

}  // namespace

nlohmann::ordered_json distribution_json(const DurationDistribution& d, std::string_view reason_if_empty) {
  if (d.count() == 0) {
    return nlohmann::ordered_json{{"count", nullptr},
                                  {"mean", nullptr},
                                  {"stddev", nullptr},
                                  {"cv", nullptr},
                                  {"min", nullptr},
                                  {"p50", nullptr},
                                  {"p90", nullptr},
                                  {"p99", nullptr},
                                  {"max", nullptr},
                                  {"exact", true},
                                  {"unavailable", reason_if_empty}};
  }
  // The moments first, then the percentiles (DurationDistribution::percentiles).
  static const std::vector<double> kLevels = {50, 90, 99};
  const double mean = d.mean(), stddev = d.stddev(), cv = d.cv();
  const std::int64_t min = d.min();
  const std::vector<std::int64_t> p = d.percentiles(kLevels);
  return nlohmann::ordered_json{{"count", d.count()}, {"mean", mean},      {"stddev", stddev}, {"cv", cv},
                                {"min", min},         {"p50", p[0]},       {"p90", p[1]},      {"p99", p[2]},
                                {"max", d.max()},     {"exact", d.exact()}};
}

CriticalPathAggregator::CriticalPathAggregator(const trace::NameTable& names, std::vector<WhatIfScenario> scenarios,
                                               AggregateOptions options)
    : names_(names), scenarios_(std::move(scenarios)), options_(options), what_if_(scenarios_.size()) {
  no_stagger_reason_ = "no parent launched two or more paired client spans within the stagger window (" +
                       std::to_string(options_.stagger_window_ns / 1000) + " us)";
}

void CriticalPathAggregator::add_reader_stats(const trace::ReadStats& stats) {
  warnings_.add(Warning::kSpanWithoutId, stats.dropped_spans_without_id);
  warnings_.add(Warning::kSpanWithoutService, stats.spans_without_service);
  warnings_.add(Warning::kSpanOverLimit, stats.dropped_spans_over_limit);
  warnings_.add(Warning::kBadTimestamp, stats.bad_timestamps);
}

void CriticalPathAggregator::add(const TraceAnalysis& a) {
  contribution_scratch_.assign(a);
  add(contribution_scratch_);
}

void CriticalPathAggregator::add(const TraceContribution& a) {
  ++traces_;
  warnings_.merge(a.warnings);
  if (!a.analyzed) return;
  ++analyzed_;
  end_to_end_.add(a.end_to_end_ns);
  end_to_end_total_ns_ += static_cast<double>(a.end_to_end_ns);

  for (const OperationTime& op : a.by_operation) {
    Accumulator& acc = operations_[pack_operation(op.service, op.operation)];
    acc.service = op.service;
    acc.operation = op.operation;
    ++acc.traces_on_path;
    const double x = static_cast<double>(op.exclusive_ns);
    acc.total_ns += x;
    acc.sum_squares += x * x;
    acc.when_on_path.add(op.exclusive_ns);
  }
  for (const ServiceTime& s : a.by_service) {
    Accumulator& acc = services_[s.service];
    acc.service = s.service;
    ++acc.traces_on_path;
    const double x = static_cast<double>(s.exclusive_ns);
    acc.total_ns += x;
    acc.sum_squares += x * x;
    acc.when_on_path.add(s.exclusive_ns);
  }

  // Distinct paths: the sequence of (service, operation) of the path spans.
  key_scratch_.clear();
  const std::size_t n = a.path.size();
  for (const auto& [service, operation] : a.path) {
    const std::uint64_t packed = pack_operation(service, operation);
    key_scratch_.append(reinterpret_cast<const char*>(&packed), sizeof packed);
  }
  if (a.path_spans_beyond_key > 0) {
    const std::uint64_t rest = a.path_spans_beyond_key;  // long paths: first 512 + the count
    key_scratch_.append(reinterpret_cast<const char*>(&rest), sizeof rest);
  }
  auto it = paths_.find(key_scratch_);
  if (it == paths_.end() && paths_.size() < options_.max_distinct_paths) {
    it = paths_.emplace(key_scratch_, PathStats{}).first;
    PathStats& p = it->second;
    p.operations.resize(n);
    std::memcpy(p.operations.data(), key_scratch_.data(), n * sizeof(std::uint64_t));
    p.example_trace_id = trace::valid_utf8(a.trace_id);
  }
  if (it != paths_.end()) {
    ++it->second.count;
    it->second.end_to_end.add(a.end_to_end_ns);
  } else {
    ++paths_over_cap_;
  }

  for (const TraceContribution::RpcSample& d : a.rpcs) {
    rpc_scheduling_.add(d.scheduling_ns);
    rpc_join_.add(d.join_ns);
    const std::array<trace::NameId, 3> key{d.client_service, d.server_service, d.server_operation};
    auto edge = edges_.find(key);
    if (edge == edges_.end()) {
      if (edges_.size() >= 10 * options_.max_listed) continue;
      edge = edges_.emplace(key, EdgeStats{}).first;
      edge->second.client_service = key[0];
      edge->second.server_service = key[1];
      edge->second.server_operation = key[2];
    }
    edge->second.scheduling.add(d.scheduling_ns);
    edge->second.join.add(d.join_ns);
  }
  for (std::int64_t v : a.probe_scheduling_ns) probe_scheduling_.add(v);
  for (std::int64_t v : a.probe_join_ns) probe_join_.add(v);
  for (const TraceContribution::ProbeCall& c : a.probe_calls) {
    const std::uint64_t key = pack_operation(c.service, c.operation);
    auto call = probe_calls_.find(key);
    if (call == probe_calls_.end()) {
      if (probe_calls_.size() >= options_.max_listed) continue;
      call = probe_calls_.emplace(key, ProbeCallStats{c.service, c.operation, {}, {}}).first;
    }
    if (c.scheduling_ns >= 0) call->second.scheduling.add(c.scheduling_ns);
    if (c.join_ns >= 0) call->second.join.add(c.join_ns);
  }
  pairing_.add(a.pairing);
  for (std::int64_t stagger_ns : a.launch_stagger_ns) launch_stagger_.add(stagger_ns);
  // A trace without any RPC pair has no delay to put on its path: counting
  // its 0 would read as "measured, no delay".
  if (!a.rpcs.empty()) {
    ++traces_with_pairs_;
    delay_on_path_.add(a.delay_on_path_ns);
    delay_on_path_total_ns_ += static_cast<double>(a.delay_on_path_ns);
    end_to_end_with_pairs_total_ns_ += static_cast<double>(a.end_to_end_ns);
  }

  for (std::size_t i = 0; i < what_if_.size() && i < a.what_if.size(); ++i) {
    what_if_[i].end_to_end.add(a.what_if[i].end_to_end_ns);
    for (const OperationTime& op : a.what_if[i].by_operation) {
      what_if_[i].operation_total_ns[pack_operation(op.service, op.operation)] += static_cast<double>(op.exclusive_ns);
    }
  }
}

double CriticalPathAggregator::stddev_over_all_traces(const Accumulator& acc) const {
  if (analyzed_ == 0) return 0;
  const double n = static_cast<double>(analyzed_);
  const double mean = acc.total_ns / n;
  return std::sqrt(std::max(0.0, acc.sum_squares / n - mean * mean));
}

nlohmann::ordered_json CriticalPathAggregator::accumulator_json(const Accumulator& acc, bool with_operation) const {
  nlohmann::ordered_json j;
  j["service"] = names_.name(acc.service);
  if (with_operation) {
    j["operation"] = names_.name(acc.operation);
    j["key"] = operation_key(names_, acc.service, acc.operation);
  }
  const double mean_all = ratio(acc.total_ns, static_cast<double>(analyzed_));
  const double stddev_all = stddev_over_all_traces(acc);
  j["traces_on_path"] = acc.traces_on_path;
  j["frequency"] = ratio(static_cast<double>(acc.traces_on_path), static_cast<double>(analyzed_));
  j["total_ns"] = acc.total_ns;
  j["share_of_end_to_end"] = ratio_or_null(acc.total_ns, end_to_end_total_ns_);
  j["mean_per_trace_ns"] = mean_all;
  j["stddev_per_trace_ns"] = stddev_all;
  j["cv_per_trace"] = ratio(stddev_all, mean_all);
  j["cp_time_ns"] = distribution_json(acc.when_on_path, "never on the critical path");
  return j;
}

nlohmann::ordered_json CriticalPathAggregator::ranking(const std::unordered_map<std::uint64_t, Accumulator>& table,
                                                       bool with_operation, bool by_variability) const {
  std::vector<const Accumulator*> order;
  order.reserve(table.size());
  for (const auto& [key, acc] : table) order.push_back(&acc);
  auto score = [&](const Accumulator* acc) { return by_variability ? stddev_over_all_traces(*acc) : acc->total_ns; };
  std::sort(order.begin(), order.end(), [&](const Accumulator* a, const Accumulator* b) {
    const double sa = score(a), sb = score(b);
    if (sa != sb) return sa > sb;
    return std::make_pair(a->service, a->operation) < std::make_pair(b->service, b->operation);
  });
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  const std::size_t limit = std::min(order.size(), options_.top_n);
  for (std::size_t i = 0; i < limit; ++i) {
    nlohmann::ordered_json j = accumulator_json(*order[i], with_operation);
    j.erase("cp_time_ns");
    j["rank"] = i + 1;
    static const std::vector<double> kLevels = {50, 99};
    const std::vector<std::int64_t> p = order[i]->when_on_path.percentiles(kLevels);
    j["p50_ns"] = p[0];
    j["p99_ns"] = p[1];
    list.push_back(std::move(j));
  }
  return list;
}

nlohmann::ordered_json CriticalPathAggregator::to_json() const {
  nlohmann::ordered_json doc;
  doc["traces_total"] = traces_;
  doc["traces_analyzed"] = analyzed_;
  doc["end_to_end_ns"] = distribution_json(end_to_end_, no_traces_reason());

  // Distinct critical paths, most frequent first.
  {
    std::vector<const PathStats*> order;
    for (const auto& [key, p] : paths_) order.push_back(&p);
    std::sort(order.begin(), order.end(), [](const PathStats* a, const PathStats* b) {
      if (a->count != b->count) return a->count > b->count;
      return a->example_trace_id < b->example_trace_id;
    });
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < std::min(order.size(), options_.top_n); ++i) {
      const PathStats& p = *order[i];
      nlohmann::ordered_json path = nlohmann::ordered_json::array();
      for (std::uint64_t op : p.operations) {
        path.push_back(operation_key(names_, static_cast<trace::NameId>(op >> 32), static_cast<trace::NameId>(op)));
      }
      top.push_back({{"rank", i + 1},
                     {"path", std::move(path)},
                     {"count", p.count},
                     {"fraction", ratio(static_cast<double>(p.count), static_cast<double>(analyzed_))},
                     {"end_to_end_ns", distribution_json(p.end_to_end, no_traces_reason())},
                     {"example_trace_id", p.example_trace_id}});
    }
    doc["critical_paths"] = {
        {"distinct", paths_.size()}, {"traces_beyond_distinct_cap", paths_over_cap_}, {"top", std::move(top)}};
  }

  auto listing = [&](const std::unordered_map<std::uint64_t, Accumulator>& table, bool with_operation) {
    std::vector<const Accumulator*> order;
    for (const auto& [key, acc] : table) order.push_back(&acc);
    std::sort(order.begin(), order.end(), [](const Accumulator* a, const Accumulator* b) {
      if (a->total_ns != b->total_ns) return a->total_ns > b->total_ns;
      return std::make_pair(a->service, a->operation) < std::make_pair(b->service, b->operation);
    });
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < std::min(order.size(), options_.max_listed); ++i) {
      list.push_back(accumulator_json(*order[i], with_operation));
    }
    return list;
  };
  doc["operations"] = listing(operations_, true);
  doc["operations_listed_of"] = operations_.size();
  doc["services"] = listing(services_, false);
  doc["services_listed_of"] = services_.size();

  doc["bottlenecks"] = {{"by_mean", ranking(operations_, true, false)},
                        {"by_variability", ranking(operations_, true, true)},
                        {"services_by_mean", ranking(services_, false, false)},
                        {"services_by_variability", ranking(services_, false, true)}};

  {
    std::vector<const EdgeStats*> order;
    for (const auto& [key, e] : edges_) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](const EdgeStats* a, const EdgeStats* b) {
      const double sa = a->scheduling.sum() + a->join.sum(), sb = b->scheduling.sum() + b->join.sum();
      return sa > sb;
    });
    nlohmann::ordered_json edges = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < std::min(order.size(), options_.max_listed); ++i) {
      const EdgeStats& e = *order[i];
      edges.push_back({{"client_service", names_.name(e.client_service)},
                       {"server_service", names_.name(e.server_service)},
                       {"server_operation", names_.name(e.server_operation)},
                       {"count", e.scheduling.count()},
                       {"scheduling_ns", distribution_json(e.scheduling, kNoRpcReason)},
                       {"join_ns", distribution_json(e.join, kNoRpcReason)}});
    }
    nlohmann::ordered_json by_rule = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < kPairRuleNames.size(); ++i)
      by_rule[std::string(kPairRuleNames[i])] = pairing_.by_rule[i];
    std::uint64_t pairs = 0;
    for (std::uint64_t n : pairing_.by_rule) pairs += n;
    std::vector<const ProbeCallStats*> calls;
    for (const auto& [key, c] : probe_calls_) calls.push_back(&c);
    std::sort(calls.begin(), calls.end(), [&](const ProbeCallStats* a, const ProbeCallStats* b) {
      return operation_key(names_, a->service, a->operation) < operation_key(names_, b->service, b->operation);
    });
    nlohmann::ordered_json by_call = nlohmann::ordered_json::array();
    for (const ProbeCallStats* c : calls) {
      by_call.push_back(
          {{"service", names_.name(c->service)},
           {"operation", names_.name(c->operation)},
           {"scheduling_ns", distribution_json(c->scheduling, "the call's spans carry no scheduling tag")},
           {"join_ns", distribution_json(c->join, "the call's spans carry no join tag")}});
    }
    doc["delays"] = {
        {"pairing",
         {{"pairs", pairs},
          {"by_rule", std::move(by_rule)},
          {"name_confirmed_cross_process", pairing_.name_confirmed},
          {"retried_server_children", pairing_.retried_server_children},
          {"traces_with_pairs", traces_with_pairs_}}},
        {"rpc_scheduling_ns", distribution_json(rpc_scheduling_, kNoRpcReason)},
        {"rpc_join_ns", distribution_json(rpc_join_, kNoRpcReason)},
        {"launch_stagger_window_ns", options_.stagger_window_ns},
        {"launch_stagger_ns", distribution_json(launch_stagger_, no_stagger_reason_)},
        {"probe_scheduling_ns", distribution_json(probe_scheduling_, kNoProbeReason)},
        {"probe_join_ns", distribution_json(probe_join_, kNoProbeReason)},
        {"probe_by_call", std::move(by_call)},
        {"on_path_ns", distribution_json(delay_on_path_, no_on_path_reason())},
        {"on_path_share_of_end_to_end", ratio_or_null(delay_on_path_total_ns_, end_to_end_with_pairs_total_ns_)},
        {"on_path_share_unavailable",
         traces_with_pairs_ == 0 ? nlohmann::ordered_json(no_on_path_reason()) : nlohmann::ordered_json(nullptr)},
        {"by_edge", std::move(edges)}};
  }

  nlohmann::ordered_json what_if = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < scenarios_.size(); ++i) {
    const WhatIfScenario& s = scenarios_[i];
    const WhatIfStats& w = what_if_[i];
    nlohmann::ordered_json removed = nlohmann::ordered_json::array();
    for (trace::NameId id : s.removed_services) removed.push_back(names_.name(id));
    std::vector<std::pair<double, std::uint64_t>> ops;
    for (const auto& [key, total] : w.operation_total_ns) ops.emplace_back(total, key);
    std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    nlohmann::ordered_json top_ops = nlohmann::ordered_json::array();
    for (std::size_t k = 0; k < std::min(ops.size(), options_.top_n); ++k) {
      const auto service = static_cast<trace::NameId>(ops[k].second >> 32);
      const auto operation = static_cast<trace::NameId>(ops[k].second);
      top_ops.push_back({{"service", names_.name(service)},
                         {"operation", names_.name(operation)},
                         {"key", operation_key(names_, service, operation)},
                         {"mean_per_trace_ns", ratio(ops[k].first, static_cast<double>(w.end_to_end.count()))}});
    }
    what_if.push_back({{"scenario", s.name},
                       {"removed_services", std::move(removed)},
                       {"remove_delays", s.remove_delays},
                       {"end_to_end_ns", distribution_json(w.end_to_end, no_traces_reason())},
                       {"mean_ratio", ratio_or_null(w.end_to_end.mean(), end_to_end_.mean())},
                       {"p50_ratio", ratio_or_null(static_cast<double>(w.end_to_end.percentile(50)),
                                                   static_cast<double>(end_to_end_.percentile(50)))},
                       {"p99_ratio", ratio_or_null(static_cast<double>(w.end_to_end.percentile(99)),
                                                   static_cast<double>(end_to_end_.percentile(99)))},
                       {"top_operations", std::move(top_ops)}});
  }
  doc["what_if"] = std::move(what_if);

  nlohmann::ordered_json warnings = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < warnings_.counts.size(); ++i)
    warnings[std::string(kWarningNames[i])] = warnings_.counts[i];
  doc["warnings"] = std::move(warnings);
  return doc;
}

std::string CriticalPathAggregator::no_on_path_reason() const {
  if (analyzed_ == 0) return std::string(no_traces_reason());
  return std::string(kNoRpcReason);
}

std::string_view CriticalPathAggregator::no_traces_reason() const {
  return traces_ == 0 ? "no traces in the input" : "no trace could be analyzed (no usable root span; see warnings)";
}

MeasurementLists CriticalPathAggregator::measurements(std::string_view algorithm) const {
  MeasurementLists lists;
  add_measurement(lists, "end_to_end", algorithm, "root span duration, per analyzed trace", end_to_end_,
                  no_traces_reason());
  std::vector<const Accumulator*> services;
  for (const auto& [key, acc] : services_) services.push_back(&acc);
  std::sort(services.begin(), services.end(), [&](const Accumulator* a, const Accumulator* b) {
    return names_.name(a->service) < names_.name(b->service);
  });
  for (const Accumulator* acc : services) {
    add_measurement(lists, "cp_time", names_.name(acc->service),
                    "critical-path time of the service, per trace where it is on the path", acc->when_on_path,
                    "never on the critical path");
  }
  add_measurement(lists, "rpc_scheduling", algorithm, "server span start - client span start, per RPC", rpc_scheduling_,
                  kNoRpcReason);
  add_measurement(lists, "rpc_join", algorithm, "client span end - server span end, per RPC", rpc_join_, kNoRpcReason);
  add_measurement(lists, "probe_scheduling", algorithm, "tailscope.scheduling_delay_ns tag values", probe_scheduling_,
                  kNoProbeReason);
  add_measurement(lists, "probe_join", algorithm, "tailscope.join_delay_ns tag values", probe_join_, kNoProbeReason);
  add_measurement(lists, "launch_stagger", algorithm,
                  "client span start - the first sibling client span's start, within the stagger window",
                  launch_stagger_, no_stagger_reason_);
  add_measurement(lists, "delay_on_path", algorithm,
                  "scheduling + join delay on the critical path, per trace with an RPC pair", delay_on_path_,
                  no_on_path_reason());
  for (const auto& [key, c] : probe_calls_) {
    const std::string variant = operation_key(names_, c.service, c.operation);
    add_measurement(lists, "probe_call_scheduling", variant, "tailscope.scheduling_delay_ns of one async call",
                    c.scheduling, "the call's spans carry no scheduling tag");
    add_measurement(lists, "probe_call_join", variant, "tailscope.join_delay_ns of one async call", c.join,
                    "the call's spans carry no join tag");
  }
  for (std::size_t i = 0; i < scenarios_.size(); ++i) {
    add_measurement(lists, "what_if", scenarios_[i].name,
                    "projected end-to-end latency with the scenario's time removed, per trace", what_if_[i].end_to_end,
                    no_traces_reason());
  }
  return lists;
}

}  // namespace tailscope::analyze
