// The per-trace result as one JSON object (a line of the artifacts NDJSON and
// an entry of the result document's "traces"); docs/critical-path.md has the
// schema.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/trace_analysis.h"
#include "trace/trace.h"

namespace tailscope::analyze {

// The writer hands its text on in pieces of about this size: the result of a
// trace with a million spans is hundreds of MB, streamed, never held whole.
inline constexpr std::size_t kTraceJsonChunkBytes = 64 * 1024;
using JsonChunkSink = std::function<void(std::string_view)>;

// Writes per-trace results. Output formatting is a large share of the
// engine's time (the result is about as big as the input), so service and
// operation names are escaped once per run, not once per use, and the text
// is built by appending, with no per-value calls through a generic writer.
class TraceAnalysisJsonWriter {
 public:
  TraceAnalysisJsonWriter(const trace::NameTable& names, const std::vector<WhatIfScenario>& scenarios);

  // The JSON object (no newline), to `sink` in chunks.
  void write(const TraceAnalysis& analysis, const JsonChunkSink& sink);
  // The same object appended to `out`.
  void append(const TraceAnalysis& analysis, std::string& out);

 private:
  void write_object(const TraceAnalysis& analysis, const JsonChunkSink* sink);
  void maybe_flush(const JsonChunkSink* sink);
  void name(trace::NameId id);  // a quoted, escaped name from the cache
  void span_ref(const TraceAnalysis& a, std::uint32_t span, std::string_view id_key);
  void operations(const std::vector<OperationTime>& ops);

  const trace::NameTable& names_;
  const std::vector<WhatIfScenario>& scenarios_;
  std::vector<std::string> escaped_names_;  // by NameId; empty until first used
  std::string out_;
};

// One-off forms of the writer (no name cache kept between calls).
void append_trace_analysis_json(const TraceAnalysis& analysis, const trace::NameTable& names,
                                const std::vector<WhatIfScenario>& scenarios, std::string& out);
void write_trace_analysis_json(const TraceAnalysis& analysis, const trace::NameTable& names,
                               const std::vector<WhatIfScenario>& scenarios, const JsonChunkSink& sink);

// "service:operation", the key used in paths and rankings.
std::string operation_key(const trace::NameTable& names, trace::NameId service, trace::NameId operation);

}  // namespace tailscope::analyze
