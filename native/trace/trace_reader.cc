#include "trace/trace_reader.h"

#include <fcntl.h>
#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "trace/gzip_read_stream.h"
#include "trace/internal/jaeger_trace_builder.h"
#include "trace/internal/json_scalar.h"
#include "trace/internal/otlp_document_builder.h"
#include "trace/internal/simdjson_value_reader.h"
#include "trace/internal/value_scanner.h"

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
  values_simdjson += o.values_simdjson;
  values_rapidjson += o.values_rapidjson;
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

// The reader's input: a window over the (decompressed) bytes, refilled from
// the file in chunks and grown only while one top-level value does not fit.
// It is also RapidJSON's input stream for the slow path. The bytes past the
// filled part are readable padding, as simdjson needs.
class InputBuffer {
 public:
  using Ch = char;
  static constexpr std::size_t kChunkBytes = 1 << 20;

  InputBuffer(GzipReadStream* source, std::size_t padding) : source_(source), padding_(padding) {
    reserve(kChunkBytes);
  }
  // In-memory input: the whole text, no source.
  InputBuffer(std::string_view text, std::size_t padding) : padding_(padding) {
    reserve(text.size());
    std::memcpy(buffer_.get(), text.data(), text.size());
    end_ = text.size();
  }

  const char* cursor() const { return buffer_.get() + pos_; }
  std::size_t available() const { return end_ - pos_; }
  void skip(std::size_t n) { pos_ += n; }
  // Reads more input after what is buffered (moving it to the buffer's start,
  // so cursor() changes). False at the end of input.
  bool fill() {
    if (source_ == nullptr || source_->at_end()) return false;
    if (pos_ > 0) {
      std::memmove(buffer_.get(), buffer_.get() + pos_, end_ - pos_);
      consumed_ += pos_;
      end_ -= pos_;
      pos_ = 0;
    }
    if (capacity_ - end_ < kChunkBytes / 2) reserve(2 * capacity_);
    const std::size_t n = source_->read(buffer_.get() + end_, capacity_ - end_);
    end_ += n;
    std::memset(buffer_.get() + end_, 0, padding_);  // '\0' ends RapidJSON's view
    return n > 0;
  }
  // True at the real end of input (Peek() is also '\0' at a NUL byte).
  bool at_end() { return pos_ == end_ && !fill(); }
  // Whether rewind_to() can go back past the buffer's start (a regular file,
  // or text in memory; not a pipe).
  bool rewindable() const { return source_ == nullptr || source_->rewindable(); }
  // Moves the read position back to input offset `offset` (at most Tell()):
  // inside the buffer while those bytes are still there, else by reading the
  // source again from its start. False when it cannot.
  bool rewind_to(std::uint64_t offset) {
    if (offset >= consumed_) {
      pos_ = offset - consumed_;
      return true;
    }
    if (source_ == nullptr || !source_->rewind()) return false;
    consumed_ = pos_ = end_ = 0;
    while (consumed_ + end_ < offset) {
      pos_ = end_;  // drop what is before the offset
      if (!fill()) return false;
    }
    pos_ = offset - consumed_;
    return true;
  }

  // RapidJSON stream concept.
  Ch Peek() {
    if (pos_ == end_) fill();
    return buffer_[pos_];
  }
  Ch Take() {
    const Ch c = Peek();
    if (pos_ < end_) ++pos_;
    return c;
  }
  std::size_t Tell() const { return consumed_ + pos_; }
  Ch* PutBegin() { return nullptr; }
  void Put(Ch) {}
  void Flush() {}
  std::size_t PutEnd(Ch*) { return 0; }

 private:
  void reserve(std::size_t capacity) {
    auto grown = std::make_unique<char[]>(capacity + padding_ + 1);
    if (buffer_ != nullptr) std::memcpy(grown.get(), buffer_.get(), end_);
    std::memset(grown.get() + end_, 0, capacity + padding_ + 1 - end_);
    buffer_ = std::move(grown);
    capacity_ = capacity;
  }

  GzipReadStream* source_ = nullptr;
  std::size_t padding_;
  std::unique_ptr<char[]> buffer_;
  std::size_t capacity_ = 0;
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
  std::size_t consumed_ = 0;  // input bytes dropped from the buffer's front
};

// A top-level value larger than this is read by the RapidJSON stream instead
// of being buffered whole for simdjson: memory stays bounded by the largest
// trace, not by the file, and a big {"data": [...]} export streams. Measured
// (tailscope-critpath-bench --format envelope): buffering a 55 MB envelope
// whole (buffer growth, simdjson's index of ~4x its size, page faults) read
// it slower than RapidJSON streaming; one trace per line is ~16 KB a value.
constexpr std::size_t kMaxBufferedValueBytes = std::size_t{8} << 20;

