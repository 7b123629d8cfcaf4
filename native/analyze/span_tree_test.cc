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

void BuildTree(const trace::Trace& t, Built& b) { b.tree.Build(t, b.warnings); }

// The path of every algorithm tiles the root.
void ExpectWellFormedPaths(const SpanTree& tree) {
  for (const char* name : {"capstone", "jaeger", "crisp"}) {
    CriticalPath cp;
    MakeCriticalPathAlgorithm(name)->Compute(tree, cp);
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
  t.Span("r", "", 0, 100).Span("b", "r", 50, 10).Span("a", "r", 10, 10).Span("c", "a", 12, 2);
  Built b;
  BuildTree(t.trace(), b);
  ASSERT_TRUE(b.tree.has_root());
  EXPECT_EQ(b.tree.root(), 0u);
  ASSERT_EQ(b.tree.children(0).size(), 2u);
  EXPECT_EQ(b.tree.children(0)[0], 2u);
  EXPECT_EQ(b.tree.children(0)[1], 1u);
  EXPECT_EQ(b.tree.preorder(), (std::vector<std::uint32_t>{0, 2, 3, 1}));
  EXPECT_FALSE(b.warnings.Any());
}

TEST(SpanTreeTest, OrphansAreCountedAndLeftOut) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.Span("r", "", 0, 100).Span("a", "r", 10, 10).Span("o", "missing", 20, 10).Span("oc", "o", 21, 5);
  Built b;
  BuildTree(t.trace(), b);
  EXPECT_EQ(b.warnings.Get(Warning::kOrphanSpan), 1u);
  EXPECT_EQ(b.tree.preorder().size(), 2u);
  EXPECT_FALSE(b.tree.in_tree(2));
  EXPECT_FALSE(b.tree.in_tree(3));
  ExpectWellFormedPaths(b.tree);
}

TEST(SpanTreeTest, MissingRootUsesTheLongestOrphan) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.Span("a", "gone", 0, 10).Span("b", "gone", 0, 50).Span("bc", "b", 5, 5);
  Built b;
  BuildTree(t.trace(), b);
  EXPECT_EQ(b.warnings.Get(Warning::kMissingRoot), 1u);
  EXPECT_EQ(b.warnings.Get(Warning::kOrphanSpan), 2u);
  ASSERT_TRUE(b.tree.has_root());
  EXPECT_EQ(b.tree.root(), 1u);
  ExpectWellFormedPaths(b.tree);
}

TEST(SpanTreeTest, MultipleRootsKeepTheLongest) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.Span("short", "", 0, 10).Span("long", "", 5, 100).Span("x", "long", 10, 10);
  Built b;
  BuildTree(t.trace(), b);
  EXPECT_EQ(b.warnings.Get(Warning::kMultipleRoots), 1u);
  EXPECT_EQ(b.tree.root(), 1u);
}

TEST(SpanTreeTest, DuplicateSpanIdsKeepTheFirst) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.Span("r", "", 0, 100).Span("a", "r", 10, 10).Span("a", "r", 60, 30).Span("c", "a", 12, 3);
  Built b;
  BuildTree(t.trace(), b);
  EXPECT_EQ(b.warnings.Get(Warning::kDuplicateSpanId), 1u);
  EXPECT_FALSE(b.tree.in_tree(2));
  EXPECT_EQ(b.tree.parent(3), 1u);
  ExpectWellFormedPaths(b.tree);
}

TEST(SpanTreeTest, NegativeDurationsBecomeZero) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.Span("r", "", 0, 100).Span("a", "r", 50, -30);
  Built b;
  BuildTree(t.trace(), b);
  EXPECT_EQ(b.warnings.Get(Warning::kNegativeDuration), 1u);
  EXPECT_EQ(b.tree.end(1), 50);
  ExpectWellFormedPaths(b.tree);
}

TEST(SpanTreeTest, CyclesAreCutOffAndCounted) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.Span("r", "", 0, 100)
      .Span("a", "b", 10, 10)      // a <-> b
      .Span("b", "a", 20, 10)
      .Span("under", "a", 11, 2)   // hangs below the cycle
      .Span("self", "self", 30, 5) // its own parent
      .Span("ok", "r", 40, 10);
  Built b;
  BuildTree(t.trace(), b);
  EXPECT_EQ(b.warnings.Get(Warning::kCycle), 4u);  // a, b, under, self
  EXPECT_EQ(b.tree.preorder().size(), 2u);
  ExpectWellFormedPaths(b.tree);
}

TEST(SpanTreeTest, ChildrenOutsideTheirParentAreCounted) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.Span("r", "", 100, 100, "front")
      .Span("over", "r", 150, 100, "front")   // outlives the parent: clipped
      .Span("early", "r", 50, 100, "back")    // starts before, other service: skew
      .Span("after", "r", 250, 10, "front");  // entirely outside: dropped
  Built b;
  BuildTree(t.trace(), b);
  EXPECT_EQ(b.warnings.Get(Warning::kChildOutlivesParent), 2u);
  EXPECT_EQ(b.warnings.Get(Warning::kChildOutsideParent), 1u);
  EXPECT_EQ(b.warnings.Get(Warning::kClockSkew), 1u);
  ExpectWellFormedPaths(b.tree);
}

TEST(SpanTreeTest, ExtremeTimesAreClamped) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.Span("r", "", std::numeric_limits<std::int64_t>::max() - 5, std::numeric_limits<std::int64_t>::max())
      .Span("a", "r", std::numeric_limits<std::int64_t>::min(), 10);
  Built b;
  BuildTree(t.trace(), b);
  EXPECT_EQ(b.warnings.Get(Warning::kTimeOutOfRange), 2u);
  EXPECT_LE(b.tree.end(0), 2 * kMaxTimeNs);
  ExpectWellFormedPaths(b.tree);
}

TEST(SpanTreeTest, EmptyTraceHasNoRoot) {
  trace::NameTable names;
  TraceBuilder t(names);
  Built b;
  BuildTree(t.trace(), b);
  EXPECT_FALSE(b.tree.has_root());
  EXPECT_EQ(b.warnings.Get(Warning::kEmptyTrace), 1u);
}

TEST(SpanTreeTest, AllSpansInACycleLeaveNoRoot) {
  trace::NameTable names;
  TraceBuilder t(names);
  t.Span("a", "b", 0, 10).Span("b", "a", 0, 10);
  Built b;
  BuildTree(t.trace(), b);
  // No parentless span and no orphan: nothing can be analyzed.
  EXPECT_FALSE(b.tree.has_root());
  EXPECT_EQ(b.warnings.Get(Warning::kCycle), 2u);
  EXPECT_EQ(b.warnings.Get(Warning::kMissingRoot), 1u);
}

TEST(SpanTreeTest, ReusesItselfAcrossTraces) {
  trace::NameTable names;
  SpanTree tree;
  for (int n : {50, 3, 20}) {
    TraceBuilder t(names);
    t.Span("r", "", 0, 1000);
    for (int i = 1; i < n; ++i) t.Span(std::to_string(i), "r", i, 5);
    Warnings w;
    tree.Build(t.trace(), w);
    EXPECT_EQ(tree.preorder().size(), static_cast<std::size_t>(n));
    EXPECT_FALSE(w.Any());
  }
}

}  // namespace
}  // namespace tailscope::analyze
