#include "trace/trace_reader.h"

#include <fcntl.h>
#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "trace/gzip_read_stream.h"
#include "trace/internal/jaeger_trace_builder.h"
#include "trace/internal/json_scalar.h"
#include "trace/internal/otlp_document_builder.h"
#include "trace/internal/scratch_stream.h"

namespace tailscope::trace {

void ReadStats::add(const ReadStats& o) {
  bytes += o.bytes;
  traces += o.traces;
  spans += o.spans;
  jaeger_traces += o.jaeger_traces;
  otlp_traces += o.otlp_traces;
  dropped_spans_over_limit += o.dropped_spans_over_limit;
  dropped_spans_without_id += o.dropped_spans_without_id;
  spans_without_service += o.spans_without_service;
  bad_timestamps += o.bad_timestamps;
  compressed = compressed || o.compressed;
}

namespace {

using internal::JaegerTraceBuilder;
using internal::JsonScalar;
using internal::OtlpDocumentBuilder;

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

// Parses one JSON value after another (a document, or NDJSON lines) until
// the end of input. `ended(stream)` tells a real end from a NUL byte inside
// the input, which RapidJSON streams also report as '\0'.
template <unsigned kFlags, typename Stream, typename Ended>
ReadResult read_stream(Stream& stream, Ended ended, NameTable& names, const ReadOptions& options,
                       const TraceCallback& on_trace) {
  ReadResult result;
  TraceJsonHandler handler(names, options, result.stats, on_trace);
  rapidjson::Reader reader;
  bool any_value = false;
  for (;;) {
    rapidjson::SkipWhitespace(stream);
    if (stream.Peek() == '\0') {
      if (!ended(stream)) {
        result.ok = false;
        result.error_offset = stream.Tell();
        result.error = "invalid JSON at byte offset " + std::to_string(result.error_offset) + ": NUL byte";
      }
      break;
    }
    any_value = true;
    reader.Parse<kFlags | rapidjson::kParseStopWhenDoneFlag>(stream, handler);
    if (reader.HasParseError()) {
      if (handler.stopped()) {
        result.stopped = true;
        break;
      }
      result.ok = false;
      result.error_offset = reader.GetErrorOffset();
      result.error = handler.semantic_error().empty()
                         ? std::string("invalid JSON at byte offset ") + std::to_string(result.error_offset) + ": " +
                               rapidjson::GetParseError_En(reader.GetParseErrorCode())
                         : handler.semantic_error() + " at byte offset " + std::to_string(result.error_offset);
      break;
    }
  }
  if (result.ok && !any_value && !result.stopped) {
    result.ok = false;
    result.error = "empty input: no JSON value";
  }
  result.stats.bytes = stream.Tell();
  return result;
}

// In-memory text is parsed in situ, strings decoded into a scratch buffer
// (see internal/scratch_stream.h). The text ends in '\0', where the stream stops.
ReadResult read_memory(const char* text, std::size_t size, char* scratch, NameTable& names, const ReadOptions& options,
                       const TraceCallback& on_trace) {
  internal::ScratchStream stream(text, scratch);
  return read_stream<rapidjson::kParseInsituFlag>(
      stream, [size](internal::ScratchStream& s) { return s.Tell() >= size; }, names, options, on_trace);
}

}  // namespace

ReadResult read_trace_file(const std::string& path, NameTable& names, const ReadOptions& options,
                           const TraceCallback& on_trace) {
  // Every file, plain or gzip, file or pipe, is read with buffered read(2)s
  // in fixed-size chunks. Plain files are deliberately not mmap()ed: a file
  // truncated by another process while mapped kills the reader with SIGBUS
  // (and leaves its temporary outputs behind); a short read is an error we
  // can report.
  GzipReadStream stream(path);
  if (!stream.ok()) {
    ReadResult result;
    result.ok = false;
    result.error = "cannot read: " + stream.error();
    return result;
  }
  ReadResult result = read_stream<rapidjson::kParseNoFlags>(
      stream, [](const GzipReadStream& s) { return s.at_end(); }, names, options, on_trace);
  result.stats.compressed = stream.compressed();
  if (!stream.ok() && !result.stopped) {
    // A decompression error ends the stream early; report it rather than the
    // JSON error it caused.
    result.ok = false;
    result.error = stream.error() + " (after " + std::to_string(stream.Tell()) + " decompressed bytes)";
    result.error_offset = stream.Tell();
  }
  if (!result.ok) {
    if (const auto sizes = stream.shrunk_since_open()) {
      result.error = "file truncated while being read (" + std::to_string(sizes->first) + " bytes when opened, " +
                     std::to_string(sizes->second) + " now): " + result.error;
    }
  }
  return result;
}

ReadResult read_trace_text(std::string_view json, NameTable& names, const ReadOptions& options,
                           const TraceCallback& on_trace) {
  const std::string text(json);  // the stream needs a terminating '\0'
  std::string scratch(json.size() + 1, '\0');
  return read_memory(text.c_str(), text.size(), scratch.data(), names, options, on_trace);
}

}  // namespace tailscope::trace
