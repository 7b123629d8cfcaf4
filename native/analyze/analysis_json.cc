#include "analyze/analysis_json.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/decimal.h"

namespace tailscope::analyze {

namespace {

// True when `text` is printable ASCII without '"' or '\\': valid UTF-8 that
// needs no escape, as span and trace ids almost always are. Checked 16 bytes
// a compare (the last block overlapping the one before, never past the
// text); byte by byte, this check and the escape loop below were most of
// the output's own time (perf annotate).
bool is_plain_ascii(std::string_view text) {
  const char* p = text.data();
  const std::size_t n = text.size();
#if defined(__SSE2__)
  if (n >= 16) {
    // Signed bytes: below 0x20 is a control character or (negative) not ASCII.
    const __m128i space = _mm_set1_epi8(0x20);
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    auto clean = [&](const char* at) {
      const __m128i block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
      const __m128i bad = _mm_or_si128(_mm_cmplt_epi8(block, space),
                                       _mm_or_si128(_mm_cmpeq_epi8(block, quote), _mm_cmpeq_epi8(block, backslash)));
      return _mm_movemask_epi8(bad) == 0;
    };
    for (std::size_t i = 0; i + 16 < n; i += 16) {
      if (!clean(p + i)) return false;
    }
    return clean(p + n - 16);
  }
#endif
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(p[i]);
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') return false;
  }
  return true;
}

// Appends `text` as a JSON string: quotes, backslashes and control
// characters escaped as RapidJSON's writer does, invalid UTF-8 repaired to
// U+FFFD (span ids come straight from the input).
template <typename Out>
void append_json_string(Out& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  if (is_plain_ascii(text)) {
    out.push_back('"');
    out.append(text);
    out.push_back('"');
    return;
  }
  if (!trace::is_valid_utf8(text)) {
    append_json_string(out, trace::valid_utf8(text));
    return;
  }
  out.push_back('"');
  std::size_t run = 0;  // start of the bytes not yet copied
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default: {
        const char escape[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out.append(escape, sizeof escape);
        break;
      }
    }
  }
  out.append(text.data() + run, text.size() - run);
  out.push_back('"');
}

// Integers in place (core/decimal.h): times since the epoch are 19 digits,
// two in every section of the path.
void append_uint(internal::JsonTextBuffer& out, std::uint64_t v) {
  char* at = out.reserve_more(kMaxDecimalChars);
  out.commit(static_cast<std::size_t>(write_unsigned_decimal(at, v) - at));
}

void append_int(internal::JsonTextBuffer& out, std::int64_t v) {
  char* at = out.reserve_more(kMaxDecimalChars);
  out.commit(static_cast<std::size_t>(write_signed_decimal(at, v) - at));
}

void append_int_array(internal::JsonTextBuffer& out, const std::vector<std::int64_t>& values) {
  out.push_back('[');
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    append_int(out, values[i]);
  }
  out.push_back(']');
}

}  // namespace

void internal::JsonTextBuffer::grow(std::size_t n) { data_.resize(std::max(2 * data_.size(), size_ + n + 256)); }

TraceAnalysisJsonWriter::TraceAnalysisJsonWriter(const trace::NameTable& names,
                                                 const std::vector<WhatIfScenario>& scenarios)
    : names_(names), scenarios_(scenarios) {}

void TraceAnalysisJsonWriter::name(trace::NameId id) {
  if (id >= escaped_names_.size()) escaped_names_.resize(names_.size());
  std::string& escaped = escaped_names_[id];
  if (escaped.empty()) append_json_string(escaped, names_.name(id));
  out_.append(escaped);
}

void TraceAnalysisJsonWriter::maybe_flush(const JsonChunkSink* sink) {
  if (sink != nullptr && out_.size() >= kTraceJsonChunkBytes) {
    (*sink)(out_.view());
    out_.clear();
  }
}

void TraceAnalysisJsonWriter::span_ref(const TraceAnalysis& a, std::uint32_t span, std::string_view id_key) {
  const trace::Span& s = a.trace->spans[span];
  out_.push_back('"');
  out_.append(id_key);
  out_.append("\":");
  append_json_string(out_, a.trace->span_id(s));
  out_.append(",\"service\":");
  name(s.service);
  out_.append(",\"operation\":");
  name(s.operation);
}

