#include "analyze/analysis_json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analyze/test_trace_builder.h"
#include "analyze/trace_analyzer.h"

namespace tailscope::analyze {
namespace {

using testing::numbered;
using testing::TraceBuilder;
using trace::SpanKind;

// Names and ids that need escaping (quotes, backslashes, control
// characters, a colon) or repair (invalid UTF-8) come out as JSON strings
// holding exactly the text the model has.
TEST(AnalysisJsonTest, EscapesNamesAndIdsAndRepairsInvalidUtf8) {
  trace::NameTable names;
  TraceBuilder b(names, "t\"1");
  b.span("root\\", "", 0, 100, "svc \"q\"", "GET\n/\x01", SpanKind::kServer)
      .span("bad\xff", "root\\", 10, 50, "caf\xc3\xa9:x", "op\t", SpanKind::kClient);
  TraceAnalyzer analyzer(make_capstone_algorithm(), {});
  const TraceAnalysis& a = analyzer.analyze(b.trace());
  std::string line;
  append_trace_analysis_json(a, names, {}, line);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["trace_id"], "t\"1");
  EXPECT_EQ(j["root"]["span_id"], "root\\");
  EXPECT_EQ(j["root"]["service"], "svc \"q\"");
  EXPECT_EQ(j["root"]["operation"], "GET\n/\x01");
  EXPECT_EQ(j["path"], (nlohmann::json{"svc \"q\":GET\n/\x01", "caf\xc3\xa9:x:op\t"}));
  EXPECT_EQ(j["spans_on_path"][1]["span_id"], "bad\xEF\xBF\xBD");
}

// The streamed form is the appended form cut into chunks, and a writer kept
// across traces (its name cache warm, names added in between) writes what a
// fresh one writes.
TEST(AnalysisJsonTest, ChunkedAndCachedWritersWriteTheSameText) {
  trace::NameTable names;
  TraceBuilder big(names, "big");
  big.span("s0", "", 0, 1'000'000, "front", "GET /", SpanKind::kServer);
  for (int i = 1; i < 3000; ++i) {
    big.span(numbered("s", i), numbered("s", i - 1), i, 1'000'000 - 2 * i, "svc", numbered("op", i % 7));
  }
  TraceAnalyzer analyzer(make_jaeger_algorithm(), {});
  TraceAnalysisJsonWriter kept(names, {});
  std::string warm;
  kept.append(analyzer.analyze(big.trace()), warm);

  TraceBuilder small(names, "small");
  small.span("r", "", 0, 10, "new-service", "new-op", SpanKind::kServer);
  const TraceAnalysis& a = analyzer.analyze(small.trace());
  std::string fresh;
  append_trace_analysis_json(a, names, {}, fresh);
  std::string cached;
  kept.append(a, cached);
  EXPECT_EQ(cached, fresh);

  const TraceAnalysis& again = analyzer.analyze(big.trace());
  std::string whole;
  kept.append(again, whole);
  EXPECT_EQ(whole, warm);
  std::string joined;
  std::size_t chunks = 0;
  kept.write(again, [&](std::string_view chunk) {
    EXPECT_LE(chunk.size(), kTraceJsonChunkBytes + 4096);
    joined.append(chunk);
    ++chunks;
  });
  EXPECT_EQ(joined, whole);
  EXPECT_GT(chunks, 1u);
  EXPECT_EQ(nlohmann::json::parse(whole)["spans_on_path"].size(), 3000u);
}

// Integers are written 8 digits at a time: every boundary of that comes out
// as the number it is.
TEST(AnalysisJsonTest, WritesEveryIntegerExactly) {
  trace::NameTable names;
  TraceBuilder b(names, "t");
  b.span("r", "", 0, 10, "svc", "op", SpanKind::kServer);
  TraceAnalysis a;
  a.trace = &b.trace();
  a.analyzed = true;
  a.root = 0;
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  a.probe_scheduling_ns = {0,
                           1,
                           9,
                           10,
                           99,
                           100,
                           9'999'999,
                           99'999'999,
                           100'000'000,
                           100'000'001,
                           1'000'000'007,
                           9'999'999'999'999'999,
                           10'000'000'000'000'000,
                           1'700'000'000'010'002'000,
                           kMax,
                           -1,
                           -100'000'000,
                           -1'700'000'000'000'000'000,
                           kMin};
  a.start_ns = kMin;
  a.end_to_end_ns = kMax;
  std::string line;
  append_trace_analysis_json(a, names, {}, line);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["delays"]["probe_scheduling_ns"].get<std::vector<std::int64_t>>(), a.probe_scheduling_ns);
  EXPECT_EQ(j["start_ns"].get<std::int64_t>(), kMin);
  EXPECT_EQ(j["end_to_end_ns"].get<std::int64_t>(), kMax);
  EXPECT_NE(line.find("\"probe_scheduling_ns\":[0,1,9,10,99,100,9999999,99999999,100000000,100000001,"),
            std::string::npos);
}

}  // namespace
}  // namespace tailscope::analyze
