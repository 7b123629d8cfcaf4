#include "trace/trace_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "trace/conformance_fixtures.h"

namespace tailscope::trace {
namespace {

struct ReadAllResult {
  ReadResult result;
  std::vector<Trace> traces;
};

ReadAllResult read_all(std::string_view json, NameTable& names, ReadOptions options = {}) {
  ReadAllResult out;
  out.result = read_trace_text(json, names, options, [&](Trace& t) {
    out.traces.push_back(t);
    return true;
  });
  return out;
}

const Span* find_span(const Trace& trace, std::string_view id) {
  for (const Span& s : trace.spans) {
    if (trace.span_id(s) == id) return &s;
  }
  return nullptr;
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/tailscope-trace-test-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, std::string_view data) { std::ofstream(path, std::ios::binary) << data; }

void write_gzip(const std::string& path, std::string_view data) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, data.data(), static_cast<unsigned>(data.size())), static_cast<int>(data.size()));
  gzclose(f);
}

constexpr std::string_view kEnvelope = R"({
  "data": [
    {
      "traceID": "t1",
      "spans": [
        {"traceID": "t1", "spanID": "a", "operationName": "GET /", "references": [],
         "startTime": 1000, "duration": 500, "processID": "p2",
         "tags": [{"key": "span.kind", "type": "string", "value": "server"},
                  {"key": "http.status_code", "type": "int64", "value": 200}],
         "logs": [{"timestamp": 1001, "fields": [{"key": "event", "value": "x"}]}]},
        {"traceID": "t1", "spanID": "b", "operationName": "call", "startTime": 1100, "duration": 100,
         "references": [{"refType": "FOLLOWS_FROM", "traceID": "t1", "spanID": "x"},
                        {"refType": "CHILD_OF", "traceID": "t1", "spanID": "a"}],
         "processID": "p1",
         "tags": [{"value": true, "type": "bool", "key": "error"},
                  {"key": "tailscope.scheduling_delay_ns", "type": "int64", "value": 1234},
                  {"key": "tailscope.join_delay_ns", "type": "int64", "value": "77"}]}
      ],
      "processes": {"p1": {"serviceName": "backend", "tags": [{"key": "hostname", "value": "h"}]},
                    "p2": {"serviceName": "frontend"}},
      "warnings": null
    },
    {"traceID": "t2", "spans": [{"spanID": "c", "operationName": "op", "startTime": 5, "duration": 1,
                                 "process": {"serviceName": "inline"}}]}
  ],
  "total": 0, "limit": 0, "offset": 0, "errors": null
})";

TEST(TraceReaderTest, ReadsJaegerEnvelopeTraceByTrace) {
  NameTable names;
  auto out = read_all(kEnvelope, names);
  ASSERT_TRUE(out.result.ok) << out.result.error;
  ASSERT_EQ(out.traces.size(), 2u);
  EXPECT_EQ(out.result.stats.traces, 2u);
  EXPECT_EQ(out.result.stats.spans, 3u);
  EXPECT_EQ(out.result.stats.jaeger_traces, 2u);

  const Trace& t1 = out.traces[0];
  EXPECT_EQ(t1.trace_id, "t1");
  ASSERT_EQ(t1.spans.size(), 2u);
  const Span* a = find_span(t1, "a");
  const Span* b = find_span(t1, "b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(names.name(a->service), "frontend");  // processes come after the spans
  EXPECT_EQ(names.name(b->service), "backend");
  EXPECT_EQ(names.name(a->operation), "GET /");
  EXPECT_EQ(a->start_ns, 1'000'000);  // microseconds in, nanoseconds out
  EXPECT_EQ(a->duration_ns, 500'000);
  EXPECT_EQ(a->kind, SpanKind::kServer);
  EXPECT_EQ(a->parent_ref, RefType::kNone);
  EXPECT_FALSE(a->error);
  // CHILD_OF wins over an earlier FOLLOWS_FROM.
  EXPECT_EQ(b->parent_ref, RefType::kChildOf);
  EXPECT_EQ(t1.parent_span_id(*b), "a");
  EXPECT_TRUE(b->error);  // value before key
  EXPECT_EQ(b->probe_scheduling_delay_ns, 1234);
  EXPECT_EQ(b->probe_join_delay_ns, 77);

  const Trace& t2 = out.traces[1];
  ASSERT_EQ(t2.spans.size(), 1u);
  EXPECT_EQ(names.name(t2.spans[0].service), "inline");
}

TEST(TraceReaderTest, ReadsSingleTraceObject) {
  NameTable names;
  auto out = read_all(R"({"traceID": "x", "processes": {"p": {"serviceName": "s"}},
                         "spans": [{"spanID": "1", "operationName": "o", "startTime": 1, "duration": 2,
                                    "processID": "p"}]})",
                      names);
  ASSERT_TRUE(out.result.ok) << out.result.error;
  ASSERT_EQ(out.traces.size(), 1u);
  EXPECT_EQ(out.traces[0].trace_id, "x");
  EXPECT_EQ(names.name(out.traces[0].spans[0].service), "s");
}

TEST(TraceReaderTest, ReadsNdjsonAndTopLevelArrays) {
  NameTable names;
  const std::string ndjson = R"({"traceID": "1", "spans": [{"spanID": "a", "startTime": 1, "duration": 1}]})"
                             "\n"
                             R"({"data": [{"traceID": "2", "spans": []}, {"traceID": "3", "spans": []}]})"
                             "\n\n"
                             R"([{"traceID": "4", "spans": []}])"
                             "\n";
  auto out = read_all(ndjson, names);
  ASSERT_TRUE(out.result.ok) << out.result.error;
  ASSERT_EQ(out.traces.size(), 4u);
  EXPECT_EQ(out.traces[0].trace_id, "1");
  EXPECT_EQ(out.traces[3].trace_id, "4");
}

