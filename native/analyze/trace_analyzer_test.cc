#include "analyze/trace_analyzer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analyze/aggregate.h"
#include "analyze/analysis_json.h"
#include "analyze/test_trace_builder.h"

namespace tailscope::analyze {
namespace {

using testing::TraceBuilder;
using trace::SpanKind;

// front GET /  |========================================|  0..1000
//   client rpc     |=============================|         100..700
//   user login          |==================|               150..600  (50 scheduling, 100 join)
//   front render                                   |===|   800..900
trace::Trace rpc_trace(trace::NameTable& names, const std::string& id = "t") {
  TraceBuilder b(names, id);
  b.span("root", "", 0, 1000, "front", "GET /", SpanKind::kServer)
      .span("call", "root", 100, 600, "front", "login", SpanKind::kClient)
      .span("serve", "call", 150, 450, "user", "login", SpanKind::kServer)
      .span("render", "root", 800, 100, "front", "render");
  b.last().probe_scheduling_delay_ns = 7;
  return b.trace();
}

TEST(TraceAnalyzerTest, AttributesPathTimeToOperationsAndServices) {
  trace::NameTable names;
  const trace::Trace t = rpc_trace(names);
  TraceAnalyzer analyzer(make_jaeger_algorithm(), {});
  const TraceAnalysis& a = analyzer.analyze(t);
  ASSERT_TRUE(a.analyzed);
  EXPECT_EQ(a.end_to_end_ns, 1000);
  std::map<std::string, std::int64_t> ops;
  for (const auto& op : a.by_operation) ops[operation_key(names, op.service, op.operation)] = op.exclusive_ns;
  EXPECT_EQ(ops, (std::map<std::string, std::int64_t>{
                     {"front:GET /", 300}, {"front:login", 150}, {"user:login", 450}, {"front:render", 100}}));
  std::map<std::string, std::int64_t> services;
  for (const auto& s : a.by_service) services[std::string(names.name(s.service))] = s.exclusive_ns;
  EXPECT_EQ(services, (std::map<std::string, std::int64_t>{{"front", 550}, {"user", 450}}));
}

TEST(TraceAnalyzerTest, ExtractsSchedulingAndJoinDelays) {
  trace::NameTable names;
  const trace::Trace t = rpc_trace(names);
  TraceAnalyzer analyzer(make_capstone_algorithm(), {});
  const TraceAnalysis& a = analyzer.analyze(t);
  ASSERT_EQ(a.rpc_delays.size(), 1u);
  EXPECT_EQ(a.rpc_delays[0].scheduling_ns, 50);
  EXPECT_EQ(a.rpc_delays[0].join_ns, 100);
  EXPECT_EQ(a.delay_on_path_ns, 150);  // the client span's own time on the path
  EXPECT_EQ(a.probe_scheduling_ns, std::vector<std::int64_t>{7});
  EXPECT_TRUE(a.probe_join_ns.empty());
}

TEST(TraceAnalyzerTest, NegativeDelaysAreSkewClampedToZero) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("call", "", 100, 100, "a", "x", SpanKind::kClient).span("serve", "call", 90, 50, "a", "x", SpanKind::kServer);
  TraceAnalyzer analyzer(make_capstone_algorithm(), {});
  const TraceAnalysis& a = analyzer.analyze(b.trace());
  ASSERT_EQ(a.rpc_delays.size(), 1u);
  EXPECT_EQ(a.rpc_delays[0].scheduling_ns, 0);
  EXPECT_EQ(a.warnings.get(Warning::kClockSkew), 1u);
}

TEST(TraceAnalyzerTest, EmptyTraceIsReportedNotAnalyzed) {
  trace::NameTable names;
  trace::Trace empty;
  empty.trace_id = "e";
  TraceAnalyzer analyzer(make_crisp_algorithm(), {WhatIfScenario{"no_delays", {}, true}});
  const TraceAnalysis& a = analyzer.analyze(empty);
  EXPECT_FALSE(a.analyzed);
  EXPECT_EQ(a.warnings.get(Warning::kEmptyTrace), 1u);
  std::string line;
  append_trace_analysis_json(a, names, analyzer.scenarios(), line);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["analyzed"], false);
  EXPECT_EQ(j["warnings"]["empty_trace"], 1);
}

