#include "trace/internal/rapidjson_value_reader.h"

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include <utility>
#include <vector>

#include "trace/internal/jaeger_trace_builder.h"
#include "trace/internal/json_scalar.h"
#include "trace/internal/otlp_document_builder.h"

namespace tailscope::trace::internal {
namespace {

// Routes the SAX events of one top-level JSON value. A top-level object is
// either a Jaeger trace, a {"data": [trace…]} envelope or an OTLP
// {"resourceSpans": […]} document — we only know which from its keys, so a
// top-level object is read as a trace candidate while "data" and
// "resourceSpans" are routed to their own readers.
class TraceJsonHandler {
 public:
  TraceJsonHandler(NameTable& names, const ReadOptions& options, ReadStats& stats, const TraceCallback& on_trace)
      : options_(options),
        stats_(stats),
        on_trace_(on_trace),
        top_trace_(names, options, stats),
        item_trace_(names, options, stats),
        otlp_(names, options, stats) {}

  bool stopped() const { return stopped_; }
  const std::string& semantic_error() const { return semantic_error_; }

  // RapidJSON SAX handler concept.
  bool Null() { return on_scalar(JsonScalar{}); }
  bool Bool(bool b) {
    JsonScalar s;
    s.type = JsonScalar::Type::kBool;
    s.boolean = b;
    return on_scalar(s);
  }
  bool Int(int i) { return Int64(i); }
  bool Uint(unsigned u) { return Int64(u); }
  bool Int64(std::int64_t i) {
    JsonScalar s;
    s.type = JsonScalar::Type::kInt;
    s.integer = i;
    return on_scalar(s);
  }
  bool Uint64(std::uint64_t u) {
    JsonScalar s;
    s.type = JsonScalar::Type::kUint;
    s.unsigned_integer = u;
    return on_scalar(s);
  }
  bool Double(double d) {
    JsonScalar s;
    s.type = JsonScalar::Type::kDouble;
    s.number = d;
    return on_scalar(s);
  }
  bool RawNumber(const char* str, rapidjson::SizeType length, bool copy) { return String(str, length, copy); }
  bool String(const char* str, rapidjson::SizeType length, bool) {
    JsonScalar s;
    s.type = JsonScalar::Type::kString;
    s.text = std::string_view(str, length);
    return on_scalar(s);
  }
  bool Key(const char* str, rapidjson::SizeType length, bool) {
    const std::string_view key(str, length);
    if (inside_trace_ != nullptr && depth_ > trace_base_depth_) {  // the hot path: inside a span
      inside_trace_->key(key);
      return true;
    }
    Route& r = routes_.back();
    switch (r.kind) {
      case RouteKind::kTrace:
        if (depth_ == r.base_depth && r.may_be_envelope) {
          if (key == "data") {
            pending_ = Pending::kData;
            return true;
          }
          if (key == "resourceSpans") {
            pending_ = Pending::kOtlp;
            return true;
          }
        }
        pending_ = Pending::kNone;
        r.trace->key(key);
        return true;
      case RouteKind::kOtlp:
        otlp_.key(key);
        return true;
      default:
        return true;
    }
  }
  bool StartObject() { return on_start(true); }
  bool StartArray() { return on_start(false); }
  bool EndObject(rapidjson::SizeType) { return on_end(); }
  bool EndArray(rapidjson::SizeType) { return on_end(); }

 private:
  enum class RouteKind : std::uint8_t { kTop, kTopArray, kTrace, kData, kOtlp, kSkip };
  enum class Pending : std::uint8_t { kNone, kData, kOtlp };
  struct Route {
    RouteKind kind;
    int base_depth;  // depth inside the container that opened this route
    JaegerTraceBuilder* trace = nullptr;
    bool may_be_envelope = false;
  };

  bool on_scalar(const JsonScalar& value) {
    if (inside_trace_ != nullptr && depth_ > trace_base_depth_) {
      inside_trace_->scalar(value);
      return true;
    }
    Route& r = routes_.back();
    switch (r.kind) {
      case RouteKind::kTrace:
        if (pending_ != Pending::kNone && depth_ == r.base_depth) {
          pending_ = Pending::kNone;  // "data": null and the like
          return true;
        }
        r.trace->scalar(value);
        return true;
      case RouteKind::kOtlp:
        otlp_.scalar(value);
        return true;
      case RouteKind::kTop:
      case RouteKind::kTopArray:
        return fail("expected a JSON object (a Jaeger trace or envelope, or an OTLP document)");
      default:
        return true;  // kData: non-object items are ignored; kSkip
    }
  }

