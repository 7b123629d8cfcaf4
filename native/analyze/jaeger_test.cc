// Jaeger UI conformance: every fixture of ../shared/fixtures/critical-path/
// jaeger-ui must give exactly Jaeger UI's sections.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "analyze/critical_path.h"
#include "analyze/span_tree.h"
#include "analyze/test_trace_builder.h"
#include "trace/trace_reader.h"

namespace tailscope::analyze {
namespace {

std::vector<std::string> JaegerFixtures() {
  std::vector<std::string> names;
  const auto dir = testing::FixturesDir() / "jaeger-ui";
  if (std::filesystem::exists(dir)) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("fixtures-absent");
  return names;
}

struct Section {
  std::string span_id;
  std::int64_t start_us;
  std::int64_t end_us;
  bool operator==(const Section&) const = default;
};

void PrintTo(const Section& s, std::ostream* os) { *os << s.span_id << "[" << s.start_us << "," << s.end_us << "]"; }

class JaegerFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(JaegerFixtureTest, ReproducesJaegerUiSections) {
  const auto path = testing::FixturesDir() / "jaeger-ui" / (GetParam() + ".json");
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "conformance fixtures not found at " << testing::FixturesDir()
                 << " (a clone without ../shared): skipping";
  }
  const nlohmann::json fixture = nlohmann::json::parse(std::ifstream(path));
  trace::NameTable names;
  std::vector<trace::Trace> traces;
  auto read = trace::ReadTraceText(fixture["trace"].dump(), names, {}, [&](trace::Trace& t) {
    traces.push_back(t);
    return true;
  });
  ASSERT_TRUE(read.ok) << read.error;
  ASSERT_EQ(traces.size(), 1u);

  Warnings warnings;
  SpanTree tree;
  tree.Build(traces[0], warnings);
  ASSERT_TRUE(tree.has_root());
  CriticalPath cp;
  MakeJaegerAlgorithm()->Compute(tree, cp);

  std::vector<Section> got;
  for (const CriticalPathSection& s : cp.sections) {
    ASSERT_EQ(s.start_ns % 1000, 0);
    got.push_back(Section{std::string(traces[0].SpanId(tree.span(s.span))), s.start_ns / 1000, s.end_ns / 1000});
  }
  // Jaeger UI lists sections walking backwards from the root's end.
  std::reverse(got.begin(), got.end());
  std::vector<Section> want;
  for (const auto& s : fixture["expected_critical_path_sections"]) {
    want.push_back(Section{s["spanID"].get<std::string>(), s["sectionStart"].get<std::int64_t>(),
                           s["sectionEnd"].get<std::int64_t>()});
  }
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(JaegerUi, JaegerFixtureTest, ::testing::ValuesIn(JaegerFixtures()),
                         [](const auto& info) { return info.param == "fixtures-absent" ? std::string("absent") : info.param; });

}  // namespace
}  // namespace tailscope::analyze
