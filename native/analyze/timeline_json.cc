#include "analyze/timeline_json.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "analyze/analysis_json.h"

namespace tailscope::analyze {

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void write_text(JsonWriter& w, std::string_view text) {
  const std::string valid = trace::valid_utf8(text);
  w.String(valid.data(), static_cast<rapidjson::SizeType>(valid.size()));
}

}  // namespace

void append_trace_timeline_json(const TraceAnalysis& a, const trace::NameTable& names,
                                const std::vector<WhatIfScenario>& scenarios, std::string& out) {
  out += "{\"analysis\":";
  append_trace_analysis_json(a, names, scenarios, out);
  out += ",\"spans\":";
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartArray();
  if (a.analyzed && a.tree != nullptr) {
    const SpanTree& tree = *a.tree;
    for (std::uint32_t s : tree.preorder()) {
      const trace::Span& span = tree.span(s);
      w.StartObject();
      w.Key("span_id");
      write_text(w, a.trace->span_id(span));
      w.Key("parent_span_id");
      if (tree.parent(s) == kNoSpan) {
        w.Null();
      } else {
        write_text(w, a.trace->span_id(tree.span(tree.parent(s))));
      }
      w.Key("service");
      write_text(w, names.name(span.service));
      w.Key("operation");
      write_text(w, names.name(span.operation));
      w.Key("kind");
      write_text(w, trace::span_kind_name(span.kind));
      w.Key("start_ns");
      w.Int64(tree.start(s));
      w.Key("end_ns");
      w.Int64(tree.end(s));
      w.Key("depth");
      w.Int(tree.depth(s));
      if (span.cache != trace::CacheResult::kNone) {  // a cache read's answer (trace.h)
        w.Key("cache");
        write_text(w, trace::cache_result_name(span.cache));
      }
      w.EndObject();
    }
  }
  w.EndArray();
  out.append(buffer.GetString(), buffer.GetSize());
  out += '}';
}

}  // namespace tailscope::analyze