  bool on_start(bool is_object) {
    if (depth_ >= options_.max_nesting_depth) {
      return fail("JSON nested deeper than " + std::to_string(options_.max_nesting_depth) + " levels");
    }
    ++depth_;
    if (inside_trace_ != nullptr && depth_ > trace_base_depth_ + 1) {
      if (is_object)
        inside_trace_->start_object();
      else
        inside_trace_->start_array();
      return true;
    }
    Route& r = routes_.back();
    switch (r.kind) {
      case RouteKind::kTop:
        if (is_object) {
          begin_trace(&top_trace_, true);
        } else {
          routes_.push_back(Route{RouteKind::kTopArray, depth_});
          update_fast_path();
        }
        return true;
      case RouteKind::kTopArray:
        if (!is_object) return fail("expected a JSON object inside the top-level array");
        begin_trace(&top_trace_, true);
        return true;
      case RouteKind::kTrace:
        if (depth_ == r.base_depth + 1 && pending_ != Pending::kNone) {
          const Pending pending = pending_;
          pending_ = Pending::kNone;
          if (!is_object && pending == Pending::kData) {
            routes_.push_back(Route{RouteKind::kData, depth_});
          } else if (!is_object && pending == Pending::kOtlp) {
            otlp_.begin();
            routes_.push_back(Route{RouteKind::kOtlp, depth_});
          } else {
            routes_.push_back(Route{RouteKind::kSkip, depth_});
          }
          update_fast_path();
          return true;
        }
        if (is_object)
          r.trace->start_object();
        else
          r.trace->start_array();
        return true;
      case RouteKind::kData:
        if (is_object) {
          begin_trace(&item_trace_, false);
        } else {
          routes_.push_back(Route{RouteKind::kSkip, depth_});
          update_fast_path();
        }
        return true;
      case RouteKind::kOtlp:
        if (is_object)
          otlp_.start_object();
        else
          otlp_.start_array();
        return true;
      case RouteKind::kSkip:
        return true;
    }
    return true;
  }

  bool on_end() {
    if (inside_trace_ != nullptr && depth_ > trace_base_depth_) {
      --depth_;
      inside_trace_->end_container();
      return true;
    }
    Route& r = routes_.back();
    const bool closes_route = r.kind != RouteKind::kTop && depth_ == r.base_depth;
    --depth_;
    if (!closes_route) {
      if (r.kind == RouteKind::kTrace)
        r.trace->end_container();
      else if (r.kind == RouteKind::kOtlp)
        otlp_.end_container();
      return true;
    }
    const Route done = r;
    routes_.pop_back();
    update_fast_path();
    switch (done.kind) {
      case RouteKind::kTrace:
        if (!done.may_be_envelope || done.trace->has_content()) return emit(done.trace->finish());
        return true;
      case RouteKind::kOtlp:
        if (!otlp_.finish(on_trace_)) {
          stopped_ = true;
          return false;
        }
        return true;
      default:
        return true;
    }
  }

  void begin_trace(JaegerTraceBuilder* builder, bool may_be_envelope) {
    builder->begin();
    pending_ = Pending::kNone;
    routes_.push_back(Route{RouteKind::kTrace, depth_, builder, may_be_envelope});
    update_fast_path();
  }

  // Events deeper than a trace object's own keys go straight to its builder.
  void update_fast_path() {
    const Route& r = routes_.back();
    inside_trace_ = r.kind == RouteKind::kTrace ? r.trace : nullptr;
    trace_base_depth_ = r.base_depth;
  }

  bool emit(Trace& trace) {
    ++stats_.traces;
    ++stats_.jaeger_traces;
    stats_.spans += trace.spans.size();
    if (!on_trace_(trace)) {
      stopped_ = true;
      return false;
    }
    return true;
  }

  bool fail(std::string message) {
    semantic_error_ = std::move(message);
    return false;
  }

  const ReadOptions& options_;
  ReadStats& stats_;
  const TraceCallback& on_trace_;
  JaegerTraceBuilder top_trace_;   // a top-level object (maybe an envelope)
  JaegerTraceBuilder item_trace_;  // an element of "data"
  OtlpDocumentBuilder otlp_;
  std::vector<Route> routes_{Route{RouteKind::kTop, 0}};
  Pending pending_ = Pending::kNone;
  int depth_ = 0;
  JaegerTraceBuilder* inside_trace_ = nullptr;  // set while the innermost route is a trace
  int trace_base_depth_ = 0;
  bool stopped_ = false;
  std::string semantic_error_;
};

}  // namespace

struct RapidjsonValueReader::Impl {
  Impl(NameTable& names, const ReadOptions& options, ReadStats& stats, const TraceCallback& on_trace)
      : handler(names, options, stats, on_trace) {}
  TraceJsonHandler handler;
  rapidjson::Reader reader;  // kept: its stack keeps its capacity from value to value
};

RapidjsonValueReader::RapidjsonValueReader(NameTable& names, const ReadOptions& options, ReadStats& stats,
                                           const TraceCallback& on_trace)
    : impl_(std::make_unique<Impl>(names, options, stats, on_trace)) {}

RapidjsonValueReader::~RapidjsonValueReader() = default;

SlowReadStatus RapidjsonValueReader::read(InputBuffer& in, std::string* error, std::uint64_t* error_offset) {
  rapidjson::Reader& reader = impl_->reader;
  const TraceJsonHandler& handler = impl_->handler;
  reader.Parse<rapidjson::kParseStopWhenDoneFlag>(in, impl_->handler);
  if (!reader.HasParseError()) return SlowReadStatus::kOk;
  if (handler.stopped()) return SlowReadStatus::kStopped;
  *error_offset = reader.GetErrorOffset();
  *error = handler.semantic_error().empty()
               ? std::string("invalid JSON at byte offset ") + std::to_string(*error_offset) + ": " +
                     rapidjson::GetParseError_En(reader.GetParseErrorCode())
               : handler.semantic_error() + " at byte offset " + std::to_string(*error_offset);
  return SlowReadStatus::kError;
}

}  // namespace tailscope::trace::internal
