#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>
#include <string>
#include <vector>

#include "trace/internal/span_tags.h"
#include "trace/trace_writer.h"

namespace tailscope::trace {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void write_text(JsonWriter& w, std::string_view text) {
  if (is_valid_utf8(text)) {
    w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  } else {
    const std::string repaired = valid_utf8(text);
    w.String(repaired.data(), static_cast<rapidjson::SizeType>(repaired.size()));
  }
}

void write_tag(JsonWriter& w, std::string_view key, std::string_view type) {
  w.StartObject();
  w.Key("key");
  write_text(w, key);
  w.Key("type");
  write_text(w, type);
  w.Key("value");
}

std::string process_id(std::size_t index) {
  char text[32];
  std::snprintf(text, sizeof text, "p%zu", index + 1);
  return text;
}

void write_trace(JsonWriter& w, const Trace& trace, const NameTable& names) {
  // processID "p<n>" per distinct service, in order of first use.
  std::vector<NameId> services;
  auto process_index = [&](NameId service) {
    for (std::size_t i = 0; i < services.size(); ++i) {
      if (services[i] == service) return i;
    }
    services.push_back(service);
    return services.size() - 1;
  };
  w.StartObject();
  w.Key("traceID");
  write_text(w, trace.trace_id);
  w.Key("spans");
  w.StartArray();
  for (const Span& span : trace.spans) {
    w.StartObject();
    w.Key("traceID");
    write_text(w, trace.trace_id);
    w.Key("spanID");
    write_text(w, trace.span_id(span));
    w.Key("operationName");
    write_text(w, names.name(span.operation));
    w.Key("references");
    w.StartArray();
    if (span.parent_ref != RefType::kNone) {
      w.StartObject();
      w.Key("refType");
      w.String(span.parent_ref == RefType::kFollowsFrom ? "FOLLOWS_FROM" : "CHILD_OF");
      w.Key("traceID");
      write_text(w, trace.trace_id);
      w.Key("spanID");
      write_text(w, trace.parent_span_id(span));
      w.EndObject();
    }
    w.EndArray();
    w.Key("startTime");
    w.Int64(span.start_ns / 1000);
    w.Key("duration");
    w.Int64(span.duration_ns / 1000);
    w.Key("tags");
    w.StartArray();
    if (span.kind != SpanKind::kUnspecified) {
      write_tag(w, "span.kind", "string");
      write_text(w, span_kind_name(span.kind));
      w.EndObject();
    }
    if (span.error) {
      write_tag(w, "error", "bool");
      w.Bool(true);
      w.EndObject();
    }
    if (span.probe_scheduling_delay_ns >= 0) {
      write_tag(w, internal::kSchedulingDelayTag, "int64");
      w.Int64(span.probe_scheduling_delay_ns);
      w.EndObject();
    }
    if (span.probe_join_delay_ns >= 0) {
      write_tag(w, internal::kJoinDelayTag, "int64");
      w.Int64(span.probe_join_delay_ns);
      w.EndObject();
    }
    if (span.cache != CacheResult::kNone) {
      write_tag(w, kCacheTag, "string");
      write_text(w, cache_result_name(span.cache));
      w.EndObject();
    }
    w.EndArray();
    w.Key("logs");
    w.StartArray();
    w.EndArray();
    w.Key("processID");
    w.String(process_id(process_index(span.service)).c_str());
    w.Key("warnings");
    w.Null();
    w.EndObject();
  }
  w.EndArray();
  w.Key("processes");
  w.StartObject();
  for (std::size_t i = 0; i < services.size(); ++i) {
    w.Key(process_id(i).c_str());
    w.StartObject();
    w.Key("serviceName");
    write_text(w, names.name(services[i]));
    w.Key("tags");
    w.StartArray();
    w.EndArray();
    w.EndObject();
  }
  w.EndObject();
  w.Key("warnings");
  w.Null();
  w.EndObject();
}

}  // namespace

std::string jaeger_json_trace(const Trace& trace, const NameTable& names) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  write_trace(w, trace, names);
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string jaeger_json_document(std::span<const Trace> traces, const NameTable& names) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("data");
  w.StartArray();
  for (const Trace& trace : traces) write_trace(w, trace, names);
  w.EndArray();
  w.Key("total");
  w.Int(0);
  w.Key("limit");
  w.Int(0);
  w.Key("offset");
  w.Int(0);
  w.Key("errors");
  w.Null();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace tailscope::trace