void TraceAnalysisJsonWriter::operations(const std::vector<OperationTime>& ops) {
  out_.push_back('[');
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (i > 0) out_.push_back(',');
    out_.append("{\"service\":");
    name(ops[i].service);
    out_.append(",\"operation\":");
    name(ops[i].operation);
    out_.append(",\"exclusive_ns\":");
    append_int(out_, ops[i].exclusive_ns);
    out_.push_back('}');
  }
  out_.push_back(']');
}

void TraceAnalysisJsonWriter::write(const TraceAnalysis& analysis, const JsonChunkSink& sink) {
  out_.clear();
  write_object(analysis, &sink);
  if (!out_.empty()) sink(out_.view());
  out_.clear();
}

void TraceAnalysisJsonWriter::append(const TraceAnalysis& analysis, std::string& out) {
  out_.swap(out);  // append in place: no copy of a large result
  write_object(analysis, nullptr);
  out_.swap(out);
}

std::string_view TraceAnalysisJsonWriter::index_object(const TraceAnalysis& a) {
  out_.clear();  // in the writer's own room, which it keeps: no zero-filled growth per trace
  head(a);
  if (a.analyzed) times(a);
  out_.push_back('}');
  return out_.view();
}

void TraceAnalysisJsonWriter::head(const TraceAnalysis& a) {
  out_.append("{\"trace_id\":");
  append_json_string(out_, a.trace->trace_id);
  if (a.analyzed)
    out_.append(",\"analyzed\":true");
  else
    out_.append(",\"analyzed\":false");
  out_.append(",\"span_count\":");
  append_uint(out_, a.trace->spans.size());
}

void TraceAnalysisJsonWriter::times(const TraceAnalysis& a) {
  out_.append(",\"start_ns\":");
  append_int(out_, a.start_ns);
  out_.append(",\"end_to_end_ns\":");
  append_int(out_, a.end_to_end_ns);
}

