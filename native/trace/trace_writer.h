// Jaeger JSON and OTLP JSON writers: what tailscope's tracer exports, and what
// the tests use to build inputs. Output opens in Jaeger UI and reads back
// through trace_reader.h. Times: Jaeger JSON is in microseconds (ns are
// truncated), OTLP in nanoseconds.
#pragma once

#include <span>
#include <string>

#include "trace/trace.h"

namespace tailscope::trace {

// One Jaeger trace object {"traceID", "spans", "processes"}: a line of NDJSON.
std::string jaeger_json_trace(const Trace& trace, const NameTable& names);
// The Jaeger UI / query API envelope {"data": [trace, …]}.
std::string jaeger_json_document(std::span<const Trace> traces, const NameTable& names);
// One OTLP JSON document {"resourceSpans": […]}, one resource per service.
std::string otlp_json_document(std::span<const Trace> traces, const NameTable& names);

}  // namespace tailscope::trace
