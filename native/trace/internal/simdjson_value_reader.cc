#include "trace/internal/simdjson_value_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <string_view>

#include "trace/internal/jaeger_trace_builder.h"
#include "trace/internal/json_scalar.h"
#include "trace/internal/otlp_document_builder.h"
#include "trace/internal/simdjson_in_place.h"
#include "trace/internal/value_scanner.h"

namespace tailscope::trace::internal {

namespace {

namespace ondemand = simdjson::ondemand;

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

// A value the walks do not use. Its containers are visited (not skipped by
// simdjson unseen) to check their nesting: the bracket scanner that cut each
// value out and rejected nesting deeper than ReadOptions::max_nesting_depth is
// gone from the path that reads many values at once (read_many), so the walk
// checks the nesting itself, conservatively: a container may hold
// `levels` levels (itself included) below the deepest point a walk reaches,
// and anything deeper gives up (the per-value path then decides exactly, and
// RapidJSON reports the error and its offset). A visited container is also
// checked as JSON (commas, colons): an error inside an unused member gives up
// too, where simdjson's skip counted only brackets.
inline ondemand::json_type type_of(ondemand::value& v) { return value_or_give_up(v.type()); }

void skip_container(ondemand::value& v, ondemand::json_type type, int levels);

// Most unused values are scalars (flags, a tag's type, an unused tag's
// value): those cost a look at their first byte, inline; simdjson steps over
// them when the walk moves on.
inline void skip_unused(ondemand::value& v, int levels) {
  const ondemand::json_type type = type_of(v);
  if (type == ondemand::json_type::object || type == ondemand::json_type::array) [[unlikely]]
    skip_container(v, type, levels);
}

void skip_container(ondemand::value& v, ondemand::json_type type, int levels) {
  if (levels <= 0) throw GiveUp{};
  if (type == ondemand::json_type::object) {
    for (auto field_result : value_or_give_up(v.get_object())) {
      ondemand::field& field = in_place(field_result);
      skip_unused(field.value(), levels - 1);
    }
  } else {
    for (auto element : value_or_give_up(v.get_array())) skip_unused(in_place(element), levels - 1);
  }
}

// A value the builders would read but whose type they ignore (a number where
// a string belongs, a container where a scalar does) is still converted when
// it is a scalar, so that what simdjson reads differently from RapidJSON
// (numbers beyond 64 bits) gives up there too; a container is skipped as an
// unused value.
inline void check_scalar(ondemand::value& v, ondemand::json_type type, int levels) {
  if (type == ondemand::json_type::object || type == ondemand::json_type::array) {
    skip_container(v, type, levels);
  } else {
    (void)scalar_of(v, type);
  }
}

// Calls on_string(text) for a string value, checks any other value.
template <typename OnString>
inline void read_string(ondemand::value& v, int levels, OnString on_string) {
  const ondemand::json_type type = type_of(v);
  if (type == ondemand::json_type::string) {
    on_string(string_of(v));
  } else {
    check_scalar(v, type, levels);
  }
}

// Calls on_scalar(scalar) for a scalar value; containers are skipped.
template <typename OnScalar>
inline void read_scalar(ondemand::value& v, int levels, OnScalar on_scalar) {
  const ondemand::json_type type = type_of(v);
  if (type == ondemand::json_type::object || type == ondemand::json_type::array) {
    skip_container(v, type, levels);
    return;
  }
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
// elements are skipped, a value instead of the array is checked.
template <typename OnObject>
inline void for_each_object_in_array(ondemand::value& v, int levels, OnObject on_object) {
  const ondemand::json_type type = type_of(v);
  if (type != ondemand::json_type::array) {
    check_scalar(v, type, levels);
    return;
  }
  for (auto element : value_or_give_up(v.get_array())) {
    ondemand::value& e = in_place(element);
    if (type_of(e) == ondemand::json_type::object) {
      on_object(value_or_give_up(e.get_object()));
    } else {
      skip_unused(e, levels);
    }
  }
}

// Calls on_field(key, value) for each member of an object value; a member it
// does not use (on_field returns false) is skipped, a value instead of the
// object is checked.
template <typename OnField>
inline void for_each_field_of_object(ondemand::value& v, int levels, OnField on_field) {
  const ondemand::json_type type = type_of(v);
  if (type != ondemand::json_type::object) {
    check_scalar(v, type, levels);
    return;
  }
  for (auto field_result : value_or_give_up(v.get_object())) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    if (!on_field(key, field.value())) skip_unused(field.value(), levels);
  }
}

// ---- Jaeger: a trace object's members, typed, in document order ----
// Each function reads what JaegerTraceBuilder's SAX events read of that
// member, and skips (checking only its nesting, skip_unused) what they skip.
// `levels`: what skip_unused allows below the walks (Impl::skip_levels).

void read_jaeger_reference(ondemand::object object, int levels, JaegerTraceBuilder& b) {
  b.begin_reference();
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    if (is_literal(key, "refType")) {
      read_string(field.value(), levels, [&](std::string_view text) { b.reference_type(text); });
    } else if (is_literal(key, "spanID")) {
      read_string(field.value(), levels, [&](std::string_view text) { b.reference_span_id(text); });
    } else {
      skip_unused(field.value(), levels);
    }
  }
  b.end_reference();
}

void read_jaeger_tag(ondemand::object object, int levels, JaegerTraceBuilder& b) {
  b.begin_tag();
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    if (is_literal(key, "key")) {
      read_string(field.value(), levels, [&](std::string_view text) { b.tag_key(text); });
    } else if (is_literal(key, "value") && b.tag_wants_value()) {
      read_scalar(field.value(), levels, [&](const JsonScalar& value) { b.tag_value(value); });
    } else {
      skip_unused(field.value(), levels);
    }
  }
}