TEST(TraceReaderTest, EnvelopeWithoutTracesYieldsNothing) {
  NameTable names;
  auto out = read_all(R"({"data": null, "total": 0, "errors": [{"code": 1}]})", names);
  ASSERT_TRUE(out.result.ok) << out.result.error;
  EXPECT_TRUE(out.traces.empty());
}

TEST(TraceReaderTest, CountsSpansWithoutIdOrService) {
  NameTable names;
  auto out = read_all(R"({"traceID": "x", "spans": [
        {"operationName": "no id", "startTime": 1, "duration": 1},
        {"spanID": "b", "processID": "missing", "startTime": "12", "duration": 1.5},
        {"spanID": "c", "startTime": "soon", "duration": 1}]})",
                      names);
  ASSERT_TRUE(out.result.ok) << out.result.error;
  ASSERT_EQ(out.traces[0].spans.size(), 2u);
  EXPECT_EQ(out.result.stats.dropped_spans_without_id, 1u);
  EXPECT_EQ(out.result.stats.spans_without_service, 2u);
  EXPECT_EQ(out.result.stats.bad_timestamps, 1u);
  EXPECT_EQ(out.traces[0].spans[0].service, NameTable::kUnknownService);
  EXPECT_EQ(out.traces[0].spans[0].start_ns, 12'000);    // numeric string
  EXPECT_EQ(out.traces[0].spans[0].duration_ns, 1'500);  // fractional microseconds
}

// Regression: times beyond int64 were read as 0 (counted as bad_timestamp)
// instead of being clamped as docs/critical-path.md says. They saturate at the
// int64 limit; the span tree then clamps them to ±2^61 ns (time_out_of_range).
TEST(TraceReaderTest, TimesBeyondInt64SaturateInsteadOfBecomingZero) {
  NameTable names;
  auto jaeger = read_all(R"({"traceID": "x", "spans": [
        {"spanID": "double", "startTime": 99999999999999999999, "duration": -99999999999999999999},
        {"spanID": "uint64", "startTime": 18446744073709551615, "duration": 1},
        {"spanID": "times1000", "startTime": 9300000000000000, "duration": -9300000000000000},
        {"spanID": "string", "startTime": "99999999999999999999", "duration": "-99999999999999999999"}]})",
                         names);
  ASSERT_TRUE(jaeger.result.ok) << jaeger.result.error;
  EXPECT_EQ(jaeger.result.stats.bad_timestamps, 0u);
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  for (const char* id : {"double", "uint64", "times1000", "string"}) {
    const Span* span = find_span(jaeger.traces[0], id);
    ASSERT_NE(span, nullptr) << id;
    EXPECT_EQ(span->start_ns, kMax) << id;
  }
  EXPECT_EQ(find_span(jaeger.traces[0], "double")->duration_ns, kMin);
  EXPECT_EQ(find_span(jaeger.traces[0], "times1000")->duration_ns, kMin);
  EXPECT_EQ(find_span(jaeger.traces[0], "string")->duration_ns, kMin);

  auto otlp = read_all(R"({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "t", "spanId": "a", "startTimeUnixNano": "-99999999999999999999",
         "endTimeUnixNano": "99999999999999999999"}]}]}]})",
                       names);
  ASSERT_TRUE(otlp.result.ok) << otlp.result.error;
  EXPECT_EQ(otlp.result.stats.bad_timestamps, 0u);
  EXPECT_EQ(otlp.traces[0].spans[0].start_ns, kMin);
  EXPECT_EQ(otlp.traces[0].spans[0].duration_ns, kMax);  // the difference saturates too
}

TEST(TraceReaderTest, DropsSpansPastTheLimit) {
  NameTable names;
  ReadOptions options;
  options.max_spans_per_trace = 2;
  auto out = read_all(R"({"traceID": "x", "spans": [{"spanID": "1"}, {"spanID": "2"},
                         {"spanID": "3", "tags": [{"key": "error", "value": true}]}]})",
                      names, options);
  ASSERT_TRUE(out.result.ok) << out.result.error;
  EXPECT_EQ(out.traces[0].spans.size(), 2u);
  EXPECT_EQ(out.result.stats.dropped_spans_over_limit, 1u);
}

constexpr std::string_view kOtlp = R"({"resourceSpans": [
  {"scopeSpans": [{"scope": {"name": "lib"}, "spans": [
      {"traceId": "T2", "spanId": "s1", "name": "GET /x", "kind": 2,
       "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000000500000",
       "attributes": [{"key": "tailscope.join_delay_ns", "value": {"intValue": "42"}},
                      {"key": "http.method", "value": {"stringValue": "GET"}}]},
      {"traceId": "T1", "spanId": "s2", "parentSpanId": "s9", "name": "db", "kind": "SPAN_KIND_CLIENT",
       "startTimeUnixNano": 100, "endTimeUnixNano": 250, "status": {"code": "STATUS_CODE_ERROR"}}]}],
   "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "api"}}]}},
  {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "db"}}]},
   "instrumentationLibrarySpans": [{"spans": [
      {"traceId": "T2", "spanId": "s3", "parentSpanId": "s1", "name": "query", "kind": 5,
       "startTimeUnixNano": "1700000000000100000", "endTimeUnixNano": "1700000000000200000",
       "status": {"code": 2}}]}]}
]})";

