// The few span tags / attributes the analyzer uses; every other tag is
// skipped without copying it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "trace/internal/json_scalar.h"
#include "trace/trace.h"

namespace tailscope::trace::internal {

inline constexpr std::string_view kSchedulingDelayTag = "tailscope.scheduling_delay_ns";
inline constexpr std::string_view kJoinDelayTag = "tailscope.join_delay_ns";

enum class SpanTag : std::uint8_t { kOther, kSpanKind, kError, kOtelStatusCode, kSchedulingDelay, kJoinDelay, kCache };

inline SpanTag classify_span_tag(std::string_view key) {
  switch (key.size()) {
    case 5:
      return is_literal(key, "error") ? SpanTag::kError : SpanTag::kOther;
    case 9:
      return is_literal(key, "span.kind") ? SpanTag::kSpanKind : SpanTag::kOther;
    case 15:
      return is_literal(key, "tailscope.cache") ? SpanTag::kCache : SpanTag::kOther;
    case 16:
      return is_literal(key, "otel.status_code") ? SpanTag::kOtelStatusCode : SpanTag::kOther;
    case 23:
      return is_literal(key, "tailscope.join_delay_ns") ? SpanTag::kJoinDelay : SpanTag::kOther;
    case 29:
      return is_literal(key, "tailscope.scheduling_delay_ns") ? SpanTag::kSchedulingDelay : SpanTag::kOther;
    default:
      return SpanTag::kOther;
  }
}

inline void apply_span_tag(Span& span, SpanTag tag, const JsonScalar& value) {
  switch (tag) {
    case SpanTag::kSpanKind:
      if (value.is_string()) span.kind = parse_span_kind(value.text);
      break;
    case SpanTag::kError:
      span.error = span.error || value.is_truthy();
      break;
    case SpanTag::kOtelStatusCode:
      span.error = span.error || (value.is_string() && is_literal(value.text, "ERROR"));
      break;
    case SpanTag::kSchedulingDelay:
    case SpanTag::kJoinDelay: {
      std::int64_t ns = 0;
      if (value.to_int64(&ns) && ns >= 0) {
        (tag == SpanTag::kSchedulingDelay ? span.probe_scheduling_delay_ns : span.probe_join_delay_ns) = ns;
      }
      break;
    }
    case SpanTag::kCache:
      if (value.is_string()) span.cache = parse_cache_result(value.text);
      break;
    case SpanTag::kOther:
      break;
  }
}

// A scalar that owns its text, for a tag whose value arrives before its key.
struct OwnedScalar {
  JsonScalar scalar;
  std::string storage;
  bool present = false;

  void set(const JsonScalar& s) {
    scalar = s;
    if (s.is_string()) {
      storage.assign(s.text);
      scalar.text = storage;
    }
    present = true;
  }
  void reset() { present = false; }
};

}  // namespace tailscope::trace::internal
