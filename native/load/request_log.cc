#include "load/request_log.h"

#include <algorithm>

#include "net/traceparent.h"

namespace tailscope::load {

std::string request_log_csv(std::vector<RequestLogRow> rows, int64_t monotonic_to_unix_ns) {
  std::sort(rows.begin(), rows.end(),
            [](const RequestLogRow& a, const RequestLogRow& b) { return a.intended_ns < b.intended_ns; });
  std::string out = std::string("# ") + kRequestLogSchema + "\ntrace_id,intended_unix_ns,latency_ns,ok\n";
  out.reserve(out.size() + rows.size() * 72);
  for (const RequestLogRow& r : rows) {
    out += net::trace_id_hex(r.trace_id_high, r.trace_id_low);
    out += ',';
    out += std::to_string(r.intended_ns + monotonic_to_unix_ns);
    out += ',';
    out += std::to_string(r.latency_ns);
    out += r.ok ? ",1\n" : ",0\n";
  }
  return out;
}

}  // namespace tailscope::load
