// The synthetic traces read back as what they claim to be: every format
// gives the asked-for traces and spans through the readers (the simdjson path
// and the RapidJSON path alike), the same options give the same bytes, and a
// file is written whole or not at all said so.
#include "trace/testing/synthetic_traces.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "trace/trace_reader.h"

namespace tailscope::trace::testing {
namespace {

constexpr SyntheticFormat kFormats[] = {SyntheticFormat::kJaegerNdjson, SyntheticFormat::kJaegerEnvelope,
                                        SyntheticFormat::kOtlpNdjson};

TEST(SyntheticTraces, EveryFormatReadsBackAsTheAskedForTracesAndSpans) {
  const SyntheticTraceOptions options{.spans = 95, .spans_per_trace = 7};  // 14 traces: not a whole OTLP batch
  for (const SyntheticFormat format : kFormats) {
    for (const bool use_simdjson : {true, false}) {
      std::size_t traces = 0;
      const std::string text = synthetic_trace_text(options, format, &traces);
      EXPECT_EQ(traces, 14u);
      NameTable names;
      ReadOptions read_options;
      read_options.use_simdjson = use_simdjson;
      std::set<std::string> trace_ids;
      std::size_t spans = 0;
      const ReadResult r = read_trace_text(text, names, read_options, [&](Trace& t) {
        trace_ids.insert(t.trace_id);
        spans += t.spans.size();
        return true;
      });
      ASSERT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.stats.traces, traces);
      EXPECT_EQ(trace_ids.size(), traces);  // distinct ids
      EXPECT_EQ(spans, traces * options.spans_per_trace);
      EXPECT_EQ(r.stats.dropped_spans_without_id, 0u);
    }
  }
}

TEST(SyntheticTraces, TheSameOptionsGiveTheSameBytes) {
  const SyntheticTraceOptions options{.spans = 60, .spans_per_trace = 30};
  for (const SyntheticFormat format : kFormats)
    EXPECT_EQ(synthetic_trace_text(options, format), synthetic_trace_text(options, format));
}

TEST(SyntheticTraces, AFileHoldsTheSameTextAsMemory) {
  const SyntheticTraceOptions options{.spans = 40, .spans_per_trace = 20};
  char path_template[] = "/tmp/tailscope-synthetic-XXXXXX";
  const int fd = ::mkstemp(path_template);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const SyntheticTraceFile file = write_synthetic_trace_file(options, SyntheticFormat::kOtlpNdjson, path_template);
  std::ifstream in(path_template);
  std::stringstream ss;
  ss << in.rdbuf();
  ::unlink(path_template);
  const std::string text = synthetic_trace_text(options, SyntheticFormat::kOtlpNdjson);
  EXPECT_EQ(ss.str(), text);
  EXPECT_EQ(file.bytes, text.size());
  EXPECT_EQ(file.traces, 2u);
}

TEST(SyntheticTraces, AnUnwritablePathIsAnErrorNamingIt) {
  try {
    write_synthetic_trace_file({}, SyntheticFormat::kJaegerNdjson, "/nonexistent-dir/traces.json");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/traces.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tailscope::trace::testing
