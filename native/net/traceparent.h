// The W3C Trace Context `traceparent` header (https://www.w3.org/TR/trace-context/,
// version 00): "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>".
// The load generator writes it (--traceparent) so its requests and the traces
// of the system under test share an id; the service runtime's HTTP front
// reads it and continues that trace instead of starting one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tailscope::net {

struct TraceParent {
  uint64_t trace_id_high = 0, trace_id_low = 0;  // the 128-bit trace id, high half first in the text
  uint64_t parent_id = 0;                        // the caller's span id
  bool sampled = false;                          // flags bit 0
};

// Parses a header value. False for anything the specification says to
// ignore: wrong length or separators, upper-case or non-hex digits, version
// ff, an all-zero trace or parent id. A version above 00 is read by its
// version-00 prefix when what follows it starts with '-', as the
// specification asks of a version-00 reader.
bool parse_traceparent(std::string_view value, TraceParent* out);

// Appends the version-00 value (lower-case hex, flags 01 when sampled).
void append_traceparent(const TraceParent& parent, std::string& out);

// 32 lower-case hex digits: the trace id as traces spell it (Jaeger, OTLP).
std::string trace_id_hex(uint64_t high, uint64_t low);

}  // namespace tailscope::net
