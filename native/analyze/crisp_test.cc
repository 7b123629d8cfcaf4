// CRISP conformance: every fixture of ../shared/fixtures/critical-path/crisp
// must give exactly CRISP's exclusive critical-path time per
// "[service] operation" (testing / testing.opTimeExclusive).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "analyze/critical_path.h"
#include "analyze/span_tree.h"
#include "analyze/test_trace_builder.h"
#include "trace/trace_reader.h"

namespace tailscope::analyze {
namespace {

std::vector<std::string> CrispFixtures() {
  std::vector<std::string> names;
  const auto dir = testing::FixturesDir() / "crisp";
  if (std::filesystem::exists(dir)) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("fixtures-absent");
  return names;
}

class CrispFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CrispFixtureTest, ReproducesCrispExclusiveTimes) {
  const auto path = testing::FixturesDir() / "crisp" / (GetParam() + ".json");
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "conformance fixtures not found at " << testing::FixturesDir()
                 << " (a clone without ../shared): skipping";
  }
  const nlohmann::json fixture = nlohmann::json::parse(std::ifstream(path));
  const nlohmann::json& testing_block = fixture["testing"];
  const nlohmann::json& expected_json =
      testing_block.is_array() ? testing_block.at(0) : testing_block.at("opTimeExclusive");
  std::map<std::string, std::int64_t> want;
  for (const auto& [key, value] : expected_json.items()) want[key] = value.get<std::int64_t>();

  trace::NameTable names;
  std::vector<trace::Trace> traces;
  auto read = trace::ReadTraceFile(path.string(), names, {}, [&](trace::Trace& t) {
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
  MakeCrispAlgorithm()->Compute(tree, cp);

  std::map<std::string, std::int64_t> got;
  for (const SpanOnPath& s : cp.spans) {
    const trace::Span& span = tree.span(s.span);
    std::string key = "[";
    key += names.Name(span.service);
    key += "] ";
    key += names.Name(span.operation);
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

INSTANTIATE_TEST_SUITE_P(Crisp, CrispFixtureTest, ::testing::ValuesIn(CrispFixtures()),
                         [](const auto& info) { return info.param == "fixtures-absent" ? std::string("absent") : info.param; });

}  // namespace
}  // namespace tailscope::analyze
