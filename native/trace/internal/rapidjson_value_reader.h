// The slow path of the trace readers: RapidJSON's SAX reader over the input
// stream (internal/input_buffer.h), one top-level JSON value at a time. It
// reads what the simdjson path (simdjson_value_reader.h) does not take — a
// value that is not an object, too big to buffer or too deep, or that
// simdjson rejects or reads differently — and reports the exact error and
// offset. Its events go to the same JaegerTraceBuilder and
// OtlpDocumentBuilder as the simdjson path's walks, so both paths build the
// same traces. Memory stays bounded by one trace, not by the value.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "trace/internal/input_buffer.h"
#include "trace/trace.h"
#include "trace/trace_reader.h"

namespace tailscope::trace::internal {

enum class SlowReadStatus : std::uint8_t { kOk, kStopped, kError };

class RapidjsonValueReader {
 public:
  // Traces go to on_trace as they complete; counters to `stats`. Both must
  // outlive the reader.
  RapidjsonValueReader(NameTable& names, const ReadOptions& options, ReadStats& stats, const TraceCallback& on_trace);
  ~RapidjsonValueReader();
  RapidjsonValueReader(const RapidjsonValueReader&) = delete;
  RapidjsonValueReader& operator=(const RapidjsonValueReader&) = delete;

  // Reads the value that starts at in's position (whitespace already
  // skipped). kStopped: on_trace returned false. kError: *error says what
  // was wrong and *error_offset where (input offset, in.Tell()'s count).
  SlowReadStatus read(InputBuffer& in, std::string* error, std::uint64_t* error_offset);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tailscope::trace::internal
