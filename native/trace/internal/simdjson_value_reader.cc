#include "trace/internal/simdjson_value_reader.h"

#include <simdjson.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <bit>
#include <functional>
#include <limits>
#include <string_view>

#include "trace/internal/jaeger_trace_builder.h"
#include "trace/internal/json_scalar.h"
#include "trace/internal/otlp_document_builder.h"

namespace tailscope::trace::internal {

namespace {

namespace ondemand = simdjson::ondemand;

// Gives up on the value (the RapidJSON re-read reports the error).
struct GiveUp {};

template <typename T>
T value_or_give_up(simdjson::simdjson_result<T> result) {
  T out{};
  if (std::move(result).get(out) != simdjson::SUCCESS) throw GiveUp{};
  return out;
}

// The value in an iteration's result, in place. Copied out instead, the
// compiler writes the field (key pointer and 24-byte value) to the stack
// piecewise and reads it back whole: a store-forwarding stall for every
// member of every span, measured (perf annotate) as a quarter of the walk.
template <typename T>
inline T& in_place(simdjson::simdjson_result<T>& result) {
  if (result.error() != simdjson::SUCCESS) throw GiveUp{};
  T&& value = std::move(result).value_unsafe();
  return value;
}

// The first '"' or '\\' at or after p, 16 bytes at a time: ids and names
// are 10-30 bytes, so one or two compares instead of a branch per byte. The
// string's closing quote is inside the value and the padding after the value
// is readable, so a block may run past the quote but not past the buffer.
inline const char* quote_or_backslash(const char* p) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  for (;; p += 16) {
    const __m128i block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const auto mask = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(block, quote), _mm_cmpeq_epi8(block, backslash))));
    if (mask != 0) return p + std::countr_zero(mask);
  }
#else
  while (*p != '"' && *p != '\\') ++p;
  return p;
#endif
}

// The text of a string whose raw bytes (from just after its opening quote)
// hold no escape: a view into the input, no copy. Stage 1 has checked the
// whole value (strings closed, valid UTF-8, no raw control characters), so
// the closing quote is there. False when an escape needs decoding.
inline bool unescaped_in_place(const char* raw, std::string_view* out) {
  const char* end = quote_or_backslash(raw);
  if (*end != '"') return false;
  *out = std::string_view(raw, static_cast<std::size_t>(end - raw));
  return true;
}

inline std::string_view key_of(ondemand::field& field) {
  std::string_view key;
  if (unescaped_in_place(field.key().raw(), &key)) return key;
  return value_or_give_up(field.unescaped_key());
}

inline std::string_view string_of(ondemand::value& v) {
  std::string_view text;
  if (unescaped_in_place(value_or_give_up(v.get_raw_json_string()).raw(), &text)) return text;
  return value_or_give_up(v.get_string());
}

// Converts a scalar as RapidJSON's SAX reader reports it. Numbers simdjson
// cannot hold exactly (beyond 64 bits, where RapidJSON falls back to double)
// give up.
JsonScalar scalar_of(ondemand::value& v, ondemand::json_type type) {
  JsonScalar s;
  switch (type) {
    case ondemand::json_type::string:
      s.type = JsonScalar::Type::kString;
      s.text = string_of(v);
      break;
    case ondemand::json_type::number:
      // Times are integers: try that first, then ask which kind of number.
      if (v.get_int64().get(s.integer) == simdjson::SUCCESS) {
        s.type = JsonScalar::Type::kInt;
        break;
      }
      switch (value_or_give_up(v.get_number_type())) {
        case ondemand::number_type::signed_integer:
          s.type = JsonScalar::Type::kInt;
          s.integer = value_or_give_up(v.get_int64());
          break;
        case ondemand::number_type::unsigned_integer:
          s.type = JsonScalar::Type::kUint;
          s.unsigned_integer = value_or_give_up(v.get_uint64());
          break;
        case ondemand::number_type::floating_point_number:
          s.type = JsonScalar::Type::kDouble;
          s.number = value_or_give_up(v.get_double());
          break;
        default:
          throw GiveUp{};
      }
      break;
    case ondemand::json_type::boolean:
      s.type = JsonScalar::Type::kBool;
      s.boolean = value_or_give_up(v.get_bool());
      break;
    case ondemand::json_type::null:
      if (!value_or_give_up(v.is_null())) throw GiveUp{};
      break;
    default:
      throw GiveUp{};
  }
  return s;
}

