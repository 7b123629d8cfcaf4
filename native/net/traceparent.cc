#include "net/traceparent.h"

namespace tailscope::net {
namespace {

constexpr char kHex[] = "0123456789abcdef";

bool parse_hex(std::string_view text, uint64_t* out) {
  uint64_t v = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9')
      digit = c - '0';
    else if (c >= 'a' && c <= 'f')
      digit = c - 'a' + 10;
    else
      return false;  // upper case is invalid in traceparent
    v = (v << 4) | static_cast<uint64_t>(digit);
  }
  *out = v;
  return true;
}

void append_hex(uint64_t v, int digits, std::string& out) {
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out += kHex[(v >> shift) & 0xf];
}

}  // namespace

bool parse_traceparent(std::string_view value, TraceParent* out) {
  constexpr size_t kLength = 55;  // 2 + 1 + 32 + 1 + 16 + 1 + 2
  if (value.size() < kLength || value[2] != '-' || value[35] != '-' || value[52] != '-') return false;
  uint64_t version = 0, flags = 0;
  if (!parse_hex(value.substr(0, 2), &version) || version == 0xff) return false;
  if (version == 0 ? value.size() != kLength : (value.size() > kLength && value[kLength] != '-')) return false;
  TraceParent p;
  if (!parse_hex(value.substr(3, 16), &p.trace_id_high) || !parse_hex(value.substr(19, 16), &p.trace_id_low) ||
      !parse_hex(value.substr(36, 16), &p.parent_id) || !parse_hex(value.substr(53, 2), &flags))
    return false;
  if ((p.trace_id_high | p.trace_id_low) == 0 || p.parent_id == 0) return false;
  p.sampled = (flags & 1) != 0;
  *out = p;
  return true;
}

void append_traceparent(const TraceParent& parent, std::string& out) {
  out += "00-";
  append_hex(parent.trace_id_high, 16, out);
  append_hex(parent.trace_id_low, 16, out);
  out += '-';
  append_hex(parent.parent_id, 16, out);
  out += parent.sampled ? "-01" : "-00";
}

std::string trace_id_hex(uint64_t high, uint64_t low) {
  std::string out;
  out.reserve(32);
  append_hex(high, 16, out);
  append_hex(low, 16, out);
  return out;
}

}  // namespace tailscope::net