TEST(TraceAnalyzerTest, PerTraceJsonCarriesPathSectionsAndWhatIf) {
  trace::NameTable names;
  const trace::Trace t = rpc_trace(names);
  std::vector<WhatIfScenario> scenarios{{"remove:user", {names.intern("user")}, false}, {"no_delays", {}, true}};
  TraceAnalyzer analyzer(make_capstone_algorithm(), scenarios);
  const TraceAnalysis& a = analyzer.analyze(t);
  std::string line;
  append_trace_analysis_json(a, names, scenarios, line);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["trace_id"], "t");
  EXPECT_EQ(j["end_to_end_ns"], 1000);
  EXPECT_EQ(j["path"], (nlohmann::json{"front:GET /", "front:login", "user:login", "front:render"}));
  EXPECT_EQ(j["sections"].size(), 7u);
  EXPECT_EQ(j["sections"][0]["span_id"], "root");
  EXPECT_EQ(j["delays"]["rpc"][0]["scheduling_ns"], 50);
  ASSERT_EQ(j["what_if"].size(), 2u);
  EXPECT_EQ(j["what_if"][0]["scenario"], "remove:user");
  EXPECT_EQ(j["what_if"][0]["end_to_end_ns"], 1000 - 450);
  // Both RPC gaps go, and render's 7 ns of probe-measured scheduling delay.
  EXPECT_EQ(j["what_if"][1]["end_to_end_ns"], 1000 - 150 - 7);
}

TEST(AggregatorTest, CountsDistinctPathsAndRanksBottlenecks) {
  trace::NameTable names;
  std::vector<WhatIfScenario> scenarios{{"remove:user", {names.intern("user")}, false}};
  TraceAnalyzer analyzer(make_capstone_algorithm(), scenarios);
  CriticalPathAggregator aggregator(names, scenarios, AggregateOptions{5, 100, 100});
  for (int i = 0; i < 3; ++i) aggregator.add(analyzer.analyze(rpc_trace(names, testing::numbered("rpc", i))));
  TraceBuilder simple(names, "simple");
  simple.span("root", "", 0, 100, "front", "GET /");
  aggregator.add(analyzer.analyze(simple.trace()));
  trace::Trace empty;
  aggregator.add(analyzer.analyze(empty));

  const nlohmann::json j = aggregator.to_json();
  EXPECT_EQ(j["traces_total"], 5);
  EXPECT_EQ(j["traces_analyzed"], 4);
  EXPECT_EQ(j["critical_paths"]["distinct"], 2);
  EXPECT_EQ(j["critical_paths"]["top"][0]["count"], 3);
  EXPECT_EQ(j["critical_paths"]["top"][0]["example_trace_id"], "rpc0");
  EXPECT_DOUBLE_EQ(j["critical_paths"]["top"][0]["fraction"].get<double>(), 0.75);
  EXPECT_EQ(j["bottlenecks"]["by_mean"][0]["key"], "user:login");
  EXPECT_DOUBLE_EQ(j["bottlenecks"]["by_mean"][0]["frequency"].get<double>(), 0.75);
  EXPECT_EQ(j["bottlenecks"]["services_by_mean"][0]["service"], "front");
  EXPECT_EQ(j["warnings"]["empty_trace"], 1);
  EXPECT_EQ(j["end_to_end_ns"]["p50"], 1000);
  EXPECT_EQ(j["delays"]["rpc_scheduling_ns"]["count"], 3);
  EXPECT_EQ(j["delays"]["by_edge"][0]["server_service"], "user");
  ASSERT_EQ(j["what_if"].size(), 1u);
  EXPECT_EQ(j["what_if"][0]["end_to_end_ns"]["max"], 550);
  double share_sum = 0;
  for (const auto& op : j["operations"]) share_sum += op["share_of_end_to_end"].get<double>();
  EXPECT_NEAR(share_sum, 1.0, 1e-9);  // capstone: operation times add up to end-to-end
}

}  // namespace
}  // namespace tailscope::analyze
