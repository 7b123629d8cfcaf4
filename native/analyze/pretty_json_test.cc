#include "analyze/pretty_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analyze/analysis_json.h"
#include "analyze/test_trace_builder.h"
#include "analyze/trace_analyzer.h"

namespace tailscope::analyze {
namespace {

using testing::TraceBuilder;
using trace::SpanKind;

// What the result document printed before: the text parsed, dumped, nested.
std::string nlohmann_form(std::string_view compact, int indent, int depth) {
  std::string out;
  append_nested(
      nlohmann::ordered_json::parse(compact).dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace),
      indent, depth, out);
  return out;
}

// Texts the printer copies: the round trip prints them unchanged but for
// the layout, at every indent and depth.
TEST(PrettyJsonTest, PrintsWhatParseAndDumpPrint) {
  const std::vector<std::string> texts = {
      "{}",
      "[]",
      "0",
      "-1",
      "true",
      "null",
      R"("")",
      R"({"a":1})",
      R"({"a":{},"b":[],"c":[{}],"d":[[]],"e":[1,2,3]})",
      R"({"x":{"y":{"z":[false,null,true,{"w":"v"}]}}})",
      R"([-9223372036854775,18446744073709551,9223372036854775807,1234567890123456789])",
      std::string(R"({"s":"quote \" backslash \\ \b \f \n \r \t \u0001 \u001f \u0000 del )") + "\x7f" + R"("})",
      std::string(R"({"utf8":"caf)") + "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" + R"(","\u0002key":"v"})",
  };
  for (const std::string& text : texts) {
    for (int indent : {0, 1, 2, 4}) {
      for (int depth : {0, 1, 3}) {
        std::string out = "prefix";
        ASSERT_TRUE(append_pretty_json(text, indent, depth, out)) << text;
        EXPECT_EQ(out, "prefix" + nlohmann_form(text, indent, depth)) << text << " indent " << indent;
      }
    }
  }
}

// Texts the round trip prints otherwise (or refuses): declined, `out` left
// as it was; the fallback then prints nlohmann's form of the valid ones.
TEST(PrettyJsonTest, DeclinesWhatTheRoundTripChangesOrRefuses) {
  const std::vector<std::string> changed = {
      "1.5",
      "1e3",
      "-0",
      "[1.0]",
      R"({"a": 1})",
      "[1, 2]",
      R"("\/")",
      R"("\u0041")",
      R"("\u001F")",
      R"("\u0008")",
      R"("\u000a")",
      "12345678901234567890",
      "-1234567890123456789",
  };
  for (const std::string& text : changed) {
    std::string out = "prefix";
    EXPECT_FALSE(append_pretty_json(text, 2, 1, out)) << text;
    EXPECT_EQ(out, "prefix") << text;
    append_pretty_json_or_reparse(text, 2, 1, out);
    EXPECT_EQ(out, "prefix" + nlohmann_form(text, 2, 1)) << text;
  }
  const std::vector<std::string> invalid = {
      "",      "{",        "[1,]",     R"({"a"})", R"({"a":1,})", "[1]x", "01",    "tru",
      R"("a)", "\"\x01\"", "\"\xff\"", "\"\xc3\"", R"("\u00)",    "-",    "[1 2]", R"({1:2})",
  };
  for (const std::string& text : invalid) {
    std::string out = "prefix";
    EXPECT_FALSE(append_pretty_json(text, 2, 0, out)) << text;
    EXPECT_EQ(out, "prefix") << text;
    EXPECT_THROW(append_pretty_json_or_reparse(text, 2, 0, out), nlohmann::json::parse_error) << text;
  }
  std::string deep(200, '[');
  deep += std::string(200, ']');
  std::string out;
  EXPECT_FALSE(append_pretty_json(deep, 1, 0, out));  // past the recursion bound: the round trip prints it
  append_pretty_json_or_reparse(deep, 1, 0, out);
  EXPECT_EQ(out, nlohmann_form(deep, 1, 0));
}

// The per-trace writer's output, names needing escapes and repair included,
// is printed by the printer itself (the document's fast path), as the round
// trip prints it.
TEST(PrettyJsonTest, PrintsThePerTraceWritersOutputItself) {
  trace::NameTable names;
  TraceBuilder b(names, "t\"1");
  b.span("root\\", "", 0, 100, "svc \"q\"", "GET\n/\x01\x7f", SpanKind::kServer)
      .span("bad\xff", "root\\", 10, 50, "caf\xc3\xa9:x", "op\t", SpanKind::kClient)
      .span("c2", "root\\", 20, 30, "svc \"q\"", "other", SpanKind::kClient);
  TraceAnalyzer analyzer(make_capstone_algorithm(), {});
  std::string line;
  append_trace_analysis_json(analyzer.analyze(b.trace()), names, {}, line);
  for (int indent : {1, 2}) {
    std::string out;
    ASSERT_TRUE(append_pretty_json(line, indent, 2, out)) << line;
    EXPECT_EQ(out, nlohmann_form(line, indent, 2));
  }
}

}  // namespace
}  // namespace tailscope::analyze