TEST(TraceReaderTest, ReadsOtlpGroupingSpansByTrace) {
  NameTable names;
  auto out = read_all(kOtlp, names);
  ASSERT_TRUE(out.result.ok) << out.result.error;
  ASSERT_EQ(out.traces.size(), 2u);
  EXPECT_EQ(out.result.stats.otlp_traces, 2u);
  const Trace& t1 = out.traces[0];
  const Trace& t2 = out.traces[1];
  EXPECT_EQ(t1.trace_id, "T1");
  EXPECT_EQ(t2.trace_id, "T2");
  ASSERT_EQ(t1.spans.size(), 1u);
  ASSERT_EQ(t2.spans.size(), 2u);
  const Span* s1 = find_span(t2, "s1");
  const Span* s3 = find_span(t2, "s3");
  ASSERT_TRUE(s1 && s3);
  EXPECT_EQ(names.name(s1->service), "api");  // resource after its spans
  EXPECT_EQ(names.name(s3->service), "db");
  EXPECT_EQ(s1->kind, SpanKind::kServer);
  EXPECT_EQ(s1->start_ns, 1'700'000'000'000'000'000);
  EXPECT_EQ(s1->duration_ns, 500'000);
  EXPECT_EQ(s1->probe_join_delay_ns, 42);
  EXPECT_EQ(s1->parent_ref, RefType::kNone);
  EXPECT_EQ(s3->kind, SpanKind::kConsumer);
  EXPECT_EQ(t2.parent_span_id(*s3), "s1");
  EXPECT_TRUE(s3->error);
  EXPECT_EQ(t1.spans[0].kind, SpanKind::kClient);
  EXPECT_TRUE(t1.spans[0].error);
  EXPECT_EQ(t1.spans[0].duration_ns, 150);
}

// OTLP groups a document's spans by traceId through a table of the distinct
// ids: traces come out in traceId order (byte order, "" first), each with its
// spans in input order, however the ids interleave and however many there are.
TEST(TraceReaderTest, OtlpTracesComeOutInTraceIdOrderWithSpansInInputOrder) {
  std::string doc = R"({"resourceSpans": [{"scopeSpans": [{"spans": [)";
  std::map<std::string, std::vector<std::string>> expected;  // sorted by id, as the reader emits
  constexpr int kSpans = 600;
  for (int i = 0; i < kSpans; ++i) {
    // 97 ids, interleaved; "" (no traceId) and ids that differ in one byte only.
    const int t = (i * 37) % 97;
    std::string id;  // appended piecewise: GCC 12 warns (-Wrestrict) on "literal" + std::string
    if (t != 0) id.append("t").append(std::to_string(t % 10)).append("x").append(std::to_string(t));
    std::string span_id = "s";
    span_id += std::to_string(i);
    if (i > 0) doc += ", ";
    doc += "{";
    if (t != 0) doc.append(R"("traceId": ")").append(id).append(R"(", )");
    doc.append(R"("spanId": ")").append(span_id).append(R"("})");
    expected[id].push_back(span_id);
  }
  // A span without a spanId is dropped: its traceId, seen only there, gives
  // no (empty) trace. 32-digit ids that differ in one byte, either side of
  // the middle (the ids are compared 16 bytes at a time), are distinct.
  doc += R"(, {"traceId": "only-in-a-dropped-span"})";
  for (const int at : {0, 15, 16, 31}) {
    std::string id = "0123456789abcdef0123456789abcdef";
    id[static_cast<std::size_t>(at)] = 'x';
    for (const char* span_id : {"a", "b"}) {
      doc.append(R"(, {"traceId": ")").append(id).append(R"(", "spanId": ")").append(span_id).append(R"("})");
      expected[id].emplace_back(span_id);
    }
  }
  doc += "]}]}]}";
  using TraceSpanIds = std::vector<std::pair<std::string, std::vector<std::string>>>;
  const TraceSpanIds want(expected.begin(), expected.end());
  for (const bool use_simdjson : {true, false}) {
    NameTable names;
    ReadOptions options;
    options.use_simdjson = use_simdjson;
    TraceSpanIds got;
    const ReadResult result = read_trace_text(doc, names, options, [&](Trace& t) {
      std::vector<std::string> ids;
      for (const Span& span : t.spans) ids.emplace_back(t.span_id(span));
      got.emplace_back(t.trace_id, std::move(ids));
      return true;
    });
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(got, want) << "use_simdjson=" << use_simdjson;
  }
}

TEST(TraceReaderTest, InvalidJsonReportsByteOffset) {
  NameTable names;
  const std::string text = R"({"data": [{"traceID": "a",, "spans": []}]})";
  auto out = read_all(text, names);
  ASSERT_FALSE(out.result.ok);
  EXPECT_EQ(out.result.error_offset, text.find(",,") + 1);
  EXPECT_NE(out.result.error.find("byte offset " + std::to_string(text.find(",,") + 1)), std::string::npos)
      << out.result.error;
}

TEST(TraceReaderTest, TruncatedInputReportsEndOffset) {
  NameTable names;
  const std::string text = R"({"data": [{"traceID": "a", "spans": [{"spanID": "x", "startTime": 12)";
  int traces = 0;
  auto result = read_trace_text(text, names, {}, [&](Trace&) { return ++traces, true; });
  ASSERT_FALSE(result.ok);
  EXPECT_EQ(result.error_offset, text.size());
  EXPECT_EQ(traces, 0);
}

TEST(TraceReaderTest, TracesBeforeAnErrorAreDelivered) {
  NameTable names;
  const std::string text = "{\"traceID\": \"1\", \"spans\": []}\n{\"traceID\": \"2\", \"spans\": [}\n";
  auto out = read_all(text, names);
  ASSERT_FALSE(out.result.ok);
  EXPECT_EQ(out.traces.size(), 1u);
  EXPECT_EQ(out.result.error_offset, text.find("[}") + 1);
}

TEST(TraceReaderTest, RejectsDeepNestingWithBoundedCost) {
  NameTable names;
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "{\"x\":";
  text += "1" + std::string(100000, '}');
  auto out = read_all(text, names);
  ASSERT_FALSE(out.result.ok);
  EXPECT_NE(out.result.error.find("nested deeper"), std::string::npos) << out.result.error;
  EXPECT_EQ(out.result.error_offset, 64u * 5 + 1);  // just after the 65th '{'
}

TEST(TraceReaderTest, RejectsEmptyInputAndScalars) {
  NameTable names;
  EXPECT_FALSE(read_all("", names).result.ok);
  EXPECT_FALSE(read_all(" \n\t ", names).result.ok);
  auto scalar = read_all("42", names);
  EXPECT_FALSE(scalar.result.ok);
  EXPECT_NE(scalar.result.error.find("expected a JSON object"), std::string::npos);
  auto nul = read_all(std::string_view("{\"traceID\": \"a\"\0}", 17), names);
  EXPECT_FALSE(nul.result.ok);
}

TEST(TraceReaderTest, CallbackCanStopTheRead) {
  NameTable names;
  int seen = 0;
  auto result = read_trace_text(kEnvelope, names, {}, [&](Trace&) { return ++seen < 1; });
  EXPECT_TRUE(result.ok);
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(seen, 1);
}

TEST(TraceReaderTest, ReadsPlainAndGzipFiles) {
  TempDir dir;
  write_file(dir.file("plain.json"), kEnvelope);
  write_gzip(dir.file("packed.json.gz"), kEnvelope);
  for (const char* name : {"plain.json", "packed.json.gz"}) {
    NameTable names;
    int traces = 0;
    auto result = read_trace_file(dir.file(name), names, {}, [&](Trace&) { return ++traces, true; });
    ASSERT_TRUE(result.ok) << name << ": " << result.error;
    EXPECT_EQ(traces, 2) << name;
    EXPECT_EQ(result.stats.bytes, kEnvelope.size()) << name;
    EXPECT_EQ(result.stats.compressed, std::string(name) == "packed.json.gz");
  }
}

TEST(TraceReaderTest, ReadsLargeFilesAcrossBufferBoundaries) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 5000; ++i) {
    text +=
        R"({"traceID": ")" + std::to_string(i) +
        R"(", "spans": [{"spanID": "a", "operationName": "op", "startTime": 1, "duration": 2, "tags": [{"key": "k", "value": ")" +
        std::string(100, 'v') + "\"}]}]}\n";
  }
  write_gzip(dir.file("big.json.gz"), text);
  NameTable names;
  int traces = 0;
  auto result = read_trace_file(dir.file("big.json.gz"), names, {}, [&](Trace& t) {
    EXPECT_EQ(t.trace_id, std::to_string(traces));
    return ++traces, true;
  });
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(traces, 5000);
  EXPECT_EQ(result.stats.bytes, text.size());
}

// Regression: plain files used to be mmap()ed, and a file truncated by another
// process while being read killed the engine with SIGBUS. The callback runs
// between traces, so truncating there is a deterministic "truncated while
// being read" (the file is far larger than one read buffer).
TEST(TraceReaderTest, FileTruncatedWhileBeingReadIsAnErrorNotACrash) {
  TempDir dir;
  const std::string path = dir.file("shrinking.json");
  std::string text;
  constexpr int kTraces = 20'000;
  for (int i = 0; i < kTraces; ++i) {
    text +=
        R"({"traceID": ")" + std::to_string(i) +
        R"(", "spans": [{"spanID": "a", "operationName": "op", "startTime": 1, "duration": 2, "tags": [{"key": "k", "value": ")" +
        std::string(150, 'v') + "\"}]}]}\n";
  }
  write_file(path, text);
  NameTable names;
  int traces = 0;
  auto result = read_trace_file(path, names, {}, [&](Trace&) {
    if (++traces == 1) std::filesystem::resize_file(path, 0);
    return true;
  });
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("truncated while being read"), std::string::npos) << result.error;
  EXPECT_LT(traces, kTraces);
}

TEST(TraceReaderTest, TruncatedGzipIsAnError) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += R"({"traceID": "x", "spans": []})"
            "\n";
  write_gzip(dir.file("full.gz"), text);
  std::ifstream in(dir.file("full.gz"), std::ios::binary);
  std::string packed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_file(dir.file("cut.gz"), std::string_view(packed).substr(0, packed.size() / 2));
  NameTable names;
  auto result = read_trace_file(dir.file("cut.gz"), names, {}, [](Trace&) { return true; });
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("gzip"), std::string::npos) << result.error;
}

TEST(TraceReaderTest, MissingFileIsAnError) {
  NameTable names;
  auto result = read_trace_file("/nonexistent/trace.json", names, {}, [](Trace&) { return true; });
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("No such file"), std::string::npos) << result.error;
}

TEST(TraceReaderTest, InvalidUtf8NamesAreRepaired) {
  NameTable names;
  auto out = read_all("{\"traceID\": \"x\", \"spans\": [{\"spanID\": \"a\", \"operationName\": \"bad\xff\"}]}", names);
  ASSERT_TRUE(out.result.ok) << out.result.error;
  EXPECT_EQ(names.name(out.traces[0].spans[0].operation), "bad\xEF\xBF\xBD");
}

TEST(TraceReaderTest, ReadsEveryConformanceFixture) {
  const std::filesystem::path dir = testing::fixtures_dir() / "crisp";
  TAILSCOPE_REQUIRE_FIXTURE(dir);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    NameTable names;
    int traces = 0;
    auto result = read_trace_file(entry.path(), names, {}, [&](Trace& t) { return traces += !t.spans.empty(), true; });
    ASSERT_TRUE(result.ok) << entry.path() << ": " << result.error;
    EXPECT_EQ(traces, 1) << entry.path();
    ++files;
  }
  EXPECT_GT(files, 0);
}