// A value the builders would read but whose type they ignore (a number where
// a string belongs, a container where a scalar does) is still converted when
// it is a scalar, so that what simdjson reads differently from RapidJSON
// (numbers beyond 64 bits) gives up there too.
inline void check_scalar(ondemand::value& v, ondemand::json_type type) {
  if (type != ondemand::json_type::object && type != ondemand::json_type::array) (void)scalar_of(v, type);
}

inline ondemand::json_type type_of(ondemand::value& v) { return value_or_give_up(v.type()); }

// Calls on_string(text) for a string value, checks any other scalar.
template <typename OnString>
inline void read_string(ondemand::value& v, OnString on_string) {
  const ondemand::json_type type = type_of(v);
  if (type == ondemand::json_type::string) {
    on_string(string_of(v));
  } else {
    check_scalar(v, type);
  }
}

// Calls on_scalar(scalar) for a scalar value; containers are skipped.
template <typename OnScalar>
inline void read_scalar(ondemand::value& v, OnScalar on_scalar) {
  const ondemand::json_type type = type_of(v);
  if (type == ondemand::json_type::object || type == ondemand::json_type::array) return;
  // Tag values are strings and times integers: those inline, the rest (and
  // what they do not cover) through scalar_of().
  JsonScalar s;
  if (type == ondemand::json_type::string) {
    s.type = JsonScalar::Type::kString;
    s.text = string_of(v);
  } else if (type == ondemand::json_type::number && v.get_int64().get(s.integer) == simdjson::SUCCESS) {
    s.type = JsonScalar::Type::kInt;
  } else {
    s = scalar_of(v, type);
  }
  on_scalar(s);
}

// Calls on_object(object) for each object element of an array value; other
// elements are skipped, a scalar instead of the array is checked.
template <typename OnObject>
inline void for_each_object_in_array(ondemand::value& v, OnObject on_object) {
  const ondemand::json_type type = type_of(v);
  if (type != ondemand::json_type::array) {
    check_scalar(v, type);
    return;
  }
  for (auto element : value_or_give_up(v.get_array())) {
    ondemand::value& e = in_place(element);
    if (type_of(e) == ondemand::json_type::object) on_object(value_or_give_up(e.get_object()));
  }
}

// Calls on_field(key, value) for each member of an object value; a scalar
// instead of the object is checked.
template <typename OnField>
inline void for_each_field_of_object(ondemand::value& v, OnField on_field) {
  const ondemand::json_type type = type_of(v);
  if (type != ondemand::json_type::object) {
    check_scalar(v, type);
    return;
  }
  for (auto field_result : value_or_give_up(v.get_object())) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    on_field(key, field.value());
  }
}

// ---- Jaeger: a trace object's members, typed, in document order ----
// Each function reads what JaegerTraceBuilder's SAX events read of that
// member, and skips (without parsing) what they skip.

void read_jaeger_reference(ondemand::object object, JaegerTraceBuilder& b) {
  b.begin_reference();
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    if (is_literal(key, "refType")) {
      read_string(field.value(), [&](std::string_view text) { b.reference_type(text); });
    } else if (is_literal(key, "spanID")) {
      read_string(field.value(), [&](std::string_view text) { b.reference_span_id(text); });
    }
  }
  b.end_reference();
}

void read_jaeger_tag(ondemand::object object, JaegerTraceBuilder& b) {
  b.begin_tag();
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    if (is_literal(key, "key")) {
      read_string(field.value(), [&](std::string_view text) { b.tag_key(text); });
    } else if (is_literal(key, "value") && b.tag_wants_value()) {
      read_scalar(field.value(), [&](const JsonScalar& value) { b.tag_value(value); });
    }
  }
}

