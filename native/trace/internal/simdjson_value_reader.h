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

// What SimdjsonValueReader::read_many() read of a window.
struct ManyRead {
  // Bytes of the window done with: whole values read and the whitespace
  // between them. When it gave up, the offset of the value it gave up on.
  std::size_t consumed = 0;
  std::uint64_t values = 0;  // top-level values read whole (values_simdjson)
  // The value at `consumed` was not read: not an object, or simdjson rejected
  // or read it differently. `emitted` of its traces were delivered first
  // (the RapidJSON re-read skips that many).
  bool gave_up = false;
  std::uint64_t emitted = 0;
  // The callback asked to stop inside the last value read (which ends at
  // `consumed`).
  bool stopped = false;
  // Simdjson rejected the window as a whole: read the values in
  // data[consumed, size) one at a time (read()).
  bool window_rejected = false;
};

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

  // Reads the top-level values at the start of data[0, size) (whitespace
  // first skipped; data[size, size + padding_bytes()) readable) one after
  // another with simdjson's iterate_many — one stage 1 over the window, no
  // bracket scan to cut each value out — until the last complete one, a
  // value it does not read, or a stop. A value cut off by the window's end
  // is left (ManyRead::consumed ends before it). Counters of the values read
  // go to `stats`. Only when reads_many(options): the walks check nesting
  // themselves, within the limit, only when it leaves room below their own
  // depth.
  static bool reads_many(const ReadOptions& options);
  ManyRead read_many(const char* data, std::size_t size, ReadStats& stats, const TraceCallback& on_trace);

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