void read_jaeger_span(ondemand::object object, int levels, JaegerTraceBuilder& b) {
  b.begin_span();
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    ondemand::value& v = field.value();
    // By length, then the text: the members of every span, most of them
    // used. A member read `continue`s; the rest is skipped after the switch.
    switch (key.size()) {
      case 4:
        if (is_literal(key, "tags")) {
          for_each_object_in_array(v, levels, [&](ondemand::object tag) { read_jaeger_tag(tag, levels, b); });
          continue;
        }
        break;
      case 6:
        if (is_literal(key, "spanID")) {
          read_string(v, levels, [&](std::string_view text) { b.span_id(text); });
          continue;
        }
        break;
      case 7:
        if (is_literal(key, "traceID")) {
          read_string(v, levels, [&](std::string_view text) { b.span_trace_id(text); });
          continue;
        }
        if (is_literal(key, "process")) {
          for_each_field_of_object(v, levels, [&](std::string_view process_key, ondemand::value& process_value) {
            if (!is_literal(process_key, "serviceName")) return false;
            read_string(process_value, levels, [&](std::string_view text) { b.span_service_name(text); });
            return true;
          });
          continue;
        }
        break;
      case 8:
        if (is_literal(key, "duration")) {
          read_scalar(v, levels, [&](const JsonScalar& t) { b.span_time(false, t); });
          continue;
        }
        break;
      case 9:
        if (is_literal(key, "startTime")) {
          read_scalar(v, levels, [&](const JsonScalar& t) { b.span_time(true, t); });
          continue;
        }
        if (is_literal(key, "processID")) {
          read_string(v, levels, [&](std::string_view text) { b.process_id(text); });
          continue;
        }
        break;
      case 10:
        if (is_literal(key, "references")) {
          for_each_object_in_array(v, levels, [&](ondemand::object ref) { read_jaeger_reference(ref, levels, b); });
          continue;
        }
        break;
      case 12:
        if (is_literal(key, "parentSpanID")) {
          read_string(v, levels, [&](std::string_view text) { b.parent_span_id(text); });
          continue;
        }
        break;
      case 13:
        if (is_literal(key, "operationName")) {
          read_string(v, levels, [&](std::string_view text) { b.operation_name(text); });
          continue;
        }
        break;
      default:
        break;
    }
    skip_unused(v, levels);  // flags, logs, warnings, …
  }
  b.end_span();
}