void read_jaeger_span(ondemand::object object, JaegerTraceBuilder& b) {
  b.begin_span();
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    ondemand::value& v = field.value();
    // By length, then the text: the members of every span, most of them used.
    switch (key.size()) {
      case 4:
        if (is_literal(key, "tags"))
          for_each_object_in_array(v, [&](ondemand::object tag) { read_jaeger_tag(tag, b); });
        break;
      case 6:
        if (is_literal(key, "spanID")) read_string(v, [&](std::string_view text) { b.span_id(text); });
        break;
      case 7:
        if (is_literal(key, "traceID")) {
          read_string(v, [&](std::string_view text) { b.span_trace_id(text); });
        } else if (is_literal(key, "process")) {
          for_each_field_of_object(v, [&](std::string_view process_key, ondemand::value& process_value) {
            if (is_literal(process_key, "serviceName")) {
              read_string(process_value, [&](std::string_view text) { b.span_service_name(text); });
            }
          });
        }
        break;
      case 8:
        if (is_literal(key, "duration")) read_scalar(v, [&](const JsonScalar& t) { b.span_time(false, t); });
        break;
      case 9:
        if (is_literal(key, "startTime"))
          read_scalar(v, [&](const JsonScalar& t) { b.span_time(true, t); });
        else if (is_literal(key, "processID"))
          read_string(v, [&](std::string_view text) { b.process_id(text); });
        break;
      case 10:
        if (is_literal(key, "references"))
          for_each_object_in_array(v, [&](ondemand::object ref) { read_jaeger_reference(ref, b); });
        break;
      case 12:
        if (is_literal(key, "parentSpanID")) read_string(v, [&](std::string_view text) { b.parent_span_id(text); });
        break;
      case 13:
        if (is_literal(key, "operationName")) read_string(v, [&](std::string_view text) { b.operation_name(text); });
        break;
      default:
        break;
    }
  }
  b.end_span();
}

// One member of a trace object (a top-level object's, less "data" and
// "resourceSpans"; or an element of "data").
void read_jaeger_trace_member(std::string_view key, ondemand::value& v, JaegerTraceBuilder& b) {
  if (is_literal(key, "spans")) {
    b.saw_trace_key();
    for_each_object_in_array(v, [&](ondemand::object span) { read_jaeger_span(span, b); });
  } else if (is_literal(key, "processes")) {
    b.saw_trace_key();
    for_each_field_of_object(v, [&](std::string_view process_key, ondemand::value& process) {
      for_each_field_of_object(process, [&](std::string_view key_in_process, ondemand::value& member) {
        if (is_literal(key_in_process, "serviceName")) {
          read_string(member, [&](std::string_view text) { b.process_service(process_key, text); });
        }
      });
    });
  } else if (is_literal(key, "traceID")) {
    b.saw_trace_key();
    read_string(v, [&](std::string_view text) { b.trace_id(text); });
  }
}

void read_jaeger_trace(ondemand::object object, JaegerTraceBuilder& b) {
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    read_jaeger_trace_member(key, field.value(), b);
  }
}

// ---- OTLP: a resourceSpans element's members, typed, in document order ----
// As for Jaeger: what OtlpDocumentBuilder's SAX events read, and nothing else.

enum class AttributeOwner : std::uint8_t { kResource, kSpan };

// Whether the builder uses an attribute with this key (OtlpDocumentBuilder's
// resource_attribute / span_attribute act on these only).
inline bool attribute_used(AttributeOwner owner, std::string_view key) {
  return owner == AttributeOwner::kResource ? is_literal(key, "service.name")
                                            : classify_span_tag(key) != SpanTag::kOther;
}

void read_otlp_attribute(ondemand::object object, AttributeOwner owner, OtlpDocumentBuilder& b) {
  std::string_view key;
  bool has_key = false;
  JsonScalar value;
  bool has_value = false;
  // The value of an attribute whose key came first and is not used is not
  // read (most attributes: component, host.name, …), as Jaeger's unused tag
  // values are not. Should a later "key" member name a used attribute, the
  // SAX events would apply the skipped value: that rare object goes to
  // RapidJSON whole.
  bool skipped_value = false;
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view member = key_of(field);
    if (is_literal(member, "key")) {
      read_string(field.value(), [&](std::string_view text) {
        key = text;
        has_key = true;
      });
      if (skipped_value && attribute_used(owner, key)) throw GiveUp{};
    } else if (is_literal(member, "value")) {
      if (has_key && !attribute_used(owner, key)) {
        skipped_value = true;
        continue;
      }
      for_each_field_of_object(field.value(), [&](std::string_view any_key, ondemand::value& any_value) {
        if (is_literal(any_key, "stringValue") || is_literal(any_key, "intValue") || is_literal(any_key, "boolValue") ||
            is_literal(any_key, "doubleValue")) {
          read_scalar(any_value, [&](const JsonScalar& s) {
            value = s;
            has_value = true;
          });
        }
      });
    }
  }
  if (!has_value) return;
  if (owner == AttributeOwner::kResource)
    b.resource_attribute(key, value);
  else
    b.span_attribute(key, value);
}

