#include "trace/internal/simdjson_value_reader.h"

#include <simdjson.h>

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

// The text of a string whose raw bytes (from just after its opening quote)
// hold no escape: a view into the input, no copy. Stage 1 has checked the
// whole value (strings closed, valid UTF-8, no raw control characters), so
// the closing quote is there. Empty when an escape needs decoding.
inline bool unescaped_in_place(const char* raw, std::string_view* out) {
  const char* end = raw;
  while (*end != '"' && *end != '\\') ++end;
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

// Feeds a builder the events of a value, descending only where the builder
// keeps what it finds (a skipped container is opened and closed at once, so
// the builder's frames stay balanced).
// Values go by reference: passed by value (24 bytes on the stack) through
// this recursive, not inlined call, each copy was a store-forwarding stall
// (perf: a third of the reader's time on two moves).
template <typename Builder>
void walk_value(ondemand::value& v, Builder& b);

template <typename Builder>
void walk_object(ondemand::object object, Builder& b) {
  for (auto field_result : object) {
    ondemand::field field = value_or_give_up(field_result);
    b.key(key_of(field));
    if (!b.wants_value()) continue;  // On-Demand skips the value
    ondemand::value v = field.value();
    walk_value(v, b);
  }
}

template <typename Builder>
void walk_value(ondemand::value& v, Builder& b) {
  const ondemand::json_type type = value_or_give_up(v.type());
  if (type == ondemand::json_type::object) {
    b.start_object();
    if (!b.skipping()) walk_object(value_or_give_up(v.get_object()), b);
    b.end_container();
  } else if (type == ondemand::json_type::array) {
    b.start_array();
    if (!b.skipping()) {
      for (auto element : value_or_give_up(v.get_array())) {
        ondemand::value e = value_or_give_up(element);
        walk_value(e, b);
      }
    }
    b.end_container();
  } else if (b.wants_value()) {
    b.scalar(scalar_of(v, type));
  }
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
      ondemand::field field = value_or_give_up(field_result);
      const std::string_view key = key_of(field);
      if (key == "data") {
        ondemand::value v = field.value();
        if (value_or_give_up(v.type()) != ondemand::json_type::array) continue;  // null, or an object: ignored
        for (auto element : value_or_give_up(v.get_array())) {
          ondemand::value trace_value = value_or_give_up(element);
          if (value_or_give_up(trace_value.type()) != ondemand::json_type::object) continue;
          item.begin();
          walk_object(value_or_give_up(trace_value.get_object()), item);
          if (!emit(item.finish())) return FastReadStatus::kStopped;
        }
        continue;
      }
      if (key == "resourceSpans") {
        ondemand::value v = field.value();
        if (value_or_give_up(v.type()) != ondemand::json_type::array) continue;
        otlp.begin();
        for (auto element : value_or_give_up(v.get_array())) {
          ondemand::value e = value_or_give_up(element);
          walk_value(e, otlp);
        }
        if (!otlp.finish(count_and_forward)) return FastReadStatus::kStopped;
        continue;
      }
      top.key(key);
      if (top.wants_value()) {
        ondemand::value v = field.value();
        walk_value(v, top);
      }
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
    walk_object(object, r.item);
    return r.emit(r.item.finish()) ? FastReadStatus::kOk : FastReadStatus::kStopped;
  });
}

void SimdjsonValueReader::begin_resource_spans() { impl_->otlp.begin(); }

FastReadStatus SimdjsonValueReader::read_resource_spans_element(const char* data, std::size_t size, ReadStats& stats) {
  Impl& r = *impl_;
  return run_on_object(r, data, size, stats, nullptr, nullptr, [&](ondemand::object object) {
    // As walk_value() on an object element of the array.
    r.otlp.start_object();
    if (!r.otlp.skipping()) walk_object(object, r.otlp);
    r.otlp.end_container();
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
