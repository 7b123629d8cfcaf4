#include "analyze/what_if.h"

#include <gtest/gtest.h>

#include "analyze/test_trace_builder.h"
#include "analyze/trace_analyzer.h"

namespace tailscope::analyze {
namespace {

using testing::TraceBuilder;
using trace::SpanKind;

trace::Trace replay(const trace::Trace& in, const WhatIfScenario& scenario) {
  Warnings w;
  SpanTree tree;
  tree.build(in, w);
  ClippedTree clipped;
  clipped.build_jaeger(tree);
  WhatIfRetimer retimer;
  trace::Trace out;
  retimer.retime(tree, clipped, scenario, out);
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
