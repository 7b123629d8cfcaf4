#include "trace/internal/value_scanner.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace tailscope::trace::internal {
namespace {

// Byte-at-a-time reference: where the value starting at text[0] ends, or
// npos when it does not end (or nests deeper than max_depth).
std::size_t reference_end(const std::string& text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return std::string::npos;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string::npos;
}

// Values built from brackets, strings holding brackets, quotes and runs of
// backslashes, and filler, so block boundaries fall everywhere.
std::string random_value(std::mt19937& rng) {
  static const char* kPieces[] = {"{",
                                  "[",
                                  "}",
                                  "]",
                                  "\"a{b\"",
                                  "\"]\"",
                                  "\"x\\\"}\"",
                                  "\"\\\\\"",
                                  "\"\\\\\\\"[\"",
                                  "1234567",
                                  ",",
                                  ":",
                                  "\"long string without anything special in it at all\""};
  std::string text = "{";
  std::uniform_int_distribution<int> pick(0, sizeof kPieces / sizeof kPieces[0] - 1);
  const int length = std::uniform_int_distribution<int>(1, 200)(rng);
  for (int i = 0; i < length; ++i) text += kPieces[pick(rng)];
  return text + "}]}]}";
}

TEST(ValueScannerTest, FindsTheSameEndAsAByteLoopWhateverTheChunks) {
  std::mt19937 rng(7);
  for (int round = 0; round < 3000; ++round) {
    const std::string text = random_value(rng);
    const int max_depth = round % 3 == 0 ? 4 : 64;
    const std::size_t expected = reference_end(text, max_depth);
    ValueScanner scanner(max_depth);
    std::size_t from = 0;
    auto status = ValueScanner::Status::kNeedMore;
    while (status == ValueScanner::Status::kNeedMore && from < text.size()) {
      const std::size_t to = std::min(text.size(), from + std::uniform_int_distribution<std::size_t>(1, 150)(rng));
      status = scanner.scan(text.data(), from, to);
      from = to;
    }
    if (expected == std::string::npos) {
      EXPECT_NE(status, ValueScanner::Status::kComplete) << text;
    } else {
      ASSERT_EQ(status, ValueScanner::Status::kComplete) << text;
      EXPECT_EQ(scanner.end(), expected) << text;
    }
  }
}

TEST(ValueScannerTest, StopsAtTheDepthLimit) {
  const std::string text = std::string(100, '[') + std::string(100, ']');
  ValueScanner scanner(64);
  EXPECT_EQ(scanner.scan(text.data(), 0, text.size()), ValueScanner::Status::kTooDeep);
  ValueScanner deep_enough(100);
  ASSERT_EQ(deep_enough.scan(text.data(), 0, text.size()), ValueScanner::Status::kComplete);
  EXPECT_EQ(deep_enough.end(), text.size());
}

}  // namespace
}  // namespace tailscope::trace::internal
