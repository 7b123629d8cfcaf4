// The capstone model's three overlap rules, and the trace on which the three
// algorithms disagree (the example in docs/critical-path.md).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "analyze/critical_path.h"
#include "analyze/span_tree.h"
#include "analyze/test_trace_builder.h"

namespace tailscope::analyze {
namespace {

using testing::TraceBuilder;

struct Result {
  std::vector<std::string> sections;              // "id[start,end]"
  std::map<std::string, std::int64_t> exclusive;  // span id -> ns, spans on the path
};

Result run_algorithm(const trace::Trace& t, std::string_view algorithm) {
  Warnings w;
  SpanTree tree;
  tree.build(t, w);
  CriticalPath cp;
  make_critical_path_algorithm(algorithm)->compute(tree, cp);
  Result r;
  for (const auto& s : cp.sections) {
    std::string text(t.span_id(tree.span(s.span)));
    text += '[';
    text += std::to_string(s.start_ns);
    text += ',';
    text += std::to_string(s.end_ns);
    text += ']';
    r.sections.push_back(std::move(text));
  }
  for (const auto& s : cp.spans) r.exclusive[std::string(t.span_id(tree.span(s.span)))] = s.exclusive_ns;
  return r;
}

using Sections = std::vector<std::string>;
using Exclusive = std::map<std::string, std::int64_t>;

TEST(CapstoneTest, MutuallyExclusiveChildrenAreBothOnThePath) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("root", "", 0, 100).span("A", "root", 10, 20).span("B", "root", 40, 20);
  const Result r = run_algorithm(b.trace(), "capstone");
  EXPECT_EQ(r.sections, (Sections{"root[0,10]", "A[10,30]", "root[30,40]", "B[40,60]", "root[60,100]"}));
  EXPECT_EQ(r.exclusive, (Exclusive{{"root", 60}, {"A", 20}, {"B", 20}}));
}

TEST(CapstoneTest, CompleteOverlapKeepsTheLongerSpan) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("root", "", 0, 100).span("A", "root", 10, 70).span("B", "root", 20, 30);
  const Result r = run_algorithm(b.trace(), "capstone");
  EXPECT_EQ(r.sections, (Sections{"root[0,10]", "A[10,80]", "root[80,100]"}));
  EXPECT_EQ(r.exclusive.count("B"), 0u);
}

TEST(CapstoneTest, EqualStartsKeepTheLongerSpan) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("root", "", 0, 100).span("A", "root", 10, 40).span("B", "root", 10, 60);
  EXPECT_EQ(run_algorithm(b.trace(), "capstone").sections, (Sections{"root[0,10]", "B[10,70]", "root[70,100]"}));
}

TEST(CapstoneTest, PartialOverlapSpansFromFirstStartToLastEnd) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("root", "", 0, 100).span("A", "root", 10, 40).span("B", "root", 30, 40);
  const Result r = run_algorithm(b.trace(), "capstone");
  EXPECT_EQ(r.sections, (Sections{"root[0,10]", "A[10,30]", "B[30,70]", "root[70,100]"}));
  EXPECT_EQ(r.exclusive, (Exclusive{{"root", 40}, {"A", 20}, {"B", 40}}));
}

TEST(CapstoneTest, RecursesWithinTheWindowAChildHolds) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("root", "", 0, 100)
      .span("A", "root", 10, 40)  // holds [10,30] on the path: B starts at 30
      .span("A1", "A", 12, 8)     // inside A's window
      .span("A2", "A", 35, 10)    // after A's window: not on the path
      .span("B", "root", 30, 40)
      .span("B1", "B", 40, 20);
  const Result r = run_algorithm(b.trace(), "capstone");
  EXPECT_EQ(r.sections, (Sections{"root[0,10]", "A[10,12]", "A1[12,20]", "A[20,30]", "B[30,40]", "B1[40,60]",
                                  "B[60,70]", "root[70,100]"}));
  EXPECT_EQ(r.exclusive.count("A2"), 0u);
}

TEST(CapstoneTest, ChainOfOverlapsHandsOverAtEachStart) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("root", "", 0, 100)
      .span("A", "root", 0, 50)
      .span("X", "root", 5, 10)
      .span("B", "root", 40, 30)
      .span("C", "root", 60, 40);
  EXPECT_EQ(run_algorithm(b.trace(), "capstone").sections, (Sections{"A[0,40]", "B[40,60]", "C[60,100]"}));
}

TEST(CapstoneTest, ProducerDoesNotWaitForItsConsumer) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("root", "", 0, 100, "s", "", trace::SpanKind::kProducer)
      .span("consumer", "root", 10, 80, "s", "", trace::SpanKind::kConsumer);
  EXPECT_EQ(run_algorithm(b.trace(), "capstone").sections, (Sections{"root[0,100]"}));
}

// X  |==================================================|  0..1000
// A        |====================|                         100..505
// B                            |===================|      500..900
// A and B overlap by 5 ns, 0.5 % of X.
TEST(DisagreementTest, TheThreeAlgorithmsDisagreeOnOverlappingSiblings) {
  trace::NameTable names;
  TraceBuilder b(names);
  b.span("X", "", 0, 1000).span("A", "X", 100, 405).span("B", "X", 500, 400);
  // Jaeger UI: A ends after B starts, so A is never the last child to finish
  // before the walk's current point.
  const Result jaeger = run_algorithm(b.trace(), "jaeger");
  EXPECT_EQ(jaeger.sections, (Sections{"X[0,500]", "B[500,900]", "X[900,1000]"}));
  EXPECT_EQ(jaeger.exclusive, (Exclusive{{"X", 600}, {"B", 400}}));
  // CRISP: the 0.5 % overlap is clock skew, so A happens before B; whole
  // spans are charged.
  const Result crisp = run_algorithm(b.trace(), "crisp");
  EXPECT_EQ(crisp.exclusive, (Exclusive{{"X", 195}, {"A", 405}, {"B", 400}}));
  EXPECT_EQ(crisp.sections, (Sections{"X[0,100]", "A[100,505]", "B[505,900]", "X[900,1000]"}));
  // Capstone: partial overlap, both on the path, A until B starts.
  const Result capstone = run_algorithm(b.trace(), "capstone");
  EXPECT_EQ(capstone.sections, (Sections{"X[0,100]", "A[100,500]", "B[500,900]", "X[900,1000]"}));
  EXPECT_EQ(capstone.exclusive, (Exclusive{{"X", 200}, {"A", 400}, {"B", 400}}));
}

}  // namespace
}  // namespace tailscope::analyze