// One member of a trace object (a top-level object's, less "data" and
// "resourceSpans"; or an element of "data").
void read_jaeger_trace_member(std::string_view key, ondemand::value& v, int levels, JaegerTraceBuilder& b) {
  if (is_literal(key, "spans")) {
    b.saw_trace_key();
    for_each_object_in_array(v, levels, [&](ondemand::object span) { read_jaeger_span(span, levels, b); });
  } else if (is_literal(key, "processes")) {
    b.saw_trace_key();
    for_each_field_of_object(v, levels, [&](std::string_view process_key, ondemand::value& process) {
      for_each_field_of_object(process, levels, [&](std::string_view key_in_process, ondemand::value& member) {
        if (!is_literal(key_in_process, "serviceName")) return false;
        read_string(member, levels, [&](std::string_view text) { b.process_service(process_key, text); });
        return true;
      });
      return true;
    });
  } else if (is_literal(key, "traceID")) {
    b.saw_trace_key();
    read_string(v, levels, [&](std::string_view text) { b.trace_id(text); });
  } else {
    skip_unused(v, levels);
  }
}

void read_jaeger_trace(ondemand::object object, int levels, JaegerTraceBuilder& b) {
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    read_jaeger_trace_member(key, field.value(), levels, b);
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

void read_otlp_attribute(ondemand::object object, AttributeOwner owner, int levels, OtlpDocumentBuilder& b) {
  std::string_view key;
  bool has_key = false;
  JsonScalar value;
  bool has_value = false;
  // The value of an attribute whose key came first and is not used is not
  // read (most attributes: component, host.name, …), only its nesting
  // checked, as Jaeger's unused tag values are. Should a later "key" member
  // name a used attribute, the SAX events would apply the skipped value:
  // that rare object goes to RapidJSON whole.
  bool skipped_value = false;
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view member = key_of(field);
    if (is_literal(member, "key")) {
      read_string(field.value(), levels, [&](std::string_view text) {
        key = text;
        has_key = true;
      });
      if (skipped_value && attribute_used(owner, key)) throw GiveUp{};
    } else if (is_literal(member, "value")) {
      if (has_key && !attribute_used(owner, key)) {
        skipped_value = true;
        skip_unused(field.value(), levels);
        continue;
      }
      for_each_field_of_object(field.value(), levels, [&](std::string_view any_key, ondemand::value& any_value) {
        if (!is_literal(any_key, "stringValue") && !is_literal(any_key, "intValue") &&
            !is_literal(any_key, "boolValue") && !is_literal(any_key, "doubleValue")) {
          return false;
        }
        read_scalar(any_value, levels, [&](const JsonScalar& s) {
          value = s;
          has_value = true;
        });
        return true;
      });
    } else {
      skip_unused(field.value(), levels);
    }
  }
  if (!has_value) return;
  if (owner == AttributeOwner::kResource)
    b.resource_attribute(key, value);
  else
    b.span_attribute(key, value);
}

void read_otlp_span(ondemand::object object, int levels, OtlpDocumentBuilder& b) {
  b.begin_span();
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    ondemand::value& v = field.value();
    // As read_jaeger_span: a member read `continue`s, the rest is skipped.
    switch (key.size()) {
      case 4:
        if (is_literal(key, "name")) {
          read_string(v, levels, [&](std::string_view text) { b.span_name(text); });
          continue;
        }
        if (is_literal(key, "kind")) {
          read_scalar(v, levels, [&](const JsonScalar& kind) { b.span_kind(kind); });
          continue;
        }
        break;
      case 6:
        if (is_literal(key, "spanId")) {
          read_string(v, levels, [&](std::string_view text) { b.span_id(text); });
          continue;
        }
        if (is_literal(key, "status")) {
          for_each_field_of_object(v, levels, [&](std::string_view status_key, ondemand::value& status_value) {
            if (!is_literal(status_key, "code")) return false;
            read_scalar(status_value, levels, [&](const JsonScalar& code) { b.status_code(code); });
            return true;
          });
          continue;
        }
        break;
      case 7:
        if (is_literal(key, "traceId")) {
          read_string(v, levels, [&](std::string_view text) { b.span_trace_id(text); });
          continue;
        }
        break;
      case 10:
        if (is_literal(key, "attributes")) {
          for_each_object_in_array(v, levels, [&](ondemand::object attribute) {
            read_otlp_attribute(attribute, AttributeOwner::kSpan, levels, b);
          });
          continue;
        }
        break;
      case 12:
        if (is_literal(key, "parentSpanId")) {
          read_string(v, levels, [&](std::string_view text) { b.parent_span_id(text); });
          continue;
        }
        break;
      case 15:
        if (is_literal(key, "endTimeUnixNano")) {
          read_scalar(v, levels, [&](const JsonScalar& t) { b.span_time(false, t); });
          continue;
        }
        break;
      case 17:
        if (is_literal(key, "startTimeUnixNano")) {
          read_scalar(v, levels, [&](const JsonScalar& t) { b.span_time(true, t); });
          continue;
        }
        break;
      default:
        break;
    }
    skip_unused(v, levels);  // events, links, flags, …
  }
  b.end_span();
}