void read_otlp_span(ondemand::object object, OtlpDocumentBuilder& b) {
  b.begin_span();
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    ondemand::value& v = field.value();
    switch (key.size()) {
      case 4:
        if (is_literal(key, "name"))
          read_string(v, [&](std::string_view text) { b.span_name(text); });
        else if (is_literal(key, "kind"))
          read_scalar(v, [&](const JsonScalar& kind) { b.span_kind(kind); });
        break;
      case 6:
        if (is_literal(key, "spanId")) {
          read_string(v, [&](std::string_view text) { b.span_id(text); });
        } else if (is_literal(key, "status")) {
          for_each_field_of_object(v, [&](std::string_view status_key, ondemand::value& status_value) {
            if (is_literal(status_key, "code")) {
              read_scalar(status_value, [&](const JsonScalar& code) { b.status_code(code); });
            }
          });
        }
        break;
      case 7:
        if (is_literal(key, "traceId")) read_string(v, [&](std::string_view text) { b.span_trace_id(text); });
        break;
      case 10:
        if (is_literal(key, "attributes")) {
          for_each_object_in_array(
              v, [&](ondemand::object attribute) { read_otlp_attribute(attribute, AttributeOwner::kSpan, b); });
        }
        break;
      case 12:
        if (is_literal(key, "parentSpanId")) read_string(v, [&](std::string_view text) { b.parent_span_id(text); });
        break;
      case 15:
        if (is_literal(key, "endTimeUnixNano")) read_scalar(v, [&](const JsonScalar& t) { b.span_time(false, t); });
        break;
      case 17:
        if (is_literal(key, "startTimeUnixNano")) read_scalar(v, [&](const JsonScalar& t) { b.span_time(true, t); });
        break;
      default:
        break;
    }
  }
  b.end_span();
}

void read_otlp_resource_spans(ondemand::object object, OtlpDocumentBuilder& b) {
  b.begin_resource_spans();
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    if (is_literal(key, "resource")) {
      for_each_field_of_object(field.value(), [&](std::string_view resource_key, ondemand::value& member) {
        if (is_literal(resource_key, "attributes")) {
          for_each_object_in_array(member, [&](ondemand::object attribute) {
            read_otlp_attribute(attribute, AttributeOwner::kResource, b);
          });
        }
      });
    } else if (is_literal(key, "scopeSpans") || is_literal(key, "instrumentationLibrarySpans")) {
      for_each_object_in_array(field.value(), [&](ondemand::object scope_spans) {
        for (auto scope_field_result : scope_spans) {
          ondemand::field& scope_field = in_place(scope_field_result);
          if (!is_literal(key_of(scope_field), "spans")) continue;
          for_each_object_in_array(scope_field.value(), [&](ondemand::object span) { read_otlp_span(span, b); });
        }
      });
    }
  }
  b.end_resource_spans();
}

}  // namespace

struct SimdjsonValueReader::Impl {
  Impl(NameTable& names, const ReadOptions& options)
      : options(options), top(names, options, stats), item(names, options, stats), otlp(names, options, stats) {}

  // Routes the members of a top-level object as TraceJsonHandler does: "data"
  // and "resourceSpans" to their readers, every other member to the trace
  // the object may itself be.
  FastReadStatus read_top(ondemand::object object) {
    top.begin();
    for (auto field_result : object) {
      ondemand::field& field = in_place(field_result);
      const std::string_view key = key_of(field);
      if (key == "data") {
        ondemand::value v = field.value();
        if (value_or_give_up(v.type()) != ondemand::json_type::array) continue;  // null, or an object: ignored
        for (auto element : value_or_give_up(v.get_array())) {
          ondemand::value& trace_value = in_place(element);
          if (value_or_give_up(trace_value.type()) != ondemand::json_type::object) continue;
          item.begin();
          read_jaeger_trace(value_or_give_up(trace_value.get_object()), item);
          if (!emit(item.finish())) return FastReadStatus::kStopped;
        }
        continue;
      }
      if (key == "resourceSpans") {
        ondemand::value v = field.value();
        if (value_or_give_up(v.type()) != ondemand::json_type::array) continue;
        otlp.begin();
        for (auto element : value_or_give_up(v.get_array())) {
          ondemand::value& e = in_place(element);
          if (type_of(e) == ondemand::json_type::object)
            read_otlp_resource_spans(value_or_give_up(e.get_object()), otlp);
        }
        if (!otlp.finish(count_and_forward)) return FastReadStatus::kStopped;
        continue;
      }
      read_jaeger_trace_member(key, field.value(), top);
    }
    if (top.has_content() && !emit(top.finish())) return FastReadStatus::kStopped;
    return FastReadStatus::kOk;
  }

