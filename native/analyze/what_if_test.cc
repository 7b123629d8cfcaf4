#include "analyze/what_if.h"

#include <gtest/gtest.h>

#include "analyze/delays.h"
#include "analyze/test_trace_builder.h"
#include "analyze/trace_analyzer.h"

namespace tailscope::analyze {
namespace {

using testing::TraceBuilder;
using trace::SpanKind;

// Replays with the RPC pairs the delay analysis infers (naming rule on when
// `names` is given), as TraceAnalyzer does.
trace::Trace replay(const trace::Trace& in, const WhatIfScenario& scenario, const trace::NameTable* names = nullptr) {
  Warnings w;
  SpanTree tree;
  tree.build(in, w);
  TraceAnalysis pairs;
  DelayExtractor(names).extract(tree, pairs);
  ClippedTree clipped;
  clipped.build_jaeger(tree);
  WhatIfRetimer retimer;
  trace::Trace out;
  retimer.retime(tree, clipped, scenario, pairs.rpc_delays, out);
  return out;
}

std::int64_t root_duration(const trace::Trace& t) {
  for (const auto& s : t.spans) {
    if (s.parent_ref == trace::RefType::kNone) return s.duration_ns;
  }
  return -1;
}

TEST(WhatIfTest, RemovingNothingReproducesTheTrace) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("r", "", 1000, 500, "front")
      .span("a", "r", 1010, 100, "back")
      .span("a1", "a", 1020, 30, "db")
      .span("b", "r", 1050, 300, "back")  // overlaps a
      .span("c", "r", 1400, 50, "cache")  // after b
      .span("z", "r", 1450, 0, "cache");
  const trace::Trace out = replay(b.trace(), WhatIfScenario{"none", {}, false});
  ASSERT_EQ(out.spans.size(), b.trace().spans.size());
  for (const auto& s : out.spans) {
    const trace::Span* original = nullptr;
    for (const auto& o : b.trace().spans) {
      if (b.trace().span_id(o) == out.span_id(s)) original = &o;
    }
    ASSERT_NE(original, nullptr);
    EXPECT_EQ(s.start_ns, original->start_ns) << out.span_id(s);
    EXPECT_EQ(s.duration_ns, original->duration_ns) << out.span_id(s);
  }
}

TEST(WhatIfTest, RemovingASequentialServiceShortensByItsTime) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("r", "", 0, 100, "front").span("a", "r", 10, 30, "auth").span("b", "r", 50, 40, "store");
  WhatIfScenario scenario{"remove:auth", {names.intern("auth")}, false};
  EXPECT_EQ(root_duration(replay(b.trace(), scenario)), 70);
}

TEST(WhatIfTest, RemovingTheSlowBranchMovesThePathToTheOtherBranch) {
  // Two parallel calls: removing the slower service gains only the difference,
  // not its whole time, because the other branch becomes critical.
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("r", "", 0, 100, "front").span("slow", "r", 10, 80, "search").span("fast", "r", 10, 50, "ads");
  TraceAnalyzer analyzer(make_capstone_algorithm(), {WhatIfScenario{"remove:search", {names.intern("search")}, false}});
  const TraceAnalysis& a = analyzer.analyze(b.trace());
  ASSERT_EQ(a.what_if.size(), 1u);
  EXPECT_EQ(a.end_to_end_ns, 100);
  EXPECT_EQ(a.what_if[0].end_to_end_ns, 70);  // 100 - 80 + 50, not 100 - 80
  bool ads_on_path = false;
  for (const auto& op : a.what_if[0].by_operation)
    ads_on_path |= names.name(op.service) == "ads" && op.exclusive_ns == 50;
  EXPECT_TRUE(ads_on_path);
}

TEST(WhatIfTest, RemovingDelaysCollapsesClientServerGaps) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("r", "", 0, 200, "front", "GET", SpanKind::kServer)
      .span("call", "r", 10, 100, "front", "rpc", SpanKind::kClient)
      .span("serve", "call", 25, 70, "back", "rpc", SpanKind::kServer)  // 15 scheduling, 15 join
      .span("next", "r", 120, 50, "front", "work");
  WhatIfScenario scenario{"no_delays", {}, true};
  EXPECT_EQ(root_duration(replay(b.trace(), scenario)), 170);
}

