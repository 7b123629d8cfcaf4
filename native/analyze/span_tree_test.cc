// Dirty data: every repair is counted as a warning and the critical path is
// still well formed, for every algorithm.
#include "analyze/span_tree.h"

#include <gtest/gtest.h>

#include "analyze/critical_path.h"
#include "analyze/test_trace_builder.h"

namespace tailscope::analyze {
namespace {

using testing::TraceBuilder;

struct Built {
  SpanTree tree;
  Warnings warnings;
};

void build_tree(const trace::Trace& t, Built& b) { b.tree.build(t, b.warnings); }

// The path of every algorithm tiles the root.
void expect_well_formed_paths(const SpanTree& tree) {
  for (const char* name : {"capstone", "jaeger", "crisp"}) {
    CriticalPath cp;
    make_critical_path_algorithm(name)->compute(tree, cp);
    SCOPED_TRACE(name);
    std::int64_t at = tree.start(tree.root());
    for (const auto& s : cp.sections) {
      EXPECT_EQ(s.start_ns, at);
      at = s.end_ns;
    }
    EXPECT_EQ(at, tree.end(tree.root()));
  }
}

TEST(SpanTreeTest, BuildsChildrenInStartOrder) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.span("r", "", 0, 100).span("b", "r", 50, 10).span("a", "r", 10, 10).span("c", "a", 12, 2);
  Built b;
  build_tree(t.trace(), b);
  ASSERT_TRUE(b.tree.has_root());
  EXPECT_EQ(b.tree.root(), 0u);
  ASSERT_EQ(b.tree.children(0).size(), 2u);
  EXPECT_EQ(b.tree.children(0)[0], 2u);
  EXPECT_EQ(b.tree.children(0)[1], 1u);
  EXPECT_EQ(b.tree.preorder(), (std::vector<std::uint32_t>{0, 2, 3, 1}));
  EXPECT_FALSE(b.warnings.any());
}

TEST(SpanTreeTest, OrphansAreCountedAndLeftOut) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.span("r", "", 0, 100).span("a", "r", 10, 10).span("o", "missing", 20, 10).span("oc", "o", 21, 5);
  Built b;
  build_tree(t.trace(), b);
  EXPECT_EQ(b.warnings.get(Warning::kOrphanSpan), 1u);
  EXPECT_EQ(b.tree.preorder().size(), 2u);
  EXPECT_FALSE(b.tree.in_tree(2));
  EXPECT_FALSE(b.tree.in_tree(3));
  expect_well_formed_paths(b.tree);
}

TEST(SpanTreeTest, MissingRootUsesTheLongestOrphan) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.span("a", "gone", 0, 10).span("b", "gone", 0, 50).span("bc", "b", 5, 5);
  Built b;
  build_tree(t.trace(), b);
  EXPECT_EQ(b.warnings.get(Warning::kMissingRoot), 1u);
  EXPECT_EQ(b.warnings.get(Warning::kOrphanSpan), 2u);
  ASSERT_TRUE(b.tree.has_root());
  EXPECT_EQ(b.tree.root(), 1u);
  expect_well_formed_paths(b.tree);
}

TEST(SpanTreeTest, MultipleRootsKeepTheLongest) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.span("short", "", 0, 10).span("long", "", 5, 100).span("x", "long", 10, 10);
  Built b;
  build_tree(t.trace(), b);
  EXPECT_EQ(b.warnings.get(Warning::kMultipleRoots), 1u);
  EXPECT_EQ(b.tree.root(), 1u);
}

TEST(SpanTreeTest, DuplicateSpanIdsKeepTheFirst) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.span("r", "", 0, 100).span("a", "r", 10, 10).span("a", "r", 60, 30).span("c", "a", 12, 3);
  Built b;
  build_tree(t.trace(), b);
  EXPECT_EQ(b.warnings.get(Warning::kDuplicateSpanId), 1u);
  EXPECT_FALSE(b.tree.in_tree(2));
  EXPECT_EQ(b.tree.parent(3), 1u);
  expect_well_formed_paths(b.tree);
}

