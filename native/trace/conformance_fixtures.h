// Test helper: the shared critical-path conformance fixtures
// (../shared/fixtures/critical-path beside the project; the environment
// variable TAILSCOPE_CRITPATH_FIXTURES overrides the path). Used only by
// *_test.cc of native/trace and native/analyze.
//
// The fixtures are not part of a user's clone, so a test without them skips
// with the reason, visibly. CI sets TAILSCOPE_REQUIRE_FIXTURES=1 (.ci/run):
// there a missing fixture folder is a failure, so conformance can never pass
// by not running.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "trace/trace.h"
#include "trace/trace_reader.h"

namespace tailscope::trace::testing {

// The parameter of a fixture-parameterized test when the folder is absent:
// the one instance then skips (or fails in CI) with the reason.
inline constexpr std::string_view kFixturesAbsent = "fixtures_absent";

inline std::filesystem::path fixtures_dir() {
  if (const char* env = std::getenv("TAILSCOPE_CRITPATH_FIXTURES")) return env;
  return TAILSCOPE_CRITPATH_FIXTURES;
}

inline bool fixtures_required() {
  const char* env = std::getenv("TAILSCOPE_REQUIRE_FIXTURES");
  return env != nullptr && std::string_view(env) == "1";
}

// Stems of the *.json files in fixtures_dir()/subdir, sorted; {kFixturesAbsent}
// when there are none.
inline std::vector<std::string> fixture_names(std::string_view subdir) {
  std::vector<std::string> names;
  const std::filesystem::path dir = fixtures_dir() / subdir;
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.emplace_back(kFixturesAbsent);
  return names;
}

// "" when `path` exists, else why the test cannot run.
inline std::string missing_fixture_reason(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return "";
  return "conformance fixtures not found at " + fixtures_dir().string() + " (a clone without ../shared)";
}

// Reads `json` (one trace) into `out`; names the problem when it is not
// exactly one readable trace.
inline ::testing::AssertionResult read_single_trace(std::string_view json, NameTable& names, Trace& out) {
  int traces = 0;
  const ReadResult read = read_trace_text(json, names, {}, [&](Trace& t) {
    if (++traces == 1) out = t;
    return true;
  });
  if (!read.ok) return ::testing::AssertionFailure() << "unreadable fixture: " << read.error;
  if (traces != 1) return ::testing::AssertionFailure() << "expected one trace, read " << traces;
  return ::testing::AssertionSuccess();
}

}  // namespace tailscope::trace::testing

// Skips the test with the reason when the fixture at `path` is missing, or
// fails it when TAILSCOPE_REQUIRE_FIXTURES=1 (CI). A macro: GTEST_SKIP and
// FAIL return from the test body.
#define TAILSCOPE_REQUIRE_FIXTURE(path)                                                                 \
  if (const std::string tailscope_missing_ = ::tailscope::trace::testing::missing_fixture_reason(path); \
      !tailscope_missing_.empty()) {                                                                    \
    if (::tailscope::trace::testing::fixtures_required()) {                                             \
      FAIL() << tailscope_missing_ << "; required here (TAILSCOPE_REQUIRE_FIXTURES=1)";                 \
    }                                                                                                   \
    GTEST_SKIP() << tailscope_missing_;                                                                 \
  }
