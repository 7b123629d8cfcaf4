// RPC pairs inferred from traces without span.kind (DeathStarBench's Jaeger
// exports), launch stagger, retries, clock skew, and "unavailable" when no
// pair can be found. Expected values are worked out by hand in the comments.
#include "analyze/delays.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "analyze/aggregate.h"
#include "analyze/analysis_json.h"
#include "analyze/test_trace_builder.h"
#include "analyze/trace_analyzer.h"

namespace tailscope::analyze {
namespace {

using testing::TraceBuilder;
using trace::SpanKind;

// A compose-post request as DeathStarBench records it: no span.kind tags, a
// <call>_client span in the caller, a <call>_server span in the callee.
//
//   nginx  /compose                 0..1000
//   nginx   compose_post_client    10..990
//   compose  compose_post_server   20..980   cross-process: sched 10, join 10
//   compose   compose_text_client  30..330   ┐ one fan-out launch (window 100):
//   compose   compose_unique_id_c  35..100   │ staggers 5 and 12
//   compose   compose_media_client 42..120   ┘
//   compose   compose_creator_cl  500..600   new launch (470 > window)
//   compose   store_client        700..800   tagged client
//   text       compose_text_server 40..320   sched 10, join 10
//   text        tokenize           50..90    same process, unrelated name: no pair
//   text        url_shorten_client 100..200
//   text         url_shorten_server 110..190 same process, names pair: sched 10, join 10
//   unique      compose_unique_id_server 38..95  sched 3, join 5
//   unique      compose_unique_id_server 60..90  a retry: counted, not paired
//   media       compose_media_server 50..125 ends 5 after its client: join clamped to 0
//   user        compose_creator_server 510..590  sched 10, join 10
//   storage     store_server 705..795 (tagged server)    sched 5, join 5
trace::Trace deathstarbench_trace(trace::NameTable& names) {
  TraceBuilder b(names, "dsb");
  b.span("root", "", 0, 1000, "nginx", "/compose")
      .span("cpc", "root", 10, 980, "nginx", "compose_post_client")
      .span("cps", "cpc", 20, 960, "compose", "compose_post_server")
      .span("ctc", "cps", 30, 300, "compose", "compose_text_client")
      .span("cuc", "cps", 35, 65, "compose", "compose_unique_id_client")
      .span("cmc", "cps", 42, 78, "compose", "compose_media_client")
      .span("ccc", "cps", 500, 100, "compose", "compose_creator_client")
      .span("stc", "cps", 700, 100, "compose", "store_client", SpanKind::kClient)
      .span("cts", "ctc", 40, 280, "text", "compose_text_server")
      .span("tok", "cts", 50, 40, "text", "tokenize")
      .span("usc", "cts", 100, 100, "text", "url_shorten_client")
      .span("uss", "usc", 110, 80, "text", "url_shorten_server")
      .span("cus", "cuc", 38, 57, "unique", "compose_unique_id_server")
      .span("cus2", "cuc", 60, 30, "unique", "compose_unique_id_server")
      .span("cms", "cmc", 50, 75, "media", "compose_media_server")
      .span("ccs", "ccc", 510, 80, "user", "compose_creator_server")
      .span("sts", "stc", 705, 90, "storage", "store_server", SpanKind::kServer);
  return b.trace();
}

using Pair = std::tuple<std::int64_t, std::int64_t, std::string>;  // scheduling, join, rule

std::map<std::string, Pair> pairs_by_client(const TraceAnalysis& a) {
  std::map<std::string, Pair> out;
  for (const RpcDelay& d : a.rpc_delays) {
    out[std::string(a.trace->span_id(a.trace->spans[d.client_span])) + "->" +
        std::string(a.trace->span_id(a.trace->spans[d.server_span]))] =
        Pair{d.scheduling_ns, d.join_ns, std::string(kPairRuleNames[static_cast<std::size_t>(d.rule)])};
  }
  return out;
}

TEST(DelayInferenceTest, PairsDeathStarBenchSpansWithoutKindTags) {
  trace::NameTable names;
  const trace::Trace t = deathstarbench_trace(names);
  TraceAnalyzer analyzer(make_critical_path_algorithm("capstone"), {});
  analyzer.set_delay_options(&names, 100);
  const TraceAnalysis& a = analyzer.analyze(t);
  const std::map<std::string, Pair> expected = {
      {"cpc->cps", {10, 10, "cross_process_parent"}}, {"ctc->cts", {10, 10, "cross_process_parent"}},
      {"cuc->cus", {3, 5, "cross_process_parent"}},   {"cmc->cms", {8, 0, "cross_process_parent"}},
      {"ccc->ccs", {10, 10, "cross_process_parent"}}, {"usc->uss", {10, 10, "client_server_name"}},
      {"stc->sts", {5, 5, "span_kind_tag"}},
  };
  EXPECT_EQ(pairs_by_client(a), expected);
  EXPECT_EQ(a.pairing.by_rule, (std::array<std::uint64_t, 3>{1, 5, 1}));
  EXPECT_EQ(a.pairing.name_confirmed, 5u);  // every cross-process pair but store (not _client/_server)
  EXPECT_EQ(a.pairing.retried_server_children, 1u);
  std::map<std::string, std::int64_t> stagger;
  for (const LaunchStagger& l : a.launch_stagger)
    stagger[std::string(t.span_id(t.spans[l.client_span]))] = l.stagger_ns;
  EXPECT_EQ(stagger, (std::map<std::string, std::int64_t>{{"cuc", 5}, {"cmc", 12}}));
}

TEST(DelayInferenceTest, WindowDecidesWhichSiblingsAreOneLaunch) {
  trace::NameTable names;
  const trace::Trace t = deathstarbench_trace(names);
  TraceAnalyzer analyzer(make_critical_path_algorithm("capstone"), {});
  analyzer.set_delay_options(&names, 10);  // 12 > 10: media starts a launch of its own
  const TraceAnalysis& a = analyzer.analyze(t);
  ASSERT_EQ(a.launch_stagger.size(), 1u);
  EXPECT_EQ(a.launch_stagger[0].stagger_ns, 5);
}

TEST(DelayInferenceTest, TagsThatNameAnotherRoleAreBelieved) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("root", "", 0, 100, "a", "handle", SpanKind::kServer)  // a server parent is no client side
      .span("x", "root", 10, 50, "b", "work")
      .span("p", "root", 60, 10, "a", "send", SpanKind::kProducer)
      .span("c", "p", 65, 30, "q", "receive", SpanKind::kConsumer);
  TraceAnalyzer analyzer(make_critical_path_algorithm("capstone"), {});
  analyzer.set_delay_options(&names, kDefaultStaggerWindowNs);
  EXPECT_TRUE(analyzer.analyze(b.trace()).rpc_delays.empty());
}

TEST(DelayInferenceTest, ReplicasOfOneServiceAreTwoProcesses) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("root", "", 0, 100, "cache", "get").span("child", "root", 20, 50, "cache", "get");
  b.last().process_id = {};
  trace::Trace t = b.trace();
  t.spans[0].process_id = t.store("p1");
  t.spans[1].process_id = t.store("p2");
  TraceAnalyzer analyzer(make_critical_path_algorithm("capstone"), {});
  analyzer.set_delay_options(&names, kDefaultStaggerWindowNs);
  const TraceAnalysis& a = analyzer.analyze(t);
  ASSERT_EQ(a.rpc_delays.size(), 1u);
  EXPECT_EQ(a.rpc_delays[0].rule, PairRule::kCrossProcess);
  EXPECT_EQ(a.rpc_delays[0].scheduling_ns, 20);
  EXPECT_EQ(a.rpc_delays[0].join_ns, 30);
}