void read_otlp_resource_spans(ondemand::object object, int levels, OtlpDocumentBuilder& b) {
  b.begin_resource_spans();
  for (auto field_result : object) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = key_of(field);
    if (is_literal(key, "resource")) {
      for_each_field_of_object(field.value(), levels, [&](std::string_view resource_key, ondemand::value& member) {
        if (!is_literal(resource_key, "attributes")) return false;
        for_each_object_in_array(member, levels, [&](ondemand::object attribute) {
          read_otlp_attribute(attribute, AttributeOwner::kResource, levels, b);
        });
        return true;
      });
    } else if (is_literal(key, "scopeSpans") || is_literal(key, "instrumentationLibrarySpans")) {
      for_each_object_in_array(field.value(), levels, [&](ondemand::object scope_spans) {
        for (auto scope_field_result : scope_spans) {
          ondemand::field& scope_field = in_place(scope_field_result);
          if (is_literal(key_of(scope_field), "spans")) {
            for_each_object_in_array(scope_field.value(), levels,
                                     [&](ondemand::object span) { read_otlp_span(span, levels, b); });
          } else {
            skip_unused(scope_field.value(), levels);  // scope, schemaUrl
          }
        }
      });
    } else {
      skip_unused(field.value(), levels);
    }
  }
  b.end_resource_spans();
}

}  // namespace

// The deepest container the typed walks descend into, counting the
// top-level object as 1: an OTLP span attribute's value object (document,
// resourceSpans, element, scopeSpans, element, spans, span, attributes,
// attribute, value). What they skip sits at most one level below it.
constexpr int kWalkedDepth = 10;

struct SimdjsonValueReader::Impl {
  Impl(NameTable& names, const ReadOptions& options)
      : options(options),
        skip_levels(options.max_nesting_depth - kWalkedDepth - 1),
        top(names, options, stats),
        item(names, options, stats),
        otlp(names, options, stats) {
#ifdef SIMDJSON_THREADS_ENABLED
    // iterate_many would run stage 1 of the next batch on a thread of its
    // own: one job is one core (tailscope-critpath --jobs N parallelises).
    parser.threaded = false;
#endif
  }

  // Routes the members of a top-level object as TraceJsonHandler does: "data"
  // and "resourceSpans" to their readers, every other member to the trace
  // the object may itself be.
  FastReadStatus read_top(ondemand::object object) {
    const int levels = skip_levels;
    top.begin();
    for (auto field_result : object) {
      ondemand::field& field = in_place(field_result);
      const std::string_view key = key_of(field);
      if (key == "data") {
        ondemand::value& v = field.value();
        if (type_of(v) != ondemand::json_type::array) {  // null, or an object: ignored
          skip_unused(v, levels);
          continue;
        }
        for (auto element : value_or_give_up(v.get_array())) {
          ondemand::value& trace_value = in_place(element);
          if (type_of(trace_value) != ondemand::json_type::object) {
            skip_unused(trace_value, levels);
            continue;
          }
          item.begin();
          read_jaeger_trace(value_or_give_up(trace_value.get_object()), levels, item);
          if (!emit(item.finish())) return FastReadStatus::kStopped;
        }
        continue;
      }
      if (key == "resourceSpans") {
        ondemand::value& v = field.value();
        if (type_of(v) != ondemand::json_type::array) {
          skip_unused(v, levels);
          continue;
        }
        otlp.begin();
        for (auto element : value_or_give_up(v.get_array())) {
          ondemand::value& e = in_place(element);
          if (type_of(e) == ondemand::json_type::object) {
            read_otlp_resource_spans(value_or_give_up(e.get_object()), levels, otlp);
          } else {
            skip_unused(e, levels);
          }
        }
        if (!otlp.finish(count_and_forward)) return FastReadStatus::kStopped;
        continue;
      }
      read_jaeger_trace_member(key, field.value(), levels, top);
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
  const int skip_levels;  // skip_unused's allowance below the walks
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
    read_jaeger_trace(object, r.skip_levels, r.item);
    return r.emit(r.item.finish()) ? FastReadStatus::kOk : FastReadStatus::kStopped;
  });
}

