// Streaming trace readers. One entry point reads every supported form and
// hands traces to a callback one at a time; nothing but the current trace (for
// OTLP: the current resourceSpans document) is held in memory.
//
// Accepted input (optionally gzip-compressed, detected from the content):
//   Jaeger JSON   {"data": [trace, …], …}  (Jaeger UI export / query API)
//                 {"traceID": …, "spans": […], "processes": {…}}  (one trace)
//                 one trace or envelope per line (NDJSON), or a top-level array
//   OTLP JSON     {"resourceSpans": [...]}  (one document, or one per line)
//
// Invalid JSON stops the read with an error naming the byte offset.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "trace/trace.h"

namespace tailscope::trace {

struct ReadOptions {
  // Spans past this count in one trace (one OTLP document) are dropped and counted.
  std::size_t max_spans_per_trace = 1'000'000;
  // Deeper JSON nesting is rejected: bounded cost on hostile input.
  int max_nesting_depth = 64;
  // Read top-level objects with simdjson (false: everything with RapidJSON's
  // SAX reader, the path simdjson falls back to; tests and the benchmark
  // compare the two).
  bool use_simdjson = true;
};

// Counters of what the reader saw; `dropped_*` and `repaired_*` feed the
// analyzer's warnings.
struct ReadStats {
  std::uint64_t bytes = 0;  // decompressed input bytes consumed
  std::uint64_t traces = 0;
  std::uint64_t spans = 0;
  std::uint64_t jaeger_traces = 0;
  std::uint64_t otlp_traces = 0;
  std::uint64_t dropped_spans_over_limit = 0;
  std::uint64_t dropped_spans_without_id = 0;
  std::uint64_t spans_without_service = 0;  // unknown processID / no service.name
  std::uint64_t bad_timestamps = 0;         // non-numeric times, read as 0 (huge ones saturate instead)
  // Top-level JSON values read by simdjson, and by RapidJSON (not an object,
  // larger than 8 MiB, or input simdjson rejected or could not read exactly).
  std::uint64_t values_simdjson = 0;
  std::uint64_t values_rapidjson = 0;
  bool compressed = false;

  void add(const ReadStats& other);
};

struct ReadResult {
  bool ok = true;
  bool stopped = false;  // the callback asked to stop
  std::string error;     // "invalid JSON at byte 123: Missing a comma…"
  std::uint64_t error_offset = 0;
  ReadStats stats;
};

// Return false to stop reading (e.g. --max-traces reached). The Trace is
// reused for the next one: copy what must outlive the call.
using TraceCallback = std::function<bool(Trace&)>;

// `path` "-" reads stdin.
ReadResult read_trace_file(const std::string& path, NameTable& names, const ReadOptions& options,
                           const TraceCallback& on_trace);
ReadResult read_trace_text(std::string_view json, NameTable& names, const ReadOptions& options,
                           const TraceCallback& on_trace);
// The same, read in place (no copy): `json` must be followed by at least
// trace_text_padding_bytes() readable zero bytes.
ReadResult read_padded_trace_text(std::string_view json, NameTable& names, const ReadOptions& options,
                                  const TraceCallback& on_trace);
std::size_t trace_text_padding_bytes();

}  // namespace tailscope::trace
