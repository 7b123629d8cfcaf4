// Socialnet-shaped synthetic traces (DeathStarBench's services): a server
// root, nested client/server RPC pairs, a few tags per span, written as the
// readers meet them in the wild — Jaeger JSON one trace per line (tailscope's
// tracer, Jaeger's NDJSON export) or in a {"data": [...]} envelope (the Jaeger
// UI's export), and OTLP JSON one resourceSpans document per line (the
// collector's file exporter). One generator feeds every format, so figures
// over them compare the formats, not the traces. Deterministic: the same
// options give the same bytes. Used by tailscope-critpath-bench and by tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace tailscope::trace::testing {

enum class SyntheticFormat : std::uint8_t { kJaegerNdjson, kJaegerEnvelope, kOtlpNdjson };

struct SyntheticTraceOptions {
  std::size_t spans = 1'000'000;     // in all, rounded up to whole traces
  std::size_t spans_per_trace = 30;  // a socialnet compose-post request is 20-40 spans
};

// The OTLP file exporter batches: each line holds this many traces' spans,
// grouped by service (resource).
constexpr std::size_t kOtlpTracesPerDocument = 10;

// Receives the text in order, in chunks of a few MB at most.
using SyntheticTextSink = std::function<void(std::string_view chunk)>;

// Writes the traces to `sink`; returns how many traces that was.
std::size_t write_synthetic_traces(const SyntheticTraceOptions& options, SyntheticFormat format,
                                   const SyntheticTextSink& sink);

struct SyntheticTraceFile {
  std::uint64_t bytes = 0;
  std::size_t traces = 0;
};

// Writes the traces to the file at `path`. Throws std::runtime_error naming
// the path when it cannot be written.
SyntheticTraceFile write_synthetic_trace_file(const SyntheticTraceOptions& options, SyntheticFormat format,
                                              const std::string& path);

// The whole text in memory (small inputs: tests). `traces`, when given, gets
// the number of traces.
std::string synthetic_trace_text(const SyntheticTraceOptions& options, SyntheticFormat format,
                                 std::size_t* traces = nullptr);

}  // namespace tailscope::trace::testing
