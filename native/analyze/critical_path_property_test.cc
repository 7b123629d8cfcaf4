// Properties every algorithm must hold on any trace, checked on randomly
// generated (and deliberately dirty) traces: the sections tile the root span
// exactly (no gap, no overlap), each section lies within its span, every
// section's span is on the path, and exclusive times add up.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "analyze/critical_path.h"
#include "analyze/span_tree.h"
#include "analyze/test_trace_builder.h"

namespace tailscope::analyze {
namespace {

trace::Trace random_trace(std::mt19937_64& rng, trace::NameTable& names, int max_spans) {
  testing::TraceBuilder b(names);
  std::uniform_int_distribution<int> span_count(1, max_spans);
  const int n = span_count(rng);
  std::vector<std::pair<std::int64_t, std::int64_t>> intervals;
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  b.span("s0", "", 0, pick(0, 1000), "svc0");
  intervals.emplace_back(0, b.last().duration_ns);
  for (int i = 1; i < n; ++i) {
    const int parent = pick(0, i - 1);
    const auto [ps, pd] = intervals[parent];
    std::int64_t start = ps + (pd > 0 ? pick(0, static_cast<int>(pd)) : 0);
    std::int64_t duration = pick(0, static_cast<int>(std::max<std::int64_t>(1, pd)));
    switch (pick(0, 9)) {  // dirty data now and then
      case 0:
        start = ps - pick(0, 50);
        break;  // starts before its parent
      case 1:
        duration += pick(0, 200);
        break;  // outlives its parent
      case 2:
        start = ps + pd + pick(0, 20);
        break;  // entirely after it
      case 3:
        duration = 0;
        break;
      default:
        break;
    }
    const auto kind = static_cast<trace::SpanKind>(pick(0, 5));
    const auto ref = pick(0, 7) == 0 ? trace::RefType::kFollowsFrom : trace::RefType::kChildOf;
    b.span(testing::numbered("s", i), testing::numbered("s", parent), start, duration,
           testing::numbered("svc", pick(0, 4)), testing::numbered("op", pick(0, 3)), kind, ref);
    intervals.emplace_back(start, duration);
  }
  return b.trace();
}

void check_path_properties(const SpanTree& tree, const CriticalPath& cp, std::string_view algorithm) {
  const std::uint32_t root = tree.root();
  const std::int64_t root_start = tree.start(root), root_end = tree.end(root);
  std::vector<std::uint8_t> on_path(tree.size(), 0);
  std::int64_t exclusive_sum = 0;
  for (const SpanOnPath& s : cp.spans) {
    on_path[s.span] = 1;
    exclusive_sum += s.exclusive_ns;
    EXPECT_GE(s.exclusive_ns, 0);
    EXPECT_TRUE(tree.in_tree(s.span));
  }
  ASSERT_FALSE(cp.spans.empty());
  EXPECT_EQ(cp.spans.front().span, root);
  if (root_end == root_start) {
    EXPECT_TRUE(cp.sections.empty());
    return;
  }
  ASSERT_FALSE(cp.sections.empty());
  EXPECT_EQ(cp.sections.front().start_ns, root_start);
  EXPECT_EQ(cp.sections.back().end_ns, root_end);
  std::int64_t covered = 0;
  for (std::size_t i = 0; i < cp.sections.size(); ++i) {
    const CriticalPathSection& s = cp.sections[i];
    EXPECT_GT(s.end_ns, s.start_ns) << "empty section";
    if (i > 0) {
      EXPECT_EQ(cp.sections[i - 1].end_ns, s.start_ns) << "gap or overlap";
    }
    EXPECT_GE(s.start_ns, tree.start(s.span)) << "section before its span";
    EXPECT_LE(s.end_ns, tree.end(s.span)) << "section after its span";
    EXPECT_TRUE(on_path[s.span]) << "section of a span not on the path";
    covered += s.end_ns - s.start_ns;
  }
  EXPECT_EQ(covered, root_end - root_start);
  // Parents precede children in the path list.
  std::vector<std::uint8_t> seen(tree.size(), 0);
  for (const SpanOnPath& s : cp.spans) {
    if (s.span != root) {
      EXPECT_TRUE(seen[tree.parent(s.span)]);
    }
    seen[s.span] = 1;
  }
  if (algorithm != "crisp") {
    EXPECT_EQ(exclusive_sum, root_end - root_start);
  }
}

class CriticalPathPropertyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CriticalPathPropertyTest, SectionsTileTheRootOnRandomTraces) {
  auto algorithm = make_critical_path_algorithm(GetParam());
  ASSERT_NE(algorithm, nullptr);
  std::mt19937_64 rng(20240607);
  trace::NameTable names;
  SpanTree tree;
  CriticalPath cp;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    const trace::Trace t = random_trace(rng, names, iteration % 3 == 0 ? 200 : 12);
    Warnings w;
    tree.build(t, w);
    ASSERT_TRUE(tree.has_root());
    algorithm->compute(tree, cp);
    SCOPED_TRACE(testing::numbered("iteration ", iteration));
    check_path_properties(tree, cp, GetParam());
    if (::testing::Test::HasFailure()) break;
  }
}

TEST_P(CriticalPathPropertyTest, DeepChainsDoNotExhaustTheStack) {
  trace::NameTable names;
  testing::TraceBuilder b(names);
  constexpr int kDepth = 200'000;
  b.span("0", "", 0, 2 * kDepth);
  for (int i = 1; i < kDepth; ++i) b.span(std::to_string(i), std::to_string(i - 1), i, 2 * (kDepth - i));
  Warnings w;
  SpanTree tree;
  tree.build(b.trace(), w);
  CriticalPath cp;
  make_critical_path_algorithm(GetParam())->compute(tree, cp);
  EXPECT_EQ(cp.spans.size(), static_cast<std::size_t>(kDepth));
  check_path_properties(tree, cp, GetParam());
}

TEST_P(CriticalPathPropertyTest, WideFanOutsAreWellFormed) {
  // 2 000 overlapping siblings: the paths are still well formed. How fast the
  // algorithms are on wide fan-outs is critical_path_benchmark.cc's business
  // (a test asserts behaviour, it does not time).
  trace::NameTable names;
  testing::TraceBuilder b(names);
  constexpr int kChildren = 2'000;
  b.span("root", "", 0, 10 * kChildren);
  for (int i = 0; i < kChildren; ++i) b.span(testing::numbered("c", i), "root", 5 * i, 20);
  Warnings w;
  SpanTree tree;
  tree.build(b.trace(), w);
  CriticalPath cp;
  make_critical_path_algorithm(GetParam())->compute(tree, cp);
  check_path_properties(tree, cp, GetParam());
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, CriticalPathPropertyTest, ::testing::Values("capstone", "jaeger", "crisp"));

}  // namespace
}  // namespace tailscope::analyze