// Every field of every trace and every counter, as text: the simdjson path
// and the RapidJSON path it falls back to must build the same traces.
struct Transcript {
  ReadResult result;
  std::string traces;
};

// `read(names, options, callback)` reads the input.
template <typename Read>
Transcript transcript_of(bool use_simdjson, ReadOptions options, const Read& read) {
  NameTable names;
  options.use_simdjson = use_simdjson;
  Transcript out;
  out.result = read(names, options, [&](Trace& t) {
    out.traces += "trace " + t.trace_id + "\n";
    for (const Span& s : t.spans) {
      out.traces += std::string(t.span_id(s)) + " parent=" + std::string(t.parent_span_id(s)) + "/" +
                    std::to_string(static_cast<int>(s.parent_ref)) + " kind=" + std::string(span_kind_name(s.kind)) +
                    " error=" + std::to_string(s.error) + " service=" + std::string(names.name(s.service)) +
                    " op=" + std::string(names.name(s.operation)) + " start=" + std::to_string(s.start_ns) +
                    " dur=" + std::to_string(s.duration_ns) + " probe=" + std::to_string(s.probe_scheduling_delay_ns) +
                    "," + std::to_string(s.probe_join_delay_ns) + "\n";
    }
    return true;
  });
  const ReadStats& st = out.result.stats;
  out.traces += "stats traces=" + std::to_string(st.traces) + " spans=" + std::to_string(st.spans) +
                " jaeger=" + std::to_string(st.jaeger_traces) + " otlp=" + std::to_string(st.otlp_traces) +
                " over=" + std::to_string(st.dropped_spans_over_limit) +
                " noid=" + std::to_string(st.dropped_spans_without_id) +
                " nosvc=" + std::to_string(st.spans_without_service) + " badtime=" + std::to_string(st.bad_timestamps) +
                " bytes=" + std::to_string(st.bytes) + " ok=" + std::to_string(out.result.ok) +
                " error=" + out.result.error + " offset=" + std::to_string(out.result.error_offset);
  return out;
}

