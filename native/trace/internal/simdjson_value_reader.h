// The fast path of the trace readers: one whole top-level JSON value (a Jaeger
// trace, a {"data": [...]} envelope or an OTLP {"resourceSpans": [...]}
// document), parsed with simdjson's On-Demand API. Typed walks read only the
// members the builders use, in document order, and call the same
// JaegerTraceBuilder and OtlpDocumentBuilder events the RapidJSON path's SAX
// events call, so both paths build the same traces. Anything simdjson rejects (or reads differently: numbers beyond
// 64 bits, invalid UTF-8) makes it give up, and the caller re-reads the value
// with RapidJSON, which reports the exact error and offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "trace/trace.h"
#include "trace/trace_reader.h"

namespace tailscope::trace::internal {

enum class FastReadStatus : std::uint8_t { kOk, kStopped, kGaveUp };

class SimdjsonValueReader {
 public:
  SimdjsonValueReader(NameTable& names, const ReadOptions& options);
  ~SimdjsonValueReader();
  SimdjsonValueReader(const SimdjsonValueReader&) = delete;
  SimdjsonValueReader& operator=(const SimdjsonValueReader&) = delete;

  // Bytes that must be readable (any content) after a value's last byte.
  static std::size_t padding_bytes();

  // data[0, size) is one JSON object; data[size, size + padding_bytes()) is
  // readable. Traces go to on_trace as they complete; `emitted` counts them
  // (the RapidJSON re-read after kGaveUp skips that many). Counters go to
  // `stats` only on kOk / kStopped.
  FastReadStatus read(const char* data, std::size_t size, ReadStats& stats, const TraceCallback& on_trace,
                      std::uint64_t* emitted);

  // A {"data": [...]} or {"resourceSpans": [...]} too big to buffer whole is
  // read element by element (trace_reader.cc); each call takes one element
  // object, data[0, size), padded as above. The same traces as read() on the
  // whole value, in the same order.
  FastReadStatus read_data_element(const char* data, std::size_t size, ReadStats& stats, const TraceCallback& on_trace,
                                   std::uint64_t* emitted);
  void begin_resource_spans();
  FastReadStatus read_resource_spans_element(const char* data, std::size_t size, ReadStats& stats);
  // The resourceSpans array ended: its traces go out.
  FastReadStatus finish_resource_spans(ReadStats& stats, const TraceCallback& on_trace, std::uint64_t* emitted);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tailscope::trace::internal