TEST(DelayInferenceTest, AggregateCountsRulesAndStagger) {
  trace::NameTable names;
  const trace::Trace t = deathstarbench_trace(names);
  TraceAnalyzer analyzer(make_critical_path_algorithm("capstone"), {});
  analyzer.set_delay_options(&names, 100);
  AggregateOptions options;
  options.stagger_window_ns = 100;
  CriticalPathAggregator aggregator(names, {}, options);
  aggregator.add(analyzer.analyze(t));
  const nlohmann::ordered_json j = aggregator.to_json();
  const auto& pairing = j["delays"]["pairing"];
  EXPECT_EQ(pairing["pairs"], 7);
  EXPECT_EQ(pairing["by_rule"]["span_kind_tag"], 1);
  EXPECT_EQ(pairing["by_rule"]["cross_process_parent"], 5);
  EXPECT_EQ(pairing["by_rule"]["client_server_name"], 1);
  EXPECT_EQ(pairing["retried_server_children"], 1);
  EXPECT_EQ(j["delays"]["rpc_scheduling_ns"]["count"], 7);
  EXPECT_EQ(j["delays"]["rpc_scheduling_ns"]["max"], 10);
  EXPECT_EQ(j["delays"]["launch_stagger_ns"]["count"], 2);
  EXPECT_EQ(j["delays"]["launch_stagger_ns"]["max"], 12);
  EXPECT_FALSE(j["delays"]["on_path_share_of_end_to_end"].is_null());
}

TEST(DelayInferenceTest, NothingInferredIsUnavailableNotZero) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("root", "", 0, 100, "mono", "handle").span("step", "root", 10, 50, "mono", "work");
  TraceAnalyzer analyzer(make_critical_path_algorithm("capstone"), {});
  analyzer.set_delay_options(&names, kDefaultStaggerWindowNs);
  CriticalPathAggregator aggregator(names, {});
  const TraceAnalysis& a = analyzer.analyze(b.trace());
  std::string line;
  append_trace_analysis_json(a, names, {}, line);
  EXPECT_TRUE(nlohmann::json::parse(line)["delays"]["on_path_ns"].is_null());
  aggregator.add(a);
  const nlohmann::ordered_json j = aggregator.to_json();
  for (const char* key : {"rpc_scheduling_ns", "rpc_join_ns", "launch_stagger_ns", "on_path_ns", "probe_join_ns"}) {
    const auto& d = j["delays"][key];
    EXPECT_TRUE(d["count"].is_null()) << key;
    EXPECT_TRUE(d["mean"].is_null()) << key;
    EXPECT_TRUE(d["p99"].is_null()) << key;
    EXPECT_FALSE(d["unavailable"].get<std::string>().empty()) << key;
  }
  EXPECT_TRUE(j["delays"]["on_path_share_of_end_to_end"].is_null());
  EXPECT_NE(j["delays"]["on_path_share_unavailable"].get<std::string>().find("no RPC pair"), std::string::npos);
  const MeasurementLists lists = aggregator.measurements("capstone");
  std::set<std::string> unavailable;
  for (const auto& u : lists.unavailable) unavailable.insert(u["name"].get<std::string>());
  for (const char* name : {"rpc_scheduling", "rpc_join", "launch_stagger", "delay_on_path"}) {
    EXPECT_EQ(unavailable.count(name), 1u) << name;
  }
  for (const auto& m : lists.measurements) EXPECT_EQ(unavailable.count(m["name"].get<std::string>()), 0u);
}

}  // namespace
}  // namespace tailscope::analyze