TEST(SpanTreeTest, NegativeDurationsBecomeZero) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.span("r", "", 0, 100).span("a", "r", 50, -30);
  Built b;
  build_tree(t.trace(), b);
  EXPECT_EQ(b.warnings.get(Warning::kNegativeDuration), 1u);
  EXPECT_EQ(b.tree.end(1), 50);
  expect_well_formed_paths(b.tree);
}

TEST(SpanTreeTest, CyclesAreCutOffAndCounted) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.span("r", "", 0, 100)
      .span("a", "b", 10, 10)  // a <-> b
      .span("b", "a", 20, 10)
      .span("under", "a", 11, 2)    // hangs below the cycle
      .span("self", "self", 30, 5)  // its own parent
      .span("ok", "r", 40, 10);
  Built b;
  build_tree(t.trace(), b);
  EXPECT_EQ(b.warnings.get(Warning::kCycle), 4u);  // a, b, under, self
  EXPECT_EQ(b.tree.preorder().size(), 2u);
  expect_well_formed_paths(b.tree);
}

TEST(SpanTreeTest, ChildrenOutsideTheirParentAreCounted) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.span("r", "", 100, 100, "front")
      .span("over", "r", 150, 100, "front")   // outlives the parent: clipped
      .span("early", "r", 50, 100, "back")    // starts before, other service: skew
      .span("after", "r", 250, 10, "front");  // entirely outside: dropped
  Built b;
  build_tree(t.trace(), b);
  EXPECT_EQ(b.warnings.get(Warning::kChildOutlivesParent), 2u);
  EXPECT_EQ(b.warnings.get(Warning::kChildOutsideParent), 1u);
  EXPECT_EQ(b.warnings.get(Warning::kClockSkew), 1u);
  expect_well_formed_paths(b.tree);
}

TEST(SpanTreeTest, ExtremeTimesAreClamped) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.span("r", "", std::numeric_limits<std::int64_t>::max() - 5, std::numeric_limits<std::int64_t>::max())
      .span("a", "r", std::numeric_limits<std::int64_t>::min(), 10);
  Built b;
  build_tree(t.trace(), b);
  EXPECT_EQ(b.warnings.get(Warning::kTimeOutOfRange), 2u);
  EXPECT_LE(b.tree.end(0), 2 * kMaxTimeNs);
  expect_well_formed_paths(b.tree);
}

TEST(SpanTreeTest, EmptyTraceHasNoRoot) {
  trace::NameTable names;
  TraceBuilder t(names);
  Built b;
  build_tree(t.trace(), b);
  EXPECT_FALSE(b.tree.has_root());
  EXPECT_EQ(b.warnings.get(Warning::kEmptyTrace), 1u);
}

TEST(SpanTreeTest, AllSpansInACycleLeaveNoRoot) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.span("a", "b", 0, 10).span("b", "a", 0, 10);
  Built b;
  build_tree(t.trace(), b);
  // No parentless span and no orphan: nothing can be analyzed.
  EXPECT_FALSE(b.tree.has_root());
  EXPECT_EQ(b.warnings.get(Warning::kCycle), 2u);
  EXPECT_EQ(b.warnings.get(Warning::kMissingRoot), 1u);
}

TEST(SpanTreeTest, ReusesItselfAcrossTraces) {
  trace::NameTable names;
  SpanTree tree;
  for (int n : {50, 3, 20}) {
    TraceBuilder t(names);
    t.span("r", "", 0, 1000);
    for (int i = 1; i < n; ++i) t.span(std::to_string(i), "r", i, 5);
    Warnings w;
    tree.build(t.trace(), w);
    EXPECT_EQ(tree.preorder().size(), static_cast<std::size_t>(n));
    EXPECT_FALSE(w.any());
  }
}

}  // namespace
}  // namespace tailscope::analyze