Transcript transcript(std::string_view json, bool use_simdjson, ReadOptions options = {}) {
  return transcript_of(use_simdjson, options, [&](NameTable& names, const ReadOptions& o, const TraceCallback& cb) {
    return read_trace_text(json, names, o, cb);
  });
}

Transcript file_transcript(const std::string& path, bool use_simdjson) {
  return transcript_of(use_simdjson, {}, [&](NameTable& names, const ReadOptions& o, const TraceCallback& cb) {
    return read_trace_file(path, names, o, cb);
  });
}

// Inputs simdjson reads itself (valid objects), and inputs it hands to
// RapidJSON (errors, numbers beyond 64 bits, invalid UTF-8, non-objects).
const std::vector<std::string>& parity_inputs() {
  static const std::vector<std::string> inputs = {
      std::string(kEnvelope),
      std::string(kOtlp),
      R"({"traceID": "e", "spans": [{"spanID": "a\"b\\c", "operationName": "caf\u00e9 {[", "startTime": 1.5,
          "duration": "7", "tags": [{"value": "client", "key": "span.kind"}, {"key": "error", "value": "true"},
          {"key": "tailscope.join_delay_ns", "value": {"nested": [1]}}], "process": {"serviceName": "x]"}},
          {"spanID": "b", "parentSpanID": "a\"b\\c", "references": [{"refType": "FOLLOWS_FROM", "spanID": "zz"}],
           "startTime": null, "duration": true, "processID": "p"}, 7, [1, {"spanID": "no"}]],
          "processes": {"p": {"serviceName": "first"}, "p": {"serviceName": "second"}}, "spans": [{"spanID": "c"}]})",
      R"({"traceID": "top", "data": [{"traceID": "in", "spans": []}, 3, [], {"spans": []}], "spans": [{"spanID": "t"}]})",
      std::string(R"({"data": {"traceID": "x"}, "resourceSpans": null, "total": 0})") + "\n" +
          R"({"warnings": [1, 2]})",
      R"({"traceID": "ok", "spans": []} {"traceID": "big", "spans": [{"spanID": "a", "startTime": 99999999999999999999}]})",
      "{\"traceID\": \"u\", \"spans\": [{\"spanID\": \"a\", \"operationName\": \"bad\xff\"}]}",
      std::string(R"({"traceID": "1", "spans": []})") + "\n" + R"({"traceID": "2", "spans": [}])",
      R"({"data": [{"traceID": "a", "spans": []}, {"traceID": "b",, "spans": []}]})",
      R"({"data": [{"traceID": "a", "spans": [{"spanID": "x", "startTime": 12)",
      R"([{"traceID": "arr", "spans": [{"spanID": "a"}]}] 42)",
      // Values read many at once (iterate_many): one that gives up between
      // two it reads, an error inside a member the walks do not use, nesting
      // past the limit inside one, and a value cut off by the input's end.
      std::string(R"({"traceID": "1", "spans": [{"spanID": "a"}]})") + "\n" +
          R"({"traceID": "2", "spans": [{"spanID": "b", "startTime": 99999999999999999999}]})" + "\n" +
          R"({"traceID": "3", "spans": [{"spanID": "c", "logs": [{"fields": [[{"x": 1}]]}]}]})",
      std::string(R"({"traceID": "ok", "spans": []})") + "\n" +
          R"({"traceID": "m", "spans": [{"spanID": "a", "logs": [1 2], "warnings": null}]})",
      std::string(R"({"traceID": "ok", "spans": []})") + "\n" + R"({"traceID": "deep", "spans": [], "x": )" +
          std::string(70, '[') + std::string(70, ']') + "}",
      std::string(R"({"traceID": "ok", "spans": []})") + "\n" + R"({"traceID": "cut", "spans": [{"spanID": "a")",
  };
  return inputs;
}

TEST(TraceReaderTest, SimdjsonAndRapidJsonPathsBuildTheSameTraces) {
  for (const std::string& input : parity_inputs()) {
    const Transcript fast = transcript(input, true);
    const Transcript slow = transcript(input, false);
    EXPECT_EQ(fast.traces, slow.traces) << input;
    EXPECT_EQ(slow.result.stats.values_simdjson, 0u);
  }
  ReadOptions two_spans;
  two_spans.max_spans_per_trace = 2;
  const std::string over = R"({"traceID": "x", "spans": [{"spanID": "1"}, {"spanID": "2"}, {"spanID": "3"}]})";
  EXPECT_EQ(transcript(over, true, two_spans).traces, transcript(over, false, two_spans).traces);
}

