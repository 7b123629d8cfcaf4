// The per-trace result as one JSON object (a line of the artifacts NDJSON and
// an entry of the result document's "traces"); docs/critical-path.md has the
// schema.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/trace_analysis.h"
#include "trace/trace.h"

namespace tailscope::analyze {

// Appends the JSON object (no newline) to `out`.
void append_trace_analysis_json(const TraceAnalysis& analysis, const trace::NameTable& names,
                                const std::vector<WhatIfScenario>& scenarios, std::string& out);

// Writes the same object (no newline) in pieces of at most about
// kTraceJsonChunkBytes: the result of a trace with a million spans is
// hundreds of MB, and is streamed to the artifacts file, never held whole.
inline constexpr std::size_t kTraceJsonChunkBytes = 64 * 1024;
using JsonChunkSink = std::function<void(std::string_view)>;
void write_trace_analysis_json(const TraceAnalysis& analysis, const trace::NameTable& names,
                               const std::vector<WhatIfScenario>& scenarios, const JsonChunkSink& sink);

// "service:operation", the key used in paths and rankings.
std::string operation_key(const trace::NameTable& names, trace::NameId service, trace::NameId operation);

}  // namespace tailscope::analyze
