// Jaeger UI conformance: every fixture of ../shared/fixtures/critical-path/
// jaeger-ui must give exactly Jaeger UI's sections.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analyze/critical_path.h"
#include "analyze/span_tree.h"
#include "trace/conformance_fixtures.h"

namespace tailscope::analyze {
namespace {

struct Section {
  std::string span_id;
  std::int64_t start_us;
  std::int64_t end_us;
  bool operator==(const Section&) const = default;
};

// gtest's printer hook: the name is gtest's.
void PrintTo(const Section& s, std::ostream* os) { *os << s.span_id << "[" << s.start_us << "," << s.end_us << "]"; }

class JaegerFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(JaegerFixtureTest, ReproducesJaegerUiSections) {
  const auto path = trace::testing::fixtures_dir() / "jaeger-ui" / (GetParam() + ".json");
  TAILSCOPE_REQUIRE_FIXTURE(path);
  const nlohmann::json fixture = nlohmann::json::parse(std::ifstream(path));
  trace::NameTable names;
  trace::Trace trace;
  ASSERT_TRUE(trace::testing::read_single_trace(fixture["trace"].dump(), names, trace));

  Warnings warnings;
  SpanTree tree;
  tree.build(trace, warnings);
  ASSERT_TRUE(tree.has_root());
  CriticalPath cp;
  make_jaeger_algorithm()->compute(tree, cp);

  std::vector<Section> got;
  for (const CriticalPathSection& s : cp.sections) {
    ASSERT_EQ(s.start_ns % 1000, 0);
    got.push_back(Section{std::string(trace.span_id(tree.span(s.span))), s.start_ns / 1000, s.end_ns / 1000});
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

INSTANTIATE_TEST_SUITE_P(JaegerUi, JaegerFixtureTest, ::testing::ValuesIn(trace::testing::fixture_names("jaeger-ui")),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tailscope::analyze