  bool emit(Trace& trace) {
    ++stats.jaeger_traces;
    ++stats.traces;
    stats.spans += trace.spans.size();
    return count_and_forward(trace);
  }

  const ReadOptions& options;
  ondemand::parser parser;
  ReadStats stats;  // of the value being read; merged when it succeeds
  JaegerTraceBuilder top;
  JaegerTraceBuilder item;
  OtlpDocumentBuilder otlp;
  const TraceCallback* on_trace = nullptr;
  std::uint64_t emitted = 0;
  const TraceCallback count_and_forward = [this](Trace& t) {
    ++emitted;
    return (*on_trace)(t);
  };
};

SimdjsonValueReader::SimdjsonValueReader(NameTable& names, const ReadOptions& options)
    : impl_(std::make_unique<Impl>(names, options)) {}

SimdjsonValueReader::~SimdjsonValueReader() = default;

std::size_t SimdjsonValueReader::padding_bytes() { return simdjson::SIMDJSON_PADDING; }

namespace {

// Runs `body` on the object data[0, size) with the counters of this call in
// r.stats (merged into `stats` unless it gave up) and traces counted in
// *emitted.
template <typename Impl, typename Body>
FastReadStatus run_on_object(Impl& r, const char* data, std::size_t size, ReadStats& stats,
                             const TraceCallback* on_trace, std::uint64_t* emitted, Body body) {
  r.stats = ReadStats{};
  r.on_trace = on_trace;
  r.emitted = 0;
  FastReadStatus status = FastReadStatus::kGaveUp;
  try {
    // The parser's capacity grows to the largest value seen, and stays.
    ondemand::document doc = value_or_give_up(r.parser.iterate(data, size, size + simdjson::SIMDJSON_PADDING));
    // The value ends at its closing bracket (ValueScanner), so nothing can
    // follow the object inside `data`.
    status = body(value_or_give_up(doc.get_object()));
  } catch (const GiveUp&) {
    status = FastReadStatus::kGaveUp;
  }
  if (emitted != nullptr) *emitted = r.emitted;
  if (status != FastReadStatus::kGaveUp) stats.add(r.stats);
  return status;
}

}  // namespace

FastReadStatus SimdjsonValueReader::read(const char* data, std::size_t size, ReadStats& stats,
                                         const TraceCallback& on_trace, std::uint64_t* emitted) {
  Impl& r = *impl_;
  return run_on_object(r, data, size, stats, &on_trace, emitted,
                       [&](ondemand::object object) { return r.read_top(object); });
}

FastReadStatus SimdjsonValueReader::read_data_element(const char* data, std::size_t size, ReadStats& stats,
                                                      const TraceCallback& on_trace, std::uint64_t* emitted) {
  Impl& r = *impl_;
  return run_on_object(r, data, size, stats, &on_trace, emitted, [&](ondemand::object object) {
    r.item.begin();
    read_jaeger_trace(object, r.item);
    return r.emit(r.item.finish()) ? FastReadStatus::kOk : FastReadStatus::kStopped;
  });
}

void SimdjsonValueReader::begin_resource_spans() { impl_->otlp.begin(); }

FastReadStatus SimdjsonValueReader::read_resource_spans_element(const char* data, std::size_t size, ReadStats& stats) {
  Impl& r = *impl_;
  return run_on_object(r, data, size, stats, nullptr, nullptr, [&](ondemand::object object) {
    read_otlp_resource_spans(object, r.otlp);
    return FastReadStatus::kOk;
  });
}

FastReadStatus SimdjsonValueReader::finish_resource_spans(ReadStats& stats, const TraceCallback& on_trace,
                                                          std::uint64_t* emitted) {
  Impl& r = *impl_;
  r.stats = ReadStats{};
  r.on_trace = &on_trace;
  r.emitted = 0;
  const bool go_on = r.otlp.finish(r.count_and_forward);  // no parsing left: cannot give up
  *emitted = r.emitted;
  stats.add(r.stats);
  return go_on ? FastReadStatus::kOk : FastReadStatus::kStopped;
}

}  // namespace tailscope::trace::internal