// Finds the end of the value at the cursor (scanner.end()), reading more
// input while the value is incomplete and smaller than
// kMaxBufferedValueBytes. kNeedMore with *scanned >= kMaxBufferedValueBytes:
// too big to buffer; kNeedMore otherwise: the input ended first.
internal::ValueScanner::Status cut_value(InputBuffer& in, internal::ValueScanner& scanner, std::size_t* scanned) {
  *scanned = 0;
  for (;;) {
    const auto status = scanner.scan(in.cursor(), *scanned, in.available());
    if (status != internal::ValueScanner::Status::kNeedMore) return status;
    *scanned = in.available();
    if (*scanned >= kMaxBufferedValueBytes || !in.fill()) return status;
  }
}

inline bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Length of `{ "data" : [` (or "resourceSpans") at p[0, n), whitespace
// allowed where JSON allows it; 0 when the value does not start so.
std::size_t envelope_prefix(const char* p, std::size_t n, bool* otlp) {
  std::size_t i = 0;
  auto space = [&] {
    while (i < n && is_json_space(p[i])) ++i;
  };
  if (n == 0 || p[0] != '{') return 0;
  ++i;
  space();
  constexpr std::string_view kData = "\"data\"";
  constexpr std::string_view kResourceSpans = "\"resourceSpans\"";
  const std::string_view rest(p + i, n - i);
  if (rest.starts_with(kData)) {
    *otlp = false;
    i += kData.size();
  } else if (rest.starts_with(kResourceSpans)) {
    *otlp = true;
    i += kResourceSpans.size();
  } else {
    return 0;
  }
  space();
  if (i >= n || p[i] != ':') return 0;
  ++i;
  space();
  if (i >= n || p[i] != '[') return 0;
  return i + 1;
}

enum class StreamStatus : std::uint8_t { kNotEnvelope, kOk, kStopped, kGaveUp };

// A top-level {"data": [...]} or {"resourceSpans": [...]} too big to buffer
// whole (a Jaeger UI export, an OTLP batch file): each element of the array
// is cut out and read by simdjson in turn, so memory stays bounded by the
// largest element and the envelope reads at the speed of one trace per line.
// Members after the array are read as an object of their own ("{" + the
// rest), which gives the same traces as reading them in place (the array
// was the first member). Anything unusual — an element that is not an
// object or is itself too big, a missing comma, JSON simdjson rejects —
// gives up: the caller rewinds to the value's start and RapidJSON reads it
// whole, skipping the *emitted traces already delivered, for the exact
// error or the same traces. Counters go to `stats` (kept by the caller only
// when this does not give up).
StreamStatus stream_envelope(InputBuffer& in, internal::SimdjsonValueReader& fast, const ReadOptions& options,
                             ReadStats& stats, const TraceCallback& on_trace, std::uint64_t* emitted,
                             std::string& scratch) {
  using internal::FastReadStatus;
  using internal::ValueScanner;
  bool otlp = false;
  const std::size_t prefix = envelope_prefix(in.cursor(), in.available(), &otlp);
  if (prefix == 0) return StreamStatus::kNotEnvelope;
  in.skip(prefix);
  if (otlp) fast.begin_resource_spans();
  std::uint64_t delivered = 0;
  for (bool first = true;; first = false) {
    rapidjson::SkipWhitespace(in);
    char c = in.Peek();
    if (c == ']') {
      in.Take();
      break;
    }
    if (!first) {
      if (c != ',') return StreamStatus::kGaveUp;
      in.Take();
      rapidjson::SkipWhitespace(in);
      c = in.Peek();
    }
    if (c != '{') return StreamStatus::kGaveUp;
    // The element sits two levels down (envelope object, array).
    ValueScanner scanner(options.max_nesting_depth - 2);
    std::size_t scanned = 0;
    if (cut_value(in, scanner, &scanned) != ValueScanner::Status::kComplete) return StreamStatus::kGaveUp;
    const FastReadStatus status = otlp
                                      ? fast.read_resource_spans_element(in.cursor(), scanner.end(), stats)
                                      : fast.read_data_element(in.cursor(), scanner.end(), stats, on_trace, &delivered);
    *emitted += delivered;
    delivered = 0;
    if (status == FastReadStatus::kGaveUp) return StreamStatus::kGaveUp;
    in.skip(scanner.end());
    if (status == FastReadStatus::kStopped) return StreamStatus::kStopped;
  }
  if (otlp) {
    const FastReadStatus status = fast.finish_resource_spans(stats, on_trace, &delivered);
    *emitted += delivered;
    delivered = 0;
    if (status == FastReadStatus::kStopped) return StreamStatus::kStopped;
  }
  rapidjson::SkipWhitespace(in);
  if (in.Peek() == '}') {
    in.Take();
    return StreamStatus::kOk;
  }
  if (in.Peek() != ',') return StreamStatus::kGaveUp;
  in.Take();
  rapidjson::SkipWhitespace(in);
  if (in.Peek() != '"') return StreamStatus::kGaveUp;  // e.g. a trailing comma: RapidJSON says so
  // The rest of the envelope's members, up to its closing brace.
  ValueScanner scanner(options.max_nesting_depth, 1);
  std::size_t scanned = 0;
  if (cut_value(in, scanner, &scanned) != ValueScanner::Status::kComplete) return StreamStatus::kGaveUp;
  const std::size_t size = 1 + scanner.end();
  scratch.assign(1, '{');
  scratch.append(in.cursor(), scanner.end());
  scratch.resize(size + internal::SimdjsonValueReader::padding_bytes(), ' ');
  const FastReadStatus status = fast.read(scratch.data(), size, stats, on_trace, &delivered);
  *emitted += delivered;
  if (status == FastReadStatus::kGaveUp) return StreamStatus::kGaveUp;
  in.skip(scanner.end());
  return status == FastReadStatus::kStopped ? StreamStatus::kStopped : StreamStatus::kOk;
}

