#include "analyze/what_if.h"

#include <gtest/gtest.h>

#include "analyze/test_trace_builder.h"
#include "analyze/trace_analyzer.h"

namespace tailscope::analyze {
namespace {

using testing::TraceBuilder;
using trace::SpanKind;

trace::Trace Replay(const trace::Trace& in, const WhatIfScenario& scenario) {
  Warnings w;
  SpanTree tree;
  tree.Build(in, w);
  ClippedTree clipped;
  clipped.BuildJaeger(tree);
  WhatIfRetimer retimer;
  trace::Trace out;
  retimer.Retime(tree, clipped, scenario, out);
  return out;
}

std::int64_t RootDuration(const trace::Trace& t) {
  for (const auto& s : t.spans) {
    if (s.parent_ref == trace::RefType::kNone) return s.duration_ns;
  }
  return -1;
}

TEST(WhatIfTest, RemovingNothingReproducesTheTrace) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.Span("r", "", 1000, 500, "front")
      .Span("a", "r", 1010, 100, "back")
      .Span("a1", "a", 1020, 30, "db")
      .Span("b", "r", 1050, 300, "back")   // overlaps a
      .Span("c", "r", 1400, 50, "cache")   // after b
      .Span("z", "r", 1450, 0, "cache");
  const trace::Trace out = Replay(b.trace(), WhatIfScenario{"none", {}, false});
  ASSERT_EQ(out.spans.size(), b.trace().spans.size());
  for (const auto& s : out.spans) {
    const trace::Span* original = nullptr;
    for (const auto& o : b.trace().spans) {
      if (b.trace().SpanId(o) == out.SpanId(s)) original = &o;
    }
    ASSERT_NE(original, nullptr);
    EXPECT_EQ(s.start_ns, original->start_ns) << out.SpanId(s);
    EXPECT_EQ(s.duration_ns, original->duration_ns) << out.SpanId(s);
  }
}

TEST(WhatIfTest, RemovingASequentialServiceShortensByItsTime) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.Span("r", "", 0, 100, "front").Span("a", "r", 10, 30, "auth").Span("b", "r", 50, 40, "store");
  WhatIfScenario scenario{"remove:auth", {names.Intern("auth")}, false};
  EXPECT_EQ(RootDuration(Replay(b.trace(), scenario)), 70);
}

TEST(WhatIfTest, RemovingTheSlowBranchMovesThePathToTheOtherBranch) {
  // Two parallel calls: removing the slower service gains only the difference,
  // not its whole time, because the other branch becomes critical.
  trace::NameTable names;
  TraceBuilder b(names);
  b.Span("r", "", 0, 100, "front").Span("slow", "r", 10, 80, "search").Span("fast", "r", 10, 50, "ads");
  TraceAnalyzer analyzer(MakeCapstoneAlgorithm(), {WhatIfScenario{"remove:search", {names.Intern("search")}, false}});
  const TraceAnalysis& a = analyzer.Analyze(b.trace());
  ASSERT_EQ(a.what_if.size(), 1u);
  EXPECT_EQ(a.end_to_end_ns, 100);
  EXPECT_EQ(a.what_if[0].end_to_end_ns, 70);  // 100 - 80 + 50, not 100 - 80
  bool ads_on_path = false;
  for (const auto& op : a.what_if[0].by_operation) ads_on_path |= names.Name(op.service) == "ads" && op.exclusive_ns == 50;
  EXPECT_TRUE(ads_on_path);
}

TEST(WhatIfTest, RemovingDelaysCollapsesClientServerGaps) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.Span("r", "", 0, 200, "front", "GET", SpanKind::kServer)
      .Span("call", "r", 10, 100, "front", "rpc", SpanKind::kClient)
      .Span("serve", "call", 25, 70, "back", "rpc", SpanKind::kServer)  // 15 scheduling, 15 join
      .Span("next", "r", 120, 50, "front", "work");
  WhatIfScenario scenario{"no_delays", {}, true};
  EXPECT_EQ(RootDuration(Replay(b.trace(), scenario)), 170);
}

TEST(WhatIfTest, RemovingDelaysUsesProbeTags) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.Span("r", "", 0, 100).Span("task", "r", 20, 50);
  b.last().probe_scheduling_delay_ns = 15;
  b.last().probe_join_delay_ns = 10;
  EXPECT_EQ(RootDuration(Replay(b.trace(), WhatIfScenario{"no_delays", {}, true})), 75);
}

TEST(WhatIfTest, RemovedServiceKeepsItsDownstreamCalls) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.Span("r", "", 0, 100, "front").Span("mid", "r", 0, 100, "proxy").Span("leaf", "mid", 40, 20, "db");
  EXPECT_EQ(RootDuration(Replay(b.trace(), WhatIfScenario{"remove:proxy", {names.Intern("proxy")}, false})), 20);
}

}  // namespace
}  // namespace tailscope::analyze