// The simdjson path reads spans with typed walks of their members in
// document order, not through the builders' SAX events: members in any
// order, repeated, of unexpected types, with escapes, past the span limit —
// the same traces and counters as the RapidJSON path, read by simdjson.
TEST(TraceReaderTest, TypedWalksBuildWhatTheSaxEventsBuild) {
  const std::vector<std::string> jaeger = {
      // A tag's value before its key; values of every type; unused tags with containers.
      R"({"spans": [{"tags": [{"value": "client", "type": "string", "key": "span.kind"},
          {"value": 1, "key": "error"}, {"key": "tailscope.scheduling_delay_ns", "value": "42"},
          {"key": "tailscope.join_delay_ns", "value": 7.0}, {"key": "other", "value": {"a": [1, {"b": 2}]}},
          {"key": "otel.status_code", "value": "ERROR"}, {"value": [1], "key": "error"}, 3, [4], {"key": 5}],
          "spanID": "a", "startTime": "17", "duration": -2.5, "processID": "p"}], "traceID": "t1",
          "processes": {"p": {"tags": [], "serviceName": "svc"}}})",
      // Members repeated (the last wins, or the first for processes), of the
      // wrong type, and escaped keys and strings.
      R"({"traceID": "t2", "traceID": 5, "spans": [{"spanID": "x", "spanID": 7, "span\u0049D": "y\u00e9",
          "operationName": "o1", "operationName": null, "operation\u004eame": "o\"2", "parentSpanID": "0",
          "parentSpanID": "q", "references": [{"spanID": "r1", "refType": "FOLLOWS_FROM"}, 5, [],
          {"refType": 3, "spanID": "r2"}, {"spanID": ""}], "process": {"serviceName": "own"},
          "processID": "p", "startTime": true, "duration": {"x": 1}, "traceID": "inner"},
          {"spanID": "z", "process": "x", "tags": {"key": "error"}, "references": "none", "startTime": null}],
          "processes": {"p": {"serviceName": "first"}, "p": {"serviceName": "second"}, "q": 5,
          "r": {"serviceName": 3}, "s": [{"serviceName": "no"}]}})",
      // Containers and scalars where the trace's own members belong.
      R"({"traceID": {"x": 1}, "spans": {"spanID": "a"}, "processes": []})"
      "\n"
      R"({"traceID": [], "spans": 5, "processes": "p"})"
      "\n"
      R"({"spans": [{"traceID": "from-span", "spanID": "a", "processID": 5, "process": {"serviceName": ["x"]}}]})",
      // A span without an id, one without a process, one over the limit
      // (whose traceID still counts when the trace has none).
      R"({"spans": [{"operationName": "none"}, {"spanID": "a", "processID": "missing"}, {"spanID": "b"},
          {"spanID": "c", "traceID": "late"}], "processes": {}})",
      // Envelopes: items are traces, other members of the envelope a trace of their own.
      R"({"data": [{"traceID": "d1", "spans": [{"spanID": "a", "tags": [{"key": "span.kind", "value": "server"}]}],
          "data": [1]}, {"spans": [], "processes": {"p": {"serviceName": "s"}}}], "traceID": "outer"})",
  };
  const std::vector<std::string> otlp = {
      // Resource after its spans; attributes with the value before the key,
      // every value type, repeated values; kind and status as strings and numbers.
      R"({"resourceSpans": [{"scopeSpans": [{"scope": {"name": "s"}, "spans": [{"traceId": "T1", "spanId": "a",
          "name": "n\u00e9", "kind": "SPAN_KIND_CLIENT", "startTimeUnixNano": "100", "endTimeUnixNano": 250,
          "attributes": [{"value": {"boolValue": true}, "key": "error"},
          {"key": "tailscope.join_delay_ns", "value": {"intValue": "9"}},
          {"key": "tailscope.scheduling_delay_ns", "value": {"stringValue": "x", "intValue": 4}},
          {"key": "span.kind", "value": {"arrayValue": {"values": []}}}, {"key": "k", "value": 5}, 7],
          "status": {"code": "STATUS_CODE_ERROR"}}, {"traceId": "T2", "spanId": "b", "parentSpanId": "a",
          "kind": 2, "startTimeUnixNano": 1.5e3, "endTimeUnixNano": "x", "status": {"code": 2}}]}],
          "resource": {"attributes": [{"value": {"stringValue": "svc"}, "key": "service.name"},
          {"key": "service.name", "value": {"stringValue": 5}}]}}]})",
      // instrumentationLibrarySpans, escaped keys, wrong types, no resource,
      // a span without an id, a span without times.
      R"({"resourceSpans": [{"instrumentationLibrarySpans": [{"spans": [{"trace\u0049d": "T", "spanId": "c",
          "name": 5, "kind": 9, "attributes": {"key": "error"}, "status": 2}, {"name": "no-id"}, 3]}, 4,
          {"spans": {"spanId": "d"}}], "resource": [1]}, 5, {"resource": {"attributes": [{"key": "service.name",
          "value": {"stringValue": "s2"}}]}, "scopeSpans": [{"spans": [{"traceId": "T", "spanId": "e",
          "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}], "resourceSpans": [{"scopeSpans": 3}]})",
  };
  ReadOptions three_spans;
  three_spans.max_spans_per_trace = 3;
  for (const std::vector<std::string>* inputs : {&jaeger, &otlp}) {
    for (const std::string& input : *inputs) {
      for (const ReadOptions& options : {ReadOptions{}, three_spans}) {
        const Transcript fast = transcript(input, true, options);
        EXPECT_EQ(fast.traces, transcript(input, false, options).traces) << input;
        EXPECT_TRUE(fast.result.ok) << input << ": " << fast.result.error;
        EXPECT_EQ(fast.result.stats.values_rapidjson, 0u) << input;
      }
    }
  }
  // A number beyond 64 bits where a string belongs still hands the value to
  // RapidJSON (which reads it as a double), as the generic walk did.
  const std::string big = R"({"spans": [{"spanID": 99999999999999999999, "operationName": "o"}]})";
  EXPECT_EQ(transcript(big, true).traces, transcript(big, false).traces);
  EXPECT_EQ(transcript(big, true).result.stats.values_rapidjson, 1u);
}

TEST(TraceReaderTest, ValidObjectsAreReadBySimdjsonAndTheRestByRapidJson) {
  const Transcript envelope = transcript(kEnvelope, true);
  EXPECT_EQ(envelope.result.stats.values_simdjson, 1u);
  EXPECT_EQ(envelope.result.stats.values_rapidjson, 0u);
  const Transcript otlp = transcript(kOtlp, true);
  EXPECT_EQ(otlp.result.stats.values_simdjson, 1u);
  EXPECT_EQ(otlp.result.stats.values_rapidjson, 0u);
  // A number beyond 64 bits: simdjson gives up on that value only.
  const Transcript big = transcript(parity_inputs()[5], true);
  EXPECT_EQ(big.result.stats.values_simdjson, 1u);
  EXPECT_EQ(big.result.stats.values_rapidjson, 1u);
  // Traces simdjson delivered before it gave up are not delivered twice.
  const Transcript broken = transcript(parity_inputs()[8], true);
  EXPECT_FALSE(broken.result.ok);
  EXPECT_EQ(broken.result.stats.traces, 1u);
  EXPECT_EQ(std::count(broken.traces.begin(), broken.traces.end(), '\n'), 1);
}

// One trace per line is read many values at a time (iterate_many over the
// buffered window, no bracket scan per value): every value by simdjson, the
// same traces and counters as the RapidJSON path, across windows and
// buffer refills (a plain file and a gzip one, several MiB), with non-ASCII
// names (a window may end inside a UTF-8 sequence), values of every size
// and one line larger than a window.
TEST(TraceReaderTest, ReadsManyValuesAtOnceAcrossWindows) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 6000; ++i) {
    const std::string n = std::to_string(i);
    text += R"({"traceID": "t)" + n + R"(", "spans": [{"spanID": "a", "operationName": "caf\u00e9 op)" +
            std::to_string(i % 7) + R"(", "startTime": )" + n +
            R"(, "duration": 5, "processID": "p", "logs": [], "tags": [{"key": "span.kind", "value": "client"},)" +
            R"( {"key": "pad", "value": ")" + std::string(static_cast<std::size_t>(i % 13) * 97, 'x') +
            R"("}]}, {"spanID": "b", "references": [{"refType": "CHILD_OF", "spanID": "a"}], "startTime": 1}],)" +
            R"( "processes": {"p": {"serviceName": "süd)" + std::to_string(i % 3) + R"(", "tags": []}}})" + "\n";
    if (i == 3000) {
      text += R"({"traceID": "huge", "spans": [{"spanID": "h", "tags": [{"key": "pad", "value": ")" +
              std::string(std::size_t{3} << 20, 'h') + "\"}]}]}\n";
    }
  }
  ASSERT_GT(text.size(), std::size_t{8} << 20);
  write_file(dir.file("many.json"), text);
  write_gzip(dir.file("many.json.gz"), text);
  const Transcript slow = file_transcript(dir.file("many.json"), false);
  ASSERT_TRUE(slow.result.ok) << slow.result.error;
  for (const std::string& file : {dir.file("many.json"), dir.file("many.json.gz")}) {
    const Transcript fast = file_transcript(file, true);
    EXPECT_EQ(fast.traces, slow.traces) << file;
    EXPECT_EQ(fast.result.stats.values_simdjson, 6001u) << file;
    EXPECT_EQ(fast.result.stats.values_rapidjson, 0u) << file;
  }
  // In memory (as tailscope-critpath --jobs N reads each chunk), the same.
  const Transcript in_memory = transcript(text, true);
  EXPECT_EQ(in_memory.traces, slow.traces);
  EXPECT_EQ(in_memory.result.stats.values_rapidjson, 0u);
}