// A DeathStarBench-shaped export: no span.kind anywhere. The what-if removes
// delays on the pairs the delay analysis infers — a cross-process parent
// (upload_client -> upload_server in another service) and the naming rule
// inside one process (store_client -> store_server) — and keeps the gaps of a
// same-process child that is not an RPC (work -> helper).
//
//   r      front  0..300
//   a      front  upload_client 10..110   a_s  back   upload_server 25..95  (15 + 15 removable)
//   b      front  store_client 120..200   b_s  front  store_server 130..190 (10 + 10 removable)
//   c      front  work 210..260           c_1  front  helper 220..250       (kept: not a pair)
//
// Replayed: a = 70, b = 60, c = 50; r = 10 + 70 + 10 + 60 + 10 + 50 + tail 40 = 250
// (= 300 - 50). With pairs taken from span.kind tags only, nothing is removed (300).
TEST(WhatIfTest, RemovingDelaysUsesInferredRpcPairsOfUntaggedSpans) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("r", "", 0, 300, "front", "compose")
      .span("a", "r", 10, 100, "front", "upload_client")
      .span("a_s", "a", 25, 70, "back", "upload_server")
      .span("b", "r", 120, 80, "front", "store_client")
      .span("b_s", "b", 130, 60, "front", "store_server")
      .span("c", "r", 210, 50, "front", "work")
      .span("c_1", "c", 220, 30, "front", "helper");
  const WhatIfScenario scenario{"no_delays", {}, true};
  EXPECT_EQ(root_duration(replay(b.trace(), scenario, &names)), 250);
  // Without the naming rule only the cross-process pair is an RPC: 300 - 30.
  EXPECT_EQ(root_duration(replay(b.trace(), scenario)), 270);

  TraceAnalyzer analyzer(make_capstone_algorithm(), {scenario});
  analyzer.set_delay_options(&names, kDefaultStaggerWindowNs);
  const TraceAnalysis& a = analyzer.analyze(b.trace());
  ASSERT_EQ(a.rpc_delays.size(), 2u);
  ASSERT_EQ(a.what_if.size(), 1u);
  EXPECT_EQ(a.end_to_end_ns, 300);
  EXPECT_EQ(a.what_if[0].end_to_end_ns, 250);
}

// A retried server child (same callee, later start) is not a pair in the
// delay analysis, so its gaps are not removed either: only the first call's.
//   call 0..100 with serve 10..40 (10 before) and retry 50..90 (10 after)
// Paired: serve. Replayed: serve at 0 (its 10 removed), 30 long; retry waits
// for serve: gap 10 kept, 40 long; tail 10 kept (it follows the retry, not
// the pair): call = 30 + 10 + 40 + 10 = 90, r = 90. (Tags alone, as before,
// also removed the retry's gap and tail: 70.)
TEST(WhatIfTest, RemovingDelaysSkipsRetriedServerChildren) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("r", "", 0, 100, "front", "GET", SpanKind::kServer)
      .span("call", "r", 0, 100, "front", "rpc", SpanKind::kClient)
      .span("serve", "call", 10, 30, "back", "rpc", SpanKind::kServer)
      .span("retry", "call", 50, 40, "back", "rpc", SpanKind::kServer);
  EXPECT_EQ(root_duration(replay(b.trace(), WhatIfScenario{"no_delays", {}, true})), 90);
}

TEST(WhatIfTest, RemovingDelaysUsesProbeTags) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("r", "", 0, 100).span("task", "r", 20, 50);
  b.last().probe_scheduling_delay_ns = 15;
  b.last().probe_join_delay_ns = 10;
  EXPECT_EQ(root_duration(replay(b.trace(), WhatIfScenario{"no_delays", {}, true})), 75);
}

TEST(WhatIfTest, RemovedServiceKeepsItsDownstreamCalls) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("r", "", 0, 100, "front").span("mid", "r", 0, 100, "proxy").span("leaf", "mid", 40, 20, "db");
  EXPECT_EQ(root_duration(replay(b.trace(), WhatIfScenario{"remove:proxy", {names.intern("proxy")}, false})), 20);
}

}  // namespace
}  // namespace tailscope::analyze
