// --request-log: one line per answered request of the measured window, so a
// request's client-measured latency can be joined to its trace by trace id
// (`tailscope diagnose --requests`, docs/diagnose.md). CSV, written once
// after the run (nothing on the hot path but a push into a reserved vector):
//
//   # tailscope.request-log/1
//   trace_id,intended_unix_ns,latency_ns,ok
//   4bf92f3577b34da6a3ce929d0e0e4736,1764150000123456789,1234567,1
//
// trace_id: the traceparent's 32 hex digits; intended_unix_ns: the request's
// intended send time on the realtime clock; latency_ns: received − intended
// (coordinated omission corrected); ok: 1 for a correct answer (HTTP 200),
// 0 for another status. Requests never answered (errors, timeouts) are not
// lines: the document's error counts say how many.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "load/worker.h"

namespace tailscope::load {

inline constexpr const char* kRequestLogSchema = "tailscope.request-log/1";

// The file's text, rows in intended-time order; monotonic_to_unix_ns is
// added to each monotonic intended time.
std::string request_log_csv(std::vector<RequestLogRow> rows, int64_t monotonic_to_unix_ns);

}  // namespace tailscope::load
