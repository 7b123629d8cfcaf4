#include "analyze/analysis_json.h"

#include <rapidjson/writer.h>

namespace tailscope::analyze {

namespace {

// RapidJSON output stream that hands its text to a sink in chunks.
class ChunkedOutput {
 public:
  using Ch = char;
  explicit ChunkedOutput(const JsonChunkSink& sink) : sink_(sink) { buffer_.reserve(kTraceJsonChunkBytes + 64); }
  void Put(char c) {
    buffer_.push_back(c);
    if (buffer_.size() >= kTraceJsonChunkBytes) Flush();
  }
  void Flush() {
    if (buffer_.empty()) return;
    sink_(buffer_);
    buffer_.clear();
  }

 private:
  const JsonChunkSink& sink_;
  std::string buffer_;
};

using JsonWriter = rapidjson::Writer<ChunkedOutput>;

void json_string(JsonWriter& w, std::string_view text) {
  if (trace::is_valid_utf8(text)) {
    w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  } else {
    const std::string repaired = trace::valid_utf8(text);
    w.String(repaired.data(), static_cast<rapidjson::SizeType>(repaired.size()));
  }
}

void json_span_ref(JsonWriter& w, const TraceAnalysis& a, const trace::NameTable& names, std::uint32_t span,
                   std::string_view id_key = "span_id") {
  const trace::Span& s = a.trace->spans[span];
  w.Key(id_key.data(), static_cast<rapidjson::SizeType>(id_key.size()));
  json_string(w, a.trace->span_id(s));
  w.Key("service");
  json_string(w, names.name(s.service));
  w.Key("operation");
  json_string(w, names.name(s.operation));
}

void json_operations(JsonWriter& w, const std::vector<OperationTime>& ops, const trace::NameTable& names) {
  w.StartArray();
  for (const OperationTime& op : ops) {
    w.StartObject();
    w.Key("service");
    json_string(w, names.name(op.service));
    w.Key("operation");
    json_string(w, names.name(op.operation));
    w.Key("exclusive_ns");
    w.Int64(op.exclusive_ns);
    w.EndObject();
  }
  w.EndArray();
}

void json_int64_array(JsonWriter& w, const std::vector<std::int64_t>& values) {
  w.StartArray();
  for (std::int64_t v : values) w.Int64(v);
  w.EndArray();
}

}  // namespace

std::string operation_key(const trace::NameTable& names, trace::NameId service, trace::NameId operation) {
  std::string key(names.name(service));
  key += ':';
  key += names.name(operation);
  return key;
}

void append_trace_analysis_json(const TraceAnalysis& a, const trace::NameTable& names,
                                const std::vector<WhatIfScenario>& scenarios, std::string& out) {
  write_trace_analysis_json(a, names, scenarios, [&out](std::string_view chunk) { out.append(chunk); });
}

void write_trace_analysis_json(const TraceAnalysis& a, const trace::NameTable& names,
                               const std::vector<WhatIfScenario>& scenarios, const JsonChunkSink& sink) {
  ChunkedOutput output(sink);
  JsonWriter w(output);
  w.StartObject();
  w.Key("trace_id");
  json_string(w, a.trace->trace_id);
  w.Key("analyzed");
  w.Bool(a.analyzed);
  w.Key("span_count");
  w.Uint64(a.trace->spans.size());
  if (a.analyzed) {
    w.Key("root");
    w.StartObject();
    json_span_ref(w, a, names, a.root);
    w.EndObject();
    w.Key("start_ns");
    w.Int64(a.start_ns);
    w.Key("end_to_end_ns");
    w.Int64(a.end_to_end_ns);
    w.Key("path");
    w.StartArray();
    for (const SpanOnPath& p : a.path.spans) {
      const trace::Span& s = a.trace->spans[p.span];
      json_string(w, operation_key(names, s.service, s.operation));
    }
    w.EndArray();
    w.Key("sections");
    w.StartArray();
    for (const CriticalPathSection& section : a.path.sections) {
      w.StartObject();
      json_span_ref(w, a, names, section.span);
      w.Key("start_ns");
      w.Int64(section.start_ns);
      w.Key("end_ns");
      w.Int64(section.end_ns);
      w.EndObject();
    }
    w.EndArray();
    w.Key("spans_on_path");
    w.StartArray();
    for (const SpanOnPath& p : a.path.spans) {
      w.StartObject();
      json_span_ref(w, a, names, p.span);
      w.Key("exclusive_ns");
      w.Int64(p.exclusive_ns);
      w.EndObject();
    }
    w.EndArray();
    w.Key("operations");
    json_operations(w, a.by_operation, names);
    w.Key("services");
    w.StartArray();
    for (const ServiceTime& s : a.by_service) {
      w.StartObject();
      w.Key("service");
      json_string(w, names.name(s.service));
      w.Key("exclusive_ns");
      w.Int64(s.exclusive_ns);
      w.EndObject();
    }
    w.EndArray();
    w.Key("delays");
    w.StartObject();
    w.Key("on_path_ns");
    w.Int64(a.delay_on_path_ns);
    w.Key("rpc");
    w.StartArray();
    for (const RpcDelay& d : a.rpc_delays) {
      w.StartObject();
      json_span_ref(w, a, names, d.client_span, "client_span_id");
      const trace::Span& server = a.trace->spans[d.server_span];
      w.Key("server_span_id");
      json_string(w, a.trace->span_id(server));
      w.Key("server_service");
      json_string(w, names.name(server.service));
      w.Key("server_operation");
      json_string(w, names.name(server.operation));
      w.Key("scheduling_ns");
      w.Int64(d.scheduling_ns);
      w.Key("join_ns");
      w.Int64(d.join_ns);
      w.EndObject();
    }
    w.EndArray();
    w.Key("probe_scheduling_ns");
    json_int64_array(w, a.probe_scheduling_ns);
    w.Key("probe_join_ns");
    json_int64_array(w, a.probe_join_ns);
    w.EndObject();
    w.Key("what_if");
    w.StartArray();
    for (std::size_t i = 0; i < a.what_if.size() && i < scenarios.size(); ++i) {
      w.StartObject();
      w.Key("scenario");
      json_string(w, scenarios[i].name);
      w.Key("end_to_end_ns");
      w.Int64(a.what_if[i].end_to_end_ns);
      w.Key("operations");
      json_operations(w, a.what_if[i].by_operation, names);
      w.EndObject();
    }
    w.EndArray();
  }
  w.Key("warnings");
  w.StartObject();
  for (std::size_t i = 0; i < a.warnings.counts.size(); ++i) {
    if (a.warnings.counts[i] == 0) continue;
    w.Key(kWarningNames[i].data(), static_cast<rapidjson::SizeType>(kWarningNames[i].size()));
    w.Uint64(a.warnings.counts[i]);
  }
  w.EndObject();
  w.EndObject();
  output.Flush();
}

}  // namespace tailscope::analyze