void TraceAnalysisJsonWriter::write_object(const TraceAnalysis& a, const JsonChunkSink* sink) {
  head(a);
  if (a.analyzed) {
    out_.append(",\"root\":{");
    span_ref(a, a.root, "span_id");
    out_.push_back('}');
    times(a);
    out_.append(",\"path\":[");
    for (std::size_t i = 0; i < a.path.spans.size(); ++i) {
      const trace::Span& s = a.trace->spans[a.path.spans[i].span];
      if (i > 0) out_.push_back(',');
      // "service:operation" from the two escaped names, without their inner quotes.
      name(s.service);
      out_.back() = ':';
      const std::size_t at = out_.size();
      name(s.operation);
      out_.erase_one(at);
      maybe_flush(sink);
    }
    out_.append("],\"sections\":[");
    for (std::size_t i = 0; i < a.path.sections.size(); ++i) {
      const CriticalPathSection& section = a.path.sections[i];
      if (i > 0) out_.push_back(',');
      out_.append("{");
      span_ref(a, section.span, "span_id");
      out_.append(",\"start_ns\":");
      append_int(out_, section.start_ns);
      out_.append(",\"end_ns\":");
      append_int(out_, section.end_ns);
      out_.push_back('}');
      maybe_flush(sink);
    }
    out_.append("],\"spans_on_path\":[");
    for (std::size_t i = 0; i < a.path.spans.size(); ++i) {
      const SpanOnPath& p = a.path.spans[i];
      if (i > 0) out_.push_back(',');
      out_.append("{");
      span_ref(a, p.span, "span_id");
      out_.append(",\"exclusive_ns\":");
      append_int(out_, p.exclusive_ns);
      out_.push_back('}');
      maybe_flush(sink);
    }
    out_.append("],\"operations\":");
    operations(a.by_operation);
    maybe_flush(sink);
    out_.append(",\"services\":[");
    for (std::size_t i = 0; i < a.by_service.size(); ++i) {
      if (i > 0) out_.push_back(',');
      out_.append("{\"service\":");
      name(a.by_service[i].service);
      out_.append(",\"exclusive_ns\":");
      append_int(out_, a.by_service[i].exclusive_ns);
      out_.push_back('}');
    }
    out_.append("],\"delays\":{\"on_path_ns\":");
    if (a.rpc_delays.empty()) {
      out_.append("null");  // no RPC pair: unavailable, not "no delay"
    } else {
      append_int(out_, a.delay_on_path_ns);
    }
    out_.append(",\"rpc\":[");
    for (std::size_t i = 0; i < a.rpc_delays.size(); ++i) {
      const RpcDelay& d = a.rpc_delays[i];
      if (i > 0) out_.push_back(',');
      out_.append("{");
      span_ref(a, d.client_span, "client_span_id");
      const trace::Span& server = a.trace->spans[d.server_span];
      out_.append(",\"server_span_id\":");
      append_json_string(out_, a.trace->span_id(server));
      out_.append(",\"server_service\":");
      name(server.service);
      out_.append(",\"server_operation\":");
      name(server.operation);
      out_.append(",\"scheduling_ns\":");
      append_int(out_, d.scheduling_ns);
      out_.append(",\"join_ns\":");
      append_int(out_, d.join_ns);
      out_.append(",\"rule\":");
      append_json_string(out_, kPairRuleNames[static_cast<std::size_t>(d.rule)]);
      out_.push_back('}');
      maybe_flush(sink);
    }
    out_.append("],\"retried_server_children\":");
    append_uint(out_, a.pairing.retried_server_children);
    out_.append(",\"launch_stagger\":[");
    for (std::size_t i = 0; i < a.launch_stagger.size(); ++i) {
      const LaunchStagger& l = a.launch_stagger[i];
      if (i > 0) out_.push_back(',');
      out_.append("{\"parent_span_id\":");
      append_json_string(out_, a.trace->span_id(a.trace->spans[l.parent_span]));
      out_.push_back(',');
      span_ref(a, l.client_span, "client_span_id");
      out_.append(",\"stagger_ns\":");
      append_int(out_, l.stagger_ns);
      out_.push_back('}');
      maybe_flush(sink);
    }
    out_.append("],\"probe_calls\":[");
    for (std::size_t i = 0; i < a.probe_spans.size(); ++i) {
      const trace::Span& span = a.trace->spans[a.probe_spans[i]];
      if (i > 0) out_.push_back(',');
      out_.append("{");
      span_ref(a, a.probe_spans[i], "span_id");
      out_.append(",\"scheduling_ns\":");
      if (span.probe_scheduling_delay_ns >= 0) {
        append_int(out_, span.probe_scheduling_delay_ns);
      } else {
        out_.append("null");
      }
      out_.append(",\"join_ns\":");
      if (span.probe_join_delay_ns >= 0) {
        append_int(out_, span.probe_join_delay_ns);
      } else {
        out_.append("null");
      }
      out_.push_back('}');
      maybe_flush(sink);
    }
    out_.append("],\"probe_scheduling_ns\":");
    append_int_array(out_, a.probe_scheduling_ns);
    out_.append(",\"probe_join_ns\":");
    append_int_array(out_, a.probe_join_ns);
    out_.append("},\"what_if\":[");
    for (std::size_t i = 0; i < a.what_if.size() && i < scenarios_.size(); ++i) {
      if (i > 0) out_.push_back(',');
      out_.append("{\"scenario\":");
      append_json_string(out_, scenarios_[i].name);
      out_.append(",\"end_to_end_ns\":");
      append_int(out_, a.what_if[i].end_to_end_ns);
      out_.append(",\"operations\":");
      operations(a.what_if[i].by_operation);
      out_.push_back('}');
      maybe_flush(sink);
    }
    out_.push_back(']');
  }
  out_.append(",\"warnings\":{");
  bool first = true;
  for (std::size_t i = 0; i < a.warnings.counts.size(); ++i) {
    if (a.warnings.counts[i] == 0) continue;
    if (!first) out_.push_back(',');
    first = false;
    append_json_string(out_, kWarningNames[i]);
    out_.push_back(':');
    append_uint(out_, a.warnings.counts[i]);
  }
  out_.append("}}");
}

void append_trace_analysis_json(const TraceAnalysis& analysis, const trace::NameTable& names,
                                const std::vector<WhatIfScenario>& scenarios, std::string& out) {
  TraceAnalysisJsonWriter(names, scenarios).append(analysis, out);
}

void write_trace_analysis_json(const TraceAnalysis& analysis, const trace::NameTable& names,
                               const std::vector<WhatIfScenario>& scenarios, const JsonChunkSink& sink) {
  TraceAnalysisJsonWriter(names, scenarios).write(analysis, sink);
}

std::string operation_key(const trace::NameTable& names, trace::NameId service, trace::NameId operation) {
  std::string key(names.name(service));
  key += ':';
  key += names.name(operation);
  return key;
}

}  // namespace tailscope::analyze
