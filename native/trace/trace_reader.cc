#include "trace/trace_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "trace/gzip_read_stream.h"
#include "trace/internal/input_buffer.h"
#include "trace/internal/rapidjson_value_reader.h"
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

using internal::InputBuffer;
using internal::is_json_space;

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
    in.skip_whitespace();
    char c = in.Peek();
    if (c == ']') {
      in.Take();
      break;
    }
    if (!first) {
      if (c != ',') return StreamStatus::kGaveUp;
      in.Take();
      in.skip_whitespace();
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
  in.skip_whitespace();
  if (in.Peek() == '}') {
    in.Take();
    return StreamStatus::kOk;
  }
  if (in.Peek() != ',') return StreamStatus::kGaveUp;
  in.Take();
  in.skip_whitespace();
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
// the end of input. The top-level objects of the buffered window are read by
// simdjson many at a time (iterate_many: one stage 1 over the window, which
// also finds where each ends); one the window cuts off or that simdjson
// gives up on is cut out whole (ValueScanner) and read by simdjson alone;
// what simdjson does not take — anything but an object, a value too big or
// too deep, input simdjson rejects — RapidJSON's SAX reader reads from the
// same place, giving the same traces and the exact error and offset.
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
  internal::RapidjsonValueReader slow(names, options, result.stats, skip_delivered);
  internal::SimdjsonValueReader fast(names, options);
  std::string stream_scratch;  // the members after a streamed envelope's array
  bool any_value = false;
  const bool many = options.use_simdjson && internal::SimdjsonValueReader::reads_many(options);
  // Values starting before this offset are read one at a time: simdjson
  // rejected the window that held them as a whole.
  std::uint64_t one_at_a_time_until = 0;
  for (;;) {
    in.skip_whitespace();
    if (in.Peek() == '\0') {
      if (!in.at_end()) {
        result.ok = false;
        result.error_offset = in.Tell();
        result.error = "invalid JSON at byte offset " + std::to_string(result.error_offset) + ": NUL byte";
      }
      break;
    }
    any_value = true;
    bool rapidjson_only = false;  // the value gave up after delivering traces
    if (many && in.Peek() == '{' && in.Tell() >= one_at_a_time_until) {
      // Every whole value in the buffered window at once (iterate_many);
      // refilled first while less than half a chunk is buffered, so that
      // a window holds many values (and the buffer does not grow: fill()
      // grows it only when less than half a chunk is free).
      if (in.available() < InputBuffer::kChunkBytes / 2) in.fill();
      const std::uint64_t window_start = in.Tell();
      // At most a chunk (text in memory is one window): simdjson's index
      // of a window is ~4x its size.
      const std::size_t window = std::min(in.available(), InputBuffer::kChunkBytes);
      const internal::ManyRead m = fast.read_many(in.cursor(), window, result.stats, on_trace);
      result.stats.values_simdjson += m.values;
      in.skip(m.consumed);
      if (m.stopped) {
        result.stopped = true;
        break;
      }
      if (m.window_rejected) {
        one_at_a_time_until = window_start + window;
        continue;
      }
      if (!m.gave_up && m.values > 0) continue;  // the window ended inside a value: read more, go on
      // The value at the cursor goes to the per-value path below (which
      // reads what simdjson reads and gives the rest to RapidJSON): a value
      // simdjson gave up on, or one larger than the window. So does the
      // rest of the window: a window whose values give up costs one stage 1
      // over it, not one per value.
      one_at_a_time_until = window_start + window;
      if (m.gave_up && m.emitted > 0) {
        skip = m.emitted;  // its first traces are out: RapidJSON reads it, skipping them
        rapidjson_only = true;
      }
    }
    if (!rapidjson_only && options.use_simdjson && in.Peek() == '{') {
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
    const internal::SlowReadStatus slow_status = slow.read(in, &result.error, &result.error_offset);
    skip = 0;
    if (slow_status == internal::SlowReadStatus::kStopped) {
      result.stopped = true;
      break;
    }
    if (slow_status == internal::SlowReadStatus::kError) {
      result.ok = false;
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

ReadResult read_padded_trace_text(std::string_view json, NameTable& names, const ReadOptions& options,
                                  const TraceCallback& on_trace) {
  InputBuffer in(InputBuffer::Borrowed{}, json, internal::SimdjsonValueReader::padding_bytes());
  return read_input(in, names, options, on_trace);
}

// The InputBuffer's padding and the '\0' after it.
std::size_t trace_text_padding_bytes() { return internal::SimdjsonValueReader::padding_bytes() + 1; }

}  // namespace tailscope::trace
