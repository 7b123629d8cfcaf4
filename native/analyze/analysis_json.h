// The per-trace result as one JSON object (a line of the artifacts NDJSON and
// an entry of the result document's "traces"); docs/critical-path.md has the
// schema.
#pragma once

#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/trace_analysis.h"
#include "trace/trace.h"

namespace tailscope::analyze {

// The writer hands its text on in pieces of about this size: the result of a
// trace with a million spans is hundreds of MB, streamed, never held whole.
inline constexpr std::size_t kTraceJsonChunkBytes = 64 * 1024;
using JsonChunkSink = std::function<void(std::string_view)>;

namespace internal {

// The writer's text: a byte buffer whose appends inline to a bounds check and
// a copy. A trace's result is hundreds of small pieces, and std::string's
// append is an out-of-line call per piece (measured: most of the writer's
// own time once strings and integers were fast).
class JsonTextBuffer {
 public:
  std::string_view view() const { return {data_.data(), size_}; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() { size_ = 0; }
  char& back() { return data_[size_ - 1]; }
  void erase_one(std::size_t at) {
    std::memmove(data_.data() + at, data_.data() + at + 1, size_ - at - 1);
    --size_;
  }
  void push_back(char c) { *reserve_more(1) = c, ++size_; }
  // A literal: its length is a constant, so the copy is a few moves.
  template <std::size_t N>
  void append(const char (&literal)[N]) {
    std::memcpy(reserve_more(N - 1), literal, N - 1);
    size_ += N - 1;
  }
  void append(const char* text, std::size_t n) {
    std::memcpy(reserve_more(n), text, n);
    size_ += n;
  }
  void append(std::string_view text) { append(text.data(), text.size()); }
  // Room for n more bytes at the end; commit(k) keeps k of them.
  char* reserve_more(std::size_t n) {
    if (data_.size() - size_ < n) [[unlikely]]
      grow(n);
    return data_.data() + size_;
  }
  void commit(std::size_t n) { size_ += n; }
  // Exchanges the text with `text` (whose bytes appends then follow): a
  // large result is appended to the caller's string in place, not copied.
  void swap(std::string& text) {
    data_.resize(size_);
    data_.swap(text);
    size_ = data_.size();
  }

 private:
  void grow(std::size_t n);  // out of line: the appends stay small enough to inline
  std::string data_;         // [0, size_) is the text; the rest is room
  std::size_t size_ = 0;
};

}  // namespace internal

// Writes per-trace results. Output formatting is a large share of the
// engine's time (the result is about as big as the input), so service and
// operation names are escaped once per run, not once per use, and the text
// is built by appending, with no per-value calls through a generic writer.
class TraceAnalysisJsonWriter {
 public:
  TraceAnalysisJsonWriter(const trace::NameTable& names, const std::vector<WhatIfScenario>& scenarios);

  // The JSON object (no newline), to `sink` in chunks.
  void write(const TraceAnalysis& analysis, const JsonChunkSink& sink);
  // The same object appended to `out`.
  void append(const TraceAnalysis& analysis, std::string& out);
  // The trace's line of trace_index.ndjson (--per-trace index), without the
  // newline, valid until the next call: the full object's own trace_id,
  // analyzed, span_count and, when analyzed, start_ns and end_to_end_ns.
  std::string_view index_object(const TraceAnalysis& analysis);

 private:
  void write_object(const TraceAnalysis& analysis, const JsonChunkSink* sink);
  void head(const TraceAnalysis& a);   // {"trace_id", "analyzed", "span_count"
  void times(const TraceAnalysis& a);  // ,"start_ns", "end_to_end_ns"
  void maybe_flush(const JsonChunkSink* sink);
  void name(trace::NameId id);  // a quoted, escaped name from the cache
  void span_ref(const TraceAnalysis& a, std::uint32_t span, std::string_view id_key);
  void operations(const std::vector<OperationTime>& ops);

  const trace::NameTable& names_;
  const std::vector<WhatIfScenario>& scenarios_;
  std::vector<std::string> escaped_names_;  // by NameId; empty until first used
  internal::JsonTextBuffer out_;
};

// One-off forms of the writer (no name cache kept between calls).
void append_trace_analysis_json(const TraceAnalysis& analysis, const trace::NameTable& names,
                                const std::vector<WhatIfScenario>& scenarios, std::string& out);
void write_trace_analysis_json(const TraceAnalysis& analysis, const trace::NameTable& names,
                               const std::vector<WhatIfScenario>& scenarios, const JsonChunkSink& sink);

// "service:operation", the key used in paths and rankings.
std::string operation_key(const trace::NameTable& names, trace::NameId service, trace::NameId operation);

}  // namespace tailscope::analyze