// Parses one JSON value after another (a document, or NDJSON lines) until
// the end of input. Each top-level object is cut out whole (ValueScanner)
// and read by simdjson; what simdjson does not take — anything but an
// object, a value too big or too deep, input simdjson rejects — RapidJSON's
// SAX reader reads from the same place, giving the same traces and the exact
// error and offset.
ReadResult read_input(InputBuffer& in, NameTable& names, const ReadOptions& options, const TraceCallback& on_trace) {
  ReadResult result;
  std::uint64_t skip = 0;  // traces the simdjson attempt already delivered
  const TraceCallback skip_delivered = [&](Trace& t) {
    if (skip > 0) {
      --skip;
      return true;
    }
    return on_trace(t);
  };
  TraceJsonHandler handler(names, options, result.stats, skip_delivered);
  internal::SimdjsonValueReader fast(names, options);
  std::string stream_scratch;  // the members after a streamed envelope's array
  rapidjson::Reader reader;
  bool any_value = false;
  for (;;) {
    rapidjson::SkipWhitespace(in);
    if (in.Peek() == '\0') {
      if (!in.at_end()) {
        result.ok = false;
        result.error_offset = in.Tell();
        result.error = "invalid JSON at byte offset " + std::to_string(result.error_offset) + ": NUL byte";
      }
      break;
    }
    any_value = true;
    if (options.use_simdjson && in.Peek() == '{') {
      const std::uint64_t value_start = in.Tell();
      internal::ValueScanner scanner(options.max_nesting_depth);
      std::size_t scanned = 0;
      const auto status = cut_value(in, scanner, &scanned);
      if (status == internal::ValueScanner::Status::kComplete) {
        std::uint64_t emitted = 0;
        const internal::FastReadStatus fast_status =
            fast.read(in.cursor(), scanner.end(), result.stats, on_trace, &emitted);
        if (fast_status != internal::FastReadStatus::kGaveUp) ++result.stats.values_simdjson;
        if (fast_status == internal::FastReadStatus::kStopped) {
          in.skip(scanner.end());
          result.stopped = true;
          break;
        }
        if (fast_status == internal::FastReadStatus::kOk) {
          in.skip(scanner.end());
          continue;
        }
        skip = emitted;
      } else if (status == internal::ValueScanner::Status::kNeedMore && scanned >= kMaxBufferedValueBytes &&
                 in.rewindable()) {
        std::uint64_t emitted = 0;
        ReadStats streamed;
        const StreamStatus stream_status =
            stream_envelope(in, fast, options, streamed, on_trace, &emitted, stream_scratch);
        if (stream_status == StreamStatus::kOk || stream_status == StreamStatus::kStopped) {
          result.stats.add(streamed);
          ++result.stats.values_simdjson;
          if (stream_status == StreamStatus::kStopped) {
            result.stopped = true;
            break;
          }
          continue;
        }
        if (stream_status == StreamStatus::kGaveUp) {
          skip = emitted;
          if (!in.rewind_to(value_start)) {
            result.ok = false;
            result.error_offset = value_start;
            result.error = "cannot read the input again from byte offset " + std::to_string(value_start) +
                           " to report an error exactly";
            break;
          }
        }
      }
    }
    ++result.stats.values_rapidjson;
    reader.Parse<rapidjson::kParseStopWhenDoneFlag>(in, handler);
    skip = 0;
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
  result.stats.bytes = in.Tell();
  return result;
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
  InputBuffer in(&stream, internal::SimdjsonValueReader::padding_bytes());
  ReadResult result = read_input(in, names, options, on_trace);
  result.stats.compressed = stream.compressed();
  if (!stream.ok() && !result.stopped) {
    // A decompression error ends the stream early; report it rather than the
    // JSON error it caused.
    result.ok = false;
    result.error = stream.error() + " (after " + std::to_string(in.Tell()) + " decompressed bytes)";
    result.error_offset = in.Tell();
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
  InputBuffer in(json, internal::SimdjsonValueReader::padding_bytes());
  return read_input(in, names, options, on_trace);
}

}  // namespace tailscope::trace