bool SimdjsonValueReader::reads_many(const ReadOptions& options) {
  return options.max_nesting_depth - kWalkedDepth - 1 >= 1;
}

ManyRead SimdjsonValueReader::read_many(const char* data, std::size_t size, ReadStats& stats,
                                        const TraceCallback& on_trace) {
  Impl& r = *impl_;
  ManyRead out;
  // One batch, the whole window: stage 1 indexes it once, and a value cut
  // off at its end is left out (streaming_final) for the caller, instead of
  // being carried into a next batch. The batch size is the parser's capacity
  // when that holds the window: iterate_many reallocates the parser's
  // buffers whenever the batch size differs from it.
  const std::size_t batch_bytes = std::max(size, r.parser.capacity());
  ondemand::document_stream docs;
  if (r.parser.iterate_many(data, size, batch_bytes).get(docs) != simdjson::SUCCESS) {
    out.window_rejected = true;
    return out;
  }
  // The end of a value read whole, found again by the bracket scanner (once
  // a window, over its last value).
  auto end_of_value = [&](std::size_t start) {
    ValueScanner scanner(std::numeric_limits<int>::max());
    return scanner.scan(data + start, 0, size - start) == ValueScanner::Status::kComplete ? start + scanner.end()
                                                                                          : size;
  };
  std::size_t last_start = 0;  // of the last value read whole
  for (auto it = docs.begin(); it != docs.end(); ++it) {
    if (it.error() != simdjson::SUCCESS) {
      // Stage 1 rejected the window (an unclosed string, invalid UTF-8, a
      // control character…) before its first value, or the stream broke
      // after the last value read: the caller reads the rest value by value.
      out.window_rejected = true;
      out.consumed = out.values == 0 ? 0 : end_of_value(last_start);
      return out;
    }
    const std::size_t start = it.current_index();  // the value's first byte
    r.stats = ReadStats{};
    r.on_trace = &on_trace;
    r.emitted = 0;
    FastReadStatus status = FastReadStatus::kGaveUp;
    try {
      ondemand::document_reference doc = value_or_give_up(*it);
      status = r.read_top(value_or_give_up(doc.get_object()));
    } catch (const GiveUp&) {
      status = FastReadStatus::kGaveUp;
    }
    if (status == FastReadStatus::kGaveUp) {
      out.consumed = start;
      out.gave_up = true;
      out.emitted = r.emitted;
      return out;
    }
    stats.add(r.stats);
    ++out.values;
    last_start = start;
    if (status == FastReadStatus::kStopped) {
      out.consumed = end_of_value(start);
      out.stopped = true;
      return out;
    }
  }
  // Up to the end of the last value read; what follows (whitespace, and a
  // value the window cut off, which stage 1 left out) is the caller's.
  // Found by the scanner rather than from truncated_bytes(): a byte miscounted
  // there would drop or repeat a trace.
  out.consumed = out.values == 0 ? 0 : end_of_value(last_start);
  return out;
}

void SimdjsonValueReader::begin_resource_spans() { impl_->otlp.begin(); }

FastReadStatus SimdjsonValueReader::read_resource_spans_element(const char* data, std::size_t size, ReadStats& stats) {
  Impl& r = *impl_;
  return run_on_object(r, data, size, stats, nullptr, nullptr, [&](ondemand::object object) {
    read_otlp_resource_spans(object, r.skip_levels, r.otlp);
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
