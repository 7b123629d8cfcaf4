// Test helper: builds traces span by span. Used only by *_test.cc (the shared
// conformance fixtures: trace/conformance_fixtures.h).
#pragma once

#include <string>
#include <string_view>

#include "trace/trace.h"

namespace tailscope::analyze::testing {

class TraceBuilder {
 public:
  explicit TraceBuilder(trace::NameTable& names, std::string trace_id = "t") : names_(names) {
    trace_.trace_id = std::move(trace_id);
  }

  // Times in the unit the test chooses (ns in the model). parent "" = root.
  TraceBuilder& span(std::string_view id, std::string_view parent, std::int64_t start, std::int64_t duration,
                     std::string_view service = "svc", std::string_view operation = "",
                     trace::SpanKind kind = trace::SpanKind::kUnspecified,
                     trace::RefType ref = trace::RefType::kChildOf) {
    trace::Span s;
    s.span_id = trace_.store(id);
    if (!parent.empty()) {
      s.parent_span_id = trace_.store(parent);
      s.parent_ref = ref;
    }
    s.service = names_.intern(service);
    s.operation = names_.intern(operation.empty() ? id : operation);
    s.kind = kind;
    s.start_ns = start;
    s.duration_ns = duration;
    trace_.spans.push_back(s);
    return *this;
  }
  trace::Span& last() { return trace_.spans.back(); }
  const trace::Trace& trace() const { return trace_; }

 private:
  trace::NameTable& names_;
  trace::Trace trace_;
};

// prefix + number, e.g. numbered("span", 3) == "span3".
inline std::string numbered(std::string_view prefix, long long n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

}  // namespace tailscope::analyze::testing