// A stop inside a value read many at a time ends the read after that value,
// as reading one value at a time does (a nesting limit that leaves the
// walks no room turns read_many off): the same bytes counted.
TEST(TraceReaderTest, StopInsideManyValuesCountsTheSameBytes) {
  const std::string text = std::string(R"({"traceID": "1", "spans": []})") + "\n" +
                           R"({"data": [{"traceID": "2", "spans": []}, {"traceID": "3", "spans": []}]})" + "\n" +
                           R"({"traceID": "4", "spans": []})" + "\n";
  for (const int depth : {64, 8}) {
    NameTable names;
    ReadOptions options;
    options.max_nesting_depth = depth;
    int seen = 0;
    const ReadResult result = read_trace_text(text, names, options, [&](Trace&) { return ++seen < 2; });
    EXPECT_TRUE(result.ok) << result.error;
    EXPECT_TRUE(result.stopped);
    EXPECT_EQ(seen, 2);
    EXPECT_EQ(result.stats.bytes, text.find("\n{\"traceID\": \"4\"")) << "max_nesting_depth=" << depth;
    EXPECT_EQ(result.stats.values_simdjson, 2u) << "max_nesting_depth=" << depth;
  }
}

// Nesting past the limit inside a member the reader does not use is still
// rejected, with RapidJSON's error and offset; nesting within it is read.
TEST(TraceReaderTest, DeepNestingInUnusedMembersIsStillRejected) {
  const std::string ok = R"({"traceID": "ok", "spans": []})";
  const std::string deep = ok + "\n" + R"({"traceID": "d", "spans": [{"spanID": "a", "logs": )" + std::string(70, '[') +
                           std::string(70, ']') + "}]}";
  const Transcript fast = transcript(deep, true);
  EXPECT_FALSE(fast.result.ok);
  EXPECT_NE(fast.result.error.find("nested deeper"), std::string::npos) << fast.result.error;
  EXPECT_EQ(fast.traces, transcript(deep, false).traces);
  const std::string within = ok + "\n" + R"({"traceID": "w", "spans": [{"spanID": "a", "logs": )" +
                             std::string(40, '[') + std::string(40, ']') + "}]}";
  const Transcript read = transcript(within, true);
  EXPECT_TRUE(read.result.ok) << read.result.error;
  EXPECT_EQ(read.traces, transcript(within, false).traces);
  EXPECT_EQ(read.result.stats.values_simdjson, 2u);
}

