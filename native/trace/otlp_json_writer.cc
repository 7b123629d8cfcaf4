#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <map>
#include <string>
#include <vector>

#include "trace/internal/span_tags.h"
#include "trace/trace_writer.h"

namespace tailscope::trace {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void write_text(JsonWriter& w, std::string_view text) {
  const std::string repaired = is_valid_utf8(text) ? std::string(text) : valid_utf8(text);
  w.String(repaired.data(), static_cast<rapidjson::SizeType>(repaired.size()));
}

void write_int_attribute(JsonWriter& w, std::string_view key, std::int64_t value) {
  w.StartObject();
  w.Key("key");
  write_text(w, key);
  w.Key("value");
  w.StartObject();
  w.Key("intValue");  // OTLP JSON writes 64-bit integers as strings
  const std::string text = std::to_string(value);
  w.String(text.c_str());
  w.EndObject();
  w.EndObject();
}

void write_string_attribute(JsonWriter& w, std::string_view key, std::string_view value) {
  w.StartObject();
  w.Key("key");
  write_text(w, key);
  w.Key("value");
  w.StartObject();
  w.Key("stringValue");
  write_text(w, value);
  w.EndObject();
  w.EndObject();
}

int otlp_kind(SpanKind kind) {
  switch (kind) {
    case SpanKind::kInternal:
      return 1;
    case SpanKind::kServer:
      return 2;
    case SpanKind::kClient:
      return 3;
    case SpanKind::kProducer:
      return 4;
    case SpanKind::kConsumer:
      return 5;
    case SpanKind::kUnspecified:
      break;
  }
  return 0;
}

void write_span(JsonWriter& w, const Trace& trace, const Span& span, const NameTable& names) {
  w.StartObject();
  w.Key("traceId");
  write_text(w, trace.trace_id);
  w.Key("spanId");
  write_text(w, trace.span_id(span));
  if (span.parent_ref != RefType::kNone) {
    w.Key("parentSpanId");
    write_text(w, trace.parent_span_id(span));
  }
  w.Key("name");
  write_text(w, names.name(span.operation));
  w.Key("kind");
  w.Int(otlp_kind(span.kind));
  w.Key("startTimeUnixNano");
  w.String(std::to_string(span.start_ns).c_str());
  w.Key("endTimeUnixNano");
  w.String(std::to_string(span.end_ns()).c_str());
  w.Key("attributes");
  w.StartArray();
  if (span.probe_scheduling_delay_ns >= 0) {
    write_int_attribute(w, internal::kSchedulingDelayTag, span.probe_scheduling_delay_ns);
  }
  if (span.probe_join_delay_ns >= 0) write_int_attribute(w, internal::kJoinDelayTag, span.probe_join_delay_ns);
  if (span.cache != CacheResult::kNone) write_string_attribute(w, kCacheTag, cache_result_name(span.cache));
  w.EndArray();
  if (span.error) {
    w.Key("status");
    w.StartObject();
    w.Key("code");
    w.Int(2);
    w.EndObject();
  }
  w.EndObject();
}

}  // namespace

std::string otlp_json_document(std::span<const Trace> traces, const NameTable& names) {
  // One resource per service; spans keep their trace order inside it.
  std::map<NameId, std::vector<std::pair<const Trace*, const Span*>>> by_service;
  for (const Trace& trace : traces) {
    for (const Span& span : trace.spans) by_service[span.service].emplace_back(&trace, &span);
  }
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("resourceSpans");
  w.StartArray();
  for (const auto& [service, spans] : by_service) {
    w.StartObject();
    w.Key("resource");
    w.StartObject();
    w.Key("attributes");
    w.StartArray();
    w.StartObject();
    w.Key("key");
    w.String("service.name");
    w.Key("value");
    w.StartObject();
    w.Key("stringValue");
    write_text(w, names.name(service));
    w.EndObject();
    w.EndObject();
    w.EndArray();
    w.EndObject();
    w.Key("scopeSpans");
    w.StartArray();
    w.StartObject();
    w.Key("scope");
    w.StartObject();
    w.Key("name");
    w.String("tailscope");
    w.EndObject();
    w.Key("spans");
    w.StartArray();
    for (const auto& [trace, span] : spans) write_span(w, *trace, *span, names);
    w.EndArray();
    w.EndObject();
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace tailscope::trace
