// CRISP conformance: every fixture of ../shared/fixtures/critical-path/crisp
// must give exactly CRISP's exclusive critical-path time per
// "[service] operation" (testing / testing.opTimeExclusive).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "analyze/critical_path.h"
#include "analyze/span_tree.h"
#include "trace/conformance_fixtures.h"

namespace tailscope::analyze {
namespace {

class CrispFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CrispFixtureTest, ReproducesCrispExclusiveTimes) {
  const auto path = trace::testing::fixtures_dir() / "crisp" / (GetParam() + ".json");
  TAILSCOPE_REQUIRE_FIXTURE(path);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  const nlohmann::json fixture = nlohmann::json::parse(text.str());
  const nlohmann::json& testing_block = fixture["testing"];
  const nlohmann::json& expected_json =
      testing_block.is_array() ? testing_block.at(0) : testing_block.at("opTimeExclusive");
  std::map<std::string, std::int64_t> want;
  for (const auto& [key, value] : expected_json.items()) want[key] = value.get<std::int64_t>();

  trace::NameTable names;
  trace::Trace trace;
  ASSERT_TRUE(trace::testing::read_single_trace(text.str(), names, trace));
  Warnings warnings;
  SpanTree tree;
  tree.build(trace, warnings);
  ASSERT_TRUE(tree.has_root());
  CriticalPath cp;
  make_crisp_algorithm()->compute(tree, cp);

  std::map<std::string, std::int64_t> got;
  for (const SpanOnPath& s : cp.spans) {
    const trace::Span& span = tree.span(s.span);
    std::string key = "[";
    key += names.name(span.service);
    key += "] ";
    key += names.name(span.operation);
    ASSERT_EQ(s.exclusive_ns % 1000, 0);
    got[key] += s.exclusive_ns / 1000;
  }
  EXPECT_EQ(got, want);

  // The sections still tile the root exactly.
  ASSERT_FALSE(cp.sections.empty());
  EXPECT_EQ(cp.sections.front().start_ns, tree.start(tree.root()));
  EXPECT_EQ(cp.sections.back().end_ns, tree.end(tree.root()));
  for (std::size_t i = 1; i < cp.sections.size(); ++i) {
    EXPECT_EQ(cp.sections[i - 1].end_ns, cp.sections[i].start_ns);
  }
}

INSTANTIATE_TEST_SUITE_P(Crisp, CrispFixtureTest, ::testing::ValuesIn(trace::testing::fixture_names("crisp")),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tailscope::analyze