// An envelope larger than the reader buffers whole (8 MiB): `count`
// elements, each a Jaeger trace (or an OTLP resourceSpans entry), then `tail`
// (the envelope's other members and its closing brace).
std::string big_envelope(bool otlp, int count, const std::string& bad_element, int bad_at, const std::string& tail) {
  std::string text = otlp ? "{\"resourceSpans\": [\n" : "{ \"data\" :\n[";
  const std::string filler(600, 'f');
  for (int i = 0; i < count; ++i) {
    if (i > 0) text += ",\n ";
    if (i == bad_at) {
      text += bad_element;
      continue;
    }
    const std::string n = std::to_string(i);
    if (otlp) {
      text += R"({"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc)" + n +
              R"("}}]}, "scopeSpans": [{"spans": [{"traceId": "T)" + std::to_string(i % 7) + R"(", "spanId": "s)" + n +
              R"(", "name": "op", "kind": 2, "startTimeUnixNano": ")" + n + R"(", "endTimeUnixNano": "9999999",)" +
              R"( "attributes": [{"key": "pad", "value": {"stringValue": ")" + filler + R"("}}]}]}]})";
    } else {
      text += R"({"traceID": "t)" + n + R"(", "spans": [{"spanID": "a", "operationName": "op)" + std::to_string(i % 5) +
              R"(", "startTime": )" + n + R"(, "duration": 3, "processID": "p1", "tags": [{"key": "span.kind", )" +
              R"("value": "server"}, {"key": "pad", "value": ")" + filler + R"("}]}, {"spanID": "b", )" +
              R"("references": [{"refType": "CHILD_OF", "spanID": "a"}], "startTime": 1, "duration": 1}],)" +
              R"( "processes": {"p1": {"serviceName": "s)" + std::to_string(i % 3) + R"("}}})";
    }
  }
  return text + "]" + tail;
}

// Regression: a {"data": [...]} export or an OTLP batch larger
// than 8 MiB was one value too big for simdjson and went to the RapidJSON
// path whole. It now streams element by element through simdjson, giving the
// same traces and counters; when it meets an error it rewinds (a plain file,
// a gzip file) and RapidJSON reports the same error at the same offset, with
// no trace delivered twice.
TEST(TraceReaderTest, LargeEnvelopesStreamThroughSimdjson) {
  TempDir dir;
  constexpr int kElements = 14'000;  // ~11-13 MB
  const std::string tail = R"(, "total": 0, "traceID": "tail", "spans": [{"spanID": "z"}]})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"jaeger.json", big_envelope(false, kElements, "", -1, tail)},
      {"otlp.json", big_envelope(true, kElements, "", -1, "}\n")},
      {"jaeger-null.json", big_envelope(false, kElements, "null", 20, "}")},
  };
  for (const auto& [name, text] : cases) {
    ASSERT_GT(text.size(), std::size_t{8} << 20);
    write_file(dir.file(name), text);
    const Transcript fast = file_transcript(dir.file(name), true);
    EXPECT_EQ(fast.traces, file_transcript(dir.file(name), false).traces) << name;
    EXPECT_TRUE(fast.result.ok) << name << ": " << fast.result.error;
    const bool streams = name != "jaeger-null.json";  // a non-object element: RapidJSON reads it
    EXPECT_EQ(fast.result.stats.values_simdjson, streams ? 1u : 0u) << name;
    EXPECT_EQ(fast.result.stats.values_rapidjson, streams ? 0u : 1u) << name;
  }
  // Errors late in the envelope: the same error, offset and traces as RapidJSON.
  const std::vector<std::pair<std::string, std::string>> broken = {
      {"bad-element.json", big_envelope(false, kElements, R"({"traceID": "b",, "spans": []})", kElements - 5, "}")},
      {"bad-tail.json", big_envelope(false, kElements, "", -1, ", }")},
      {"truncated.json", big_envelope(true, kElements, "", -1, "").substr(0, (std::size_t{9} << 20) + 7)},
  };
  for (const auto& [name, text] : broken) {
    write_file(dir.file(name), text);
    write_gzip(dir.file(name + ".gz"), text);
    const Transcript slow = file_transcript(dir.file(name), false);
    EXPECT_FALSE(slow.result.ok) << name;
    for (const std::string& file : {dir.file(name), dir.file(name + ".gz")}) {
      const Transcript fast = file_transcript(file, true);
      EXPECT_EQ(fast.traces, slow.traces) << file;
      EXPECT_EQ(fast.result.stats.values_rapidjson, 1u) << file;
    }
  }
}

TEST(TraceReaderTest, FixturesReadTheSameBothWays) {
  const std::filesystem::path dir = testing::fixtures_dir();
  TAILSCOPE_REQUIRE_FIXTURE(dir);
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const Transcript fast = transcript(text, true);
    EXPECT_EQ(fast.traces, transcript(text, false).traces) << entry.path();
    EXPECT_EQ(fast.result.stats.values_rapidjson, 0u) << entry.path();
    ++files;
  }
  EXPECT_GT(files, 0);
}

}  // namespace
}  // namespace tailscope::trace
