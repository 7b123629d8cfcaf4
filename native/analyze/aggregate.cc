#include "analyze/aggregate.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "analyze/analysis_json.h"

namespace tailscope::analyze {

namespace {

constexpr std::size_t kMaxPathKeyOperations = 512;

std::uint64_t PackOperation(trace::NameId service, trace::NameId operation) {
  return (std::uint64_t{service} << 32) | operation;
}

double Ratio(double numerator, double denominator) { return denominator > 0 ? numerator / denominator : 0.0; }

}  // namespace

nlohmann::ordered_json DistributionJson(const DurationDistribution& d) {
  return nlohmann::ordered_json{{"count", d.count()},       {"mean", d.mean()},           {"stddev", d.stddev()},
                        {"cv", d.cv()},             {"min", d.min()},             {"p50", d.Percentile(50)},
                        {"p90", d.Percentile(90)},  {"p99", d.Percentile(99)},    {"max", d.max()},
                        {"exact", d.exact()}};
}

CriticalPathAggregator::CriticalPathAggregator(const trace::NameTable& names, std::vector<WhatIfScenario> scenarios,
                                               AggregateOptions options)
    : names_(names), scenarios_(std::move(scenarios)), options_(options), what_if_(scenarios_.size()) {}

void CriticalPathAggregator::AddReaderStats(const trace::ReadStats& stats) {
  warnings_.Add(Warning::kSpanWithoutId, stats.dropped_spans_without_id);
  warnings_.Add(Warning::kSpanWithoutService, stats.spans_without_service);
  warnings_.Add(Warning::kSpanOverLimit, stats.dropped_spans_over_limit);
  warnings_.Add(Warning::kBadTimestamp, stats.bad_timestamps);
}

void CriticalPathAggregator::Add(const TraceAnalysis& a) {
  ++traces_;
  warnings_.Merge(a.warnings);
  if (!a.analyzed) return;
  ++analyzed_;
  end_to_end_.Add(a.end_to_end_ns);
  end_to_end_total_ns_ += static_cast<double>(a.end_to_end_ns);

  for (const OperationTime& op : a.by_operation) {
    Accumulator& acc = operations_[PackOperation(op.service, op.operation)];
    acc.service = op.service;
    acc.operation = op.operation;
    ++acc.traces_on_path;
    const double x = static_cast<double>(op.exclusive_ns);
    acc.total_ns += x;
    acc.sum_squares += x * x;
    acc.when_on_path.Add(op.exclusive_ns);
  }
  for (const ServiceTime& s : a.by_service) {
    Accumulator& acc = services_[s.service];
    acc.service = s.service;
    ++acc.traces_on_path;
    const double x = static_cast<double>(s.exclusive_ns);
    acc.total_ns += x;
    acc.sum_squares += x * x;
    acc.when_on_path.Add(s.exclusive_ns);
  }

  // Distinct paths: the sequence of (service, operation) of the path spans.
  key_scratch_.clear();
  const std::size_t n = std::min(a.path.spans.size(), kMaxPathKeyOperations);
  for (std::size_t i = 0; i < n; ++i) {
    const trace::Span& s = a.trace->spans[a.path.spans[i].span];
    const std::uint64_t packed = PackOperation(s.service, s.operation);
    key_scratch_.append(reinterpret_cast<const char*>(&packed), sizeof packed);
  }
  if (a.path.spans.size() > n) {
    const std::uint64_t rest = a.path.spans.size() - n;  // long paths: first 512 + the count
    key_scratch_.append(reinterpret_cast<const char*>(&rest), sizeof rest);
  }
  auto it = paths_.find(key_scratch_);
  if (it == paths_.end() && paths_.size() < options_.max_distinct_paths) {
    it = paths_.emplace(key_scratch_, PathStats{}).first;
    PathStats& p = it->second;
    p.operations.resize(n);
    std::memcpy(p.operations.data(), key_scratch_.data(), n * sizeof(std::uint64_t));
    p.example_trace_id = trace::ValidUtf8(a.trace->trace_id);
  }
  if (it != paths_.end()) {
    ++it->second.count;
    it->second.end_to_end.Add(a.end_to_end_ns);
  } else {
    ++paths_over_cap_;
  }

  for (const RpcDelay& d : a.rpc_delays) {
    rpc_scheduling_.Add(d.scheduling_ns);
    rpc_join_.Add(d.join_ns);
    const trace::Span& client = a.trace->spans[d.client_span];
    const trace::Span& server = a.trace->spans[d.server_span];
    const std::array<trace::NameId, 3> key{client.service, server.service, server.operation};
    auto edge = edges_.find(key);
    if (edge == edges_.end()) {
      if (edges_.size() >= 10 * options_.max_listed) continue;
      edge = edges_.emplace(key, EdgeStats{}).first;
      edge->second.client_service = key[0];
      edge->second.server_service = key[1];
      edge->second.server_operation = key[2];
    }
    edge->second.scheduling.Add(d.scheduling_ns);
    edge->second.join.Add(d.join_ns);
  }
  for (std::int64_t v : a.probe_scheduling_ns) probe_scheduling_.Add(v);
  for (std::int64_t v : a.probe_join_ns) probe_join_.Add(v);
  delay_on_path_.Add(a.delay_on_path_ns);
  delay_on_path_total_ns_ += static_cast<double>(a.delay_on_path_ns);

  for (std::size_t i = 0; i < what_if_.size() && i < a.what_if.size(); ++i) {
    what_if_[i].end_to_end.Add(a.what_if[i].end_to_end_ns);
    for (const OperationTime& op : a.what_if[i].by_operation) {
      what_if_[i].operation_total_ns[PackOperation(op.service, op.operation)] += static_cast<double>(op.exclusive_ns);
    }
  }
}

double CriticalPathAggregator::StddevOverAllTraces(const Accumulator& acc) const {
  if (analyzed_ == 0) return 0;
  const double n = static_cast<double>(analyzed_);
  const double mean = acc.total_ns / n;
  return std::sqrt(std::max(0.0, acc.sum_squares / n - mean * mean));
}

nlohmann::ordered_json CriticalPathAggregator::AccumulatorJson(const Accumulator& acc, bool with_operation) const {
  nlohmann::ordered_json j;
  j["service"] = names_.Name(acc.service);
  if (with_operation) {
    j["operation"] = names_.Name(acc.operation);
    j["key"] = OperationKey(names_, acc.service, acc.operation);
  }
  const double mean_all = Ratio(acc.total_ns, static_cast<double>(analyzed_));
  const double stddev_all = StddevOverAllTraces(acc);
  j["traces_on_path"] = acc.traces_on_path;
  j["frequency"] = Ratio(static_cast<double>(acc.traces_on_path), static_cast<double>(analyzed_));
  j["total_ns"] = acc.total_ns;
  j["share_of_end_to_end"] = Ratio(acc.total_ns, end_to_end_total_ns_);
  j["mean_per_trace_ns"] = mean_all;
  j["stddev_per_trace_ns"] = stddev_all;
  j["cv_per_trace"] = Ratio(stddev_all, mean_all);
  j["cp_time_ns"] = DistributionJson(acc.when_on_path);
  return j;
}

nlohmann::ordered_json CriticalPathAggregator::Ranking(const std::unordered_map<std::uint64_t, Accumulator>& table,
                                               bool with_operation, bool by_variability) const {
  std::vector<const Accumulator*> order;
  order.reserve(table.size());
  for (const auto& [key, acc] : table) order.push_back(&acc);
  auto score = [&](const Accumulator* acc) { return by_variability ? StddevOverAllTraces(*acc) : acc->total_ns; };
  std::sort(order.begin(), order.end(), [&](const Accumulator* a, const Accumulator* b) {
    const double sa = score(a), sb = score(b);
    if (sa != sb) return sa > sb;
    return std::make_pair(a->service, a->operation) < std::make_pair(b->service, b->operation);
  });
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  const std::size_t limit = std::min(order.size(), options_.top_n);
  for (std::size_t i = 0; i < limit; ++i) {
    nlohmann::ordered_json j = AccumulatorJson(*order[i], with_operation);
    j.erase("cp_time_ns");
    j["rank"] = i + 1;
    j["p50_ns"] = order[i]->when_on_path.Percentile(50);
    j["p99_ns"] = order[i]->when_on_path.Percentile(99);
    list.push_back(std::move(j));
  }
  return list;
}

nlohmann::ordered_json CriticalPathAggregator::ToJson() const {
  nlohmann::ordered_json doc;
  doc["traces_total"] = traces_;
  doc["traces_analyzed"] = analyzed_;
  doc["end_to_end_ns"] = DistributionJson(end_to_end_);

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
        path.push_back(OperationKey(names_, static_cast<trace::NameId>(op >> 32), static_cast<trace::NameId>(op)));
      }
      top.push_back({{"rank", i + 1},
                     {"path", std::move(path)},
                     {"count", p.count},
                     {"fraction", Ratio(static_cast<double>(p.count), static_cast<double>(analyzed_))},
                     {"end_to_end_ns", DistributionJson(p.end_to_end)},
                     {"example_trace_id", p.example_trace_id}});
    }
    doc["critical_paths"] = {{"distinct", paths_.size()},
                             {"traces_beyond_distinct_cap", paths_over_cap_},
                             {"top", std::move(top)}};
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
      list.push_back(AccumulatorJson(*order[i], with_operation));
    }
    return list;
  };
  doc["operations"] = listing(operations_, true);
  doc["operations_listed_of"] = operations_.size();
  doc["services"] = listing(services_, false);
  doc["services_listed_of"] = services_.size();

  doc["bottlenecks"] = {{"by_mean", Ranking(operations_, true, false)},
                        {"by_variability", Ranking(operations_, true, true)},
                        {"services_by_mean", Ranking(services_, false, false)},
                        {"services_by_variability", Ranking(services_, false, true)}};

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
      edges.push_back({{"client_service", names_.Name(e.client_service)},
                       {"server_service", names_.Name(e.server_service)},
                       {"server_operation", names_.Name(e.server_operation)},
                       {"count", e.scheduling.count()},
                       {"scheduling_ns", DistributionJson(e.scheduling)},
                       {"join_ns", DistributionJson(e.join)}});
    }
    doc["delays"] = {{"rpc_scheduling_ns", DistributionJson(rpc_scheduling_)},
                     {"rpc_join_ns", DistributionJson(rpc_join_)},
                     {"probe_scheduling_ns", DistributionJson(probe_scheduling_)},
                     {"probe_join_ns", DistributionJson(probe_join_)},
                     {"on_path_ns", DistributionJson(delay_on_path_)},
                     {"on_path_share_of_end_to_end", Ratio(delay_on_path_total_ns_, end_to_end_total_ns_)},
                     {"by_edge", std::move(edges)}};
  }

  nlohmann::ordered_json what_if = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < scenarios_.size(); ++i) {
    const WhatIfScenario& s = scenarios_[i];
    const WhatIfStats& w = what_if_[i];
    nlohmann::ordered_json removed = nlohmann::ordered_json::array();
    for (trace::NameId id : s.removed_services) removed.push_back(names_.Name(id));
    std::vector<std::pair<double, std::uint64_t>> ops;
    for (const auto& [key, total] : w.operation_total_ns) ops.emplace_back(total, key);
    std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    nlohmann::ordered_json top_ops = nlohmann::ordered_json::array();
    for (std::size_t k = 0; k < std::min(ops.size(), options_.top_n); ++k) {
      const auto service = static_cast<trace::NameId>(ops[k].second >> 32);
      const auto operation = static_cast<trace::NameId>(ops[k].second);
      top_ops.push_back({{"service", names_.Name(service)},
                         {"operation", names_.Name(operation)},
                         {"key", OperationKey(names_, service, operation)},
                         {"mean_per_trace_ns", Ratio(ops[k].first, static_cast<double>(w.end_to_end.count()))}});
    }
    what_if.push_back(
        {{"scenario", s.name},
         {"removed_services", std::move(removed)},
         {"remove_delays", s.remove_delays},
         {"end_to_end_ns", DistributionJson(w.end_to_end)},
         {"mean_ratio", Ratio(w.end_to_end.mean(), end_to_end_.mean())},
         {"p50_ratio", Ratio(static_cast<double>(w.end_to_end.Percentile(50)),
                             static_cast<double>(end_to_end_.Percentile(50)))},
         {"p99_ratio", Ratio(static_cast<double>(w.end_to_end.Percentile(99)),
                             static_cast<double>(end_to_end_.Percentile(99)))},
         {"top_operations", std::move(top_ops)}});
  }
  doc["what_if"] = std::move(what_if);

  nlohmann::ordered_json warnings = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < warnings_.counts.size(); ++i) warnings[std::string(kWarningNames[i])] = warnings_.counts[i];
  doc["warnings"] = std::move(warnings);
  return doc;
}

}  // namespace tailscope::analyze
