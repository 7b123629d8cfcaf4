// Builds one Trace from the SAX events (or the typed events, below) inside a
// Jaeger JSON trace object ({"traceID", "spans": [...], "processes": {...}}).
// Keys may come in any order: processes usually follow the spans, so services
// are resolved when the trace object ends. Defined inline: it runs for every JSON event of
// every span, and inlining into the reader's SAX handler is most of its speed.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trace/internal/json_scalar.h"
#include "trace/internal/span_tags.h"
#include "trace/trace.h"
#include "trace/trace_reader.h"

namespace tailscope::trace::internal {

class JaegerTraceBuilder {
 public:
  JaegerTraceBuilder(NameTable& names, const ReadOptions& options, ReadStats& stats)
      : names_(names), options_(options), stats_(stats) {}

  // Starts a trace; the events that follow are those inside its object (the
  // object's own start and end are not passed).
  void begin();
  // True once the object showed a trace key (traceID, spans, processes).
  bool has_content() const { return has_content_; }
  void key(std::string_view key);
  void scalar(const JsonScalar& value);
  void start_object();
  void start_array();
  void end_container();
  // Resolves processIDs to services. The trace stays valid until begin().
  Trace& finish();

  // Typed events, for a reader that walks a trace object itself (the
  // simdjson path) instead of sending SAX events: each call is what the SAX
  // events of that member do, so both paths build the same traces. Strings
  // are views valid for the call; the trace's own members:
  void saw_trace_key() { has_content_ = true; }  // traceID, spans or processes
  void trace_id(std::string_view text) { trace_.trace_id.assign(text); }
  // A "processes" entry's serviceName (each one counts; the first wins).
  void process_service(std::string_view process_key, std::string_view service_name);
  // A span object: begin_span(), its members, end_span().
  void begin_span();
  void end_span();
  void span_trace_id(std::string_view text) {
    if (trace_.trace_id.empty()) trace_.trace_id.assign(text);
  }
  void span_id(std::string_view text);
  void parent_span_id(std::string_view text);
  void operation_name(std::string_view text);
  // startTime / duration in microseconds, any scalar.
  void span_time(bool is_start, const JsonScalar& value);
  void process_id(std::string_view text);
  void span_service_name(std::string_view text);  // the span's own "process"
  // A references[] object: begin_reference(), refType / spanID, end_reference().
  void begin_reference() {
    ref_type_ = RefType::kChildOf;  // Jaeger's default when refType is absent
    ref_has_id_ = false;
  }
  void reference_type(std::string_view text) {
    ref_type_ = is_literal(text, "FOLLOWS_FROM") ? RefType::kFollowsFrom : RefType::kChildOf;
  }
  void reference_span_id(std::string_view text) {
    // Stored in the trace's arena at once (not copied twice): a reference
    // that does not become the parent leaves its bytes unused there.
    ref_has_id_ = !text.empty() && current_span() != nullptr;
    if (ref_has_id_) ref_span_id_ = trace_.store(text);
  }
  void end_reference();
  // A tags[] object: begin_tag(), then key and value in either order.
  void begin_tag() {
    tag_has_key_ = false;
    tag_ = SpanTag::kOther;
    tag_value_.reset();
  }
  void tag_key(std::string_view text);
  // False once the key is known and is not one the analyzer uses: the value
  // need not be read.
  bool tag_wants_value() const { return !(tag_has_key_ && tag_ == SpanTag::kOther); }
  void tag_value(const JsonScalar& value);

 private:
  enum class Frame : std::uint8_t {
    kTrace,
    kSpans,
    kSpan,
    kReferences,
    kReference,
    kTags,
    kTag,
    kSpanProcess,
    kProcesses,
    kProcess
  };
  enum class Field : std::uint8_t {
    kNone,
    kTraceId,
    kSpans,
    kProcesses,
    kSpanTraceId,
    kSpanId,
    kParentSpanId,
    kOperationName,
    kReferences,
    kStartTime,
    kDuration,
    kTags,
    kProcessId,
    kProcess,
    kRefType,
    kRefSpanId,
    kTagKey,
    kTagValue,
    kServiceName,
    kProcessKey
  };

  Frame frame() const { return frames_[top_]; }
  void start_container(bool is_object);
  Span* current_span() { return dropping_span_ ? nullptr : &trace_.spans.back(); }

  NameTable& names_;
  const ReadOptions& options_;
  ReadStats& stats_;
  Trace trace_;
  // The frames we descend into are at most 5 deep (trace, spans, span, tags,
  // tag); anything deeper is skipped by counting.
  std::array<Frame, 8> frames_{};
  int top_ = 0;
  Field field_ = Field::kNone;
  int skip_depth_ = 0;  // > 0 while inside a value we ignore
  bool has_content_ = false;
  bool dropping_span_ = false;
  bool span_has_id_ = false;
  bool span_time_ok_ = true;

  // Reference in progress: parent = first CHILD_OF, else first FOLLOWS_FROM.
  RefType ref_type_ = RefType::kNone;
  StrRef ref_span_id_;  // in trace_.arena
  bool ref_has_id_ = false;

  // Tag in progress.
  bool tag_has_key_ = false;
  SpanTag tag_ = SpanTag::kOther;
  OwnedScalar tag_value_;

  // processID → service, for this trace; slots are reused across traces.
  std::vector<std::pair<std::string, NameId>> processes_;
  std::size_t process_count_ = 0;
  std::string process_key_;
  std::vector<std::uint32_t> process_slots_;
  static constexpr NameId kUnresolved = 0xFFFFFFFFu;
};

// ---- implementation ----

inline void JaegerTraceBuilder::begin() {
  trace_.clear();
  top_ = 0;
  frames_[0] = Frame::kTrace;
  field_ = Field::kNone;
  skip_depth_ = 0;
  has_content_ = false;
  dropping_span_ = false;
  process_count_ = 0;
}

inline void JaegerTraceBuilder::key(std::string_view key) {
  if (skip_depth_ > 0) return;
  // Most frequent frames first: a span's tags, then the span itself.
  const Frame f = frame();
  if (f == Frame::kTag) {
    field_ = is_literal(key, "key") ? Field::kTagKey : is_literal(key, "value") ? Field::kTagValue : Field::kNone;
    return;
  }
  field_ = Field::kNone;
  if (f == Frame::kSpan) {
    switch (key.size()) {
      case 4:
        if (is_literal(key, "tags")) field_ = Field::kTags;
        break;
      case 6:
        if (is_literal(key, "spanID")) field_ = Field::kSpanId;
        break;
      case 7:
        if (is_literal(key, "traceID"))
          field_ = Field::kSpanTraceId;
        else if (is_literal(key, "process"))
          field_ = Field::kProcess;
        break;
      case 8:
        if (is_literal(key, "duration")) field_ = Field::kDuration;
        break;
      case 9:
        if (is_literal(key, "startTime"))
          field_ = Field::kStartTime;
        else if (is_literal(key, "processID"))
          field_ = Field::kProcessId;
        break;
      case 10:
        if (is_literal(key, "references")) field_ = Field::kReferences;
        break;
      case 12:
        if (is_literal(key, "parentSpanID")) field_ = Field::kParentSpanId;
        break;
      case 13:
        if (is_literal(key, "operationName")) field_ = Field::kOperationName;
        break;
      default:
        break;
    }
    return;
  }
  switch (f) {
    case Frame::kTrace:
      if (is_literal(key, "spans"))
        field_ = Field::kSpans;
      else if (is_literal(key, "processes"))
        field_ = Field::kProcesses;
      else if (is_literal(key, "traceID"))
        field_ = Field::kTraceId;
      if (field_ != Field::kNone) has_content_ = true;
      break;
    case Frame::kReference:
      if (is_literal(key, "refType"))
        field_ = Field::kRefType;
      else if (is_literal(key, "spanID"))
        field_ = Field::kRefSpanId;
      break;
    case Frame::kSpanProcess:
    case Frame::kProcess:
      if (is_literal(key, "serviceName")) field_ = Field::kServiceName;
      break;
    case Frame::kProcesses:
      process_key_.assign(key);
      field_ = Field::kProcessKey;
      break;
    default:
      break;
  }
}

inline void JaegerTraceBuilder::scalar(const JsonScalar& value) {
  if (skip_depth_ > 0) return;
  const Field field = field_;
  if (field == Field::kNone) return;  // a key we skip ("type", "flags", …)
  field_ = Field::kNone;
  if (field == Field::kTagValue) {
    tag_value(value);
    return;
  }
  if (field == Field::kStartTime || field == Field::kDuration) {
    span_time(field == Field::kStartTime, value);
    return;
  }
  if (!value.is_string()) return;  // every other member we use is a string
  const std::string_view text = value.text;
  switch (field) {
    case Field::kTraceId:
      trace_id(text);
      break;
    case Field::kSpanTraceId:
      span_trace_id(text);
      break;
    case Field::kSpanId:
      span_id(text);
      break;
    case Field::kParentSpanId:
      parent_span_id(text);
      break;
    case Field::kOperationName:
      operation_name(text);
      break;
    case Field::kProcessId:
      process_id(text);
      break;
    case Field::kServiceName:
      if (frame() == Frame::kSpanProcess)
        span_service_name(text);
      else
        process_service(process_key_, text);
      break;
    case Field::kRefType:
      reference_type(text);
      break;
    case Field::kRefSpanId:
      reference_span_id(text);
      break;
    case Field::kTagKey:
      tag_key(text);
      break;
    default:
      break;
  }
}

inline void JaegerTraceBuilder::process_service(std::string_view process_key, std::string_view service_name) {
  if (process_count_ == processes_.size()) processes_.emplace_back();
  auto& slot = processes_[process_count_++];
  slot.first.assign(process_key);
  slot.second = names_.intern(service_name);
}

inline void JaegerTraceBuilder::span_id(std::string_view text) {
  Span* span = current_span();
  if (span != nullptr && !text.empty()) {
    span->span_id = trace_.store(text);
    span_has_id_ = true;
  }
}

inline void JaegerTraceBuilder::parent_span_id(std::string_view text) {
  // Older Jaeger JSON: a bare parentSpanID; references[] take precedence.
  Span* span = current_span();
  if (span != nullptr && !text.empty() && text != "0" && span->parent_ref == RefType::kNone) {
    span->parent_span_id = trace_.store(text);
    span->parent_ref = RefType::kChildOf;
  }
}

inline void JaegerTraceBuilder::operation_name(std::string_view text) {
  if (Span* span = current_span()) span->operation = names_.intern(text);
}

inline void JaegerTraceBuilder::span_time(bool is_start, const JsonScalar& value) {
  Span* span = current_span();
  if (span == nullptr) return;
  std::int64_t ns = 0;
  if (value.to_nanoseconds(1000, &ns)) {
    (is_start ? span->start_ns : span->duration_ns) = ns;
  } else {
    span_time_ok_ = false;
  }
}

inline void JaegerTraceBuilder::process_id(std::string_view text) {
  if (Span* span = current_span()) span->process_id = trace_.store(text);
}

inline void JaegerTraceBuilder::span_service_name(std::string_view text) {
  if (Span* span = current_span()) span->service = names_.intern(text);
}

inline void JaegerTraceBuilder::tag_key(std::string_view text) {
  tag_has_key_ = true;
  tag_ = classify_span_tag(text);
  Span* span = current_span();
  if (tag_ != SpanTag::kOther && tag_value_.present && span != nullptr) apply_span_tag(*span, tag_, tag_value_.scalar);
}

inline void JaegerTraceBuilder::tag_value(const JsonScalar& value) {
  if (tag_has_key_) {
    Span* span = current_span();
    if (tag_ != SpanTag::kOther && span != nullptr) apply_span_tag(*span, tag_, value);
  } else {
    tag_value_.set(value);  // key still to come
  }
}

inline void JaegerTraceBuilder::start_object() { start_container(true); }
inline void JaegerTraceBuilder::start_array() { start_container(false); }

inline void JaegerTraceBuilder::start_container(bool is_object) {
  if (skip_depth_ > 0) {
    ++skip_depth_;
    return;
  }
  const Field field = field_;
  field_ = Field::kNone;
  Frame next = Frame::kTrace;  // kTrace here means "skip"
  switch (frame()) {
    case Frame::kTrace:
      if (field == Field::kSpans && !is_object)
        next = Frame::kSpans;
      else if (field == Field::kProcesses && is_object)
        next = Frame::kProcesses;
      break;
    case Frame::kSpans:
      if (is_object) next = Frame::kSpan;
      break;
    case Frame::kSpan:
      if (field == Field::kReferences && !is_object)
        next = Frame::kReferences;
      else if (field == Field::kTags && !is_object)
        next = Frame::kTags;
      else if (field == Field::kProcess && is_object)
        next = Frame::kSpanProcess;
      break;
    case Frame::kReferences:
      if (is_object) next = Frame::kReference;
      break;
    case Frame::kTags:
      if (is_object) next = Frame::kTag;
      break;
    case Frame::kProcesses:
      if (field == Field::kProcessKey && is_object) next = Frame::kProcess;
      break;
    default:
      break;
  }
  if (next == Frame::kTrace) {
    skip_depth_ = 1;
    return;
  }
  frames_[++top_] = next;
  switch (next) {
    case Frame::kSpan:
      begin_span();
      break;
    case Frame::kReference:
      begin_reference();
      break;
    case Frame::kTag:
      begin_tag();
      break;
    default:
      break;
  }
}

inline void JaegerTraceBuilder::end_container() {
  if (skip_depth_ > 0) {
    --skip_depth_;
    return;
  }
  field_ = Field::kNone;
  const Frame ending = frame();
  if (ending == Frame::kTrace) return;  // the trace object itself: finish() handles it
  switch (ending) {
    case Frame::kSpan:
      end_span();
      break;
    case Frame::kReference:
      end_reference();
      break;
    default:
      break;
  }
  --top_;
}

inline void JaegerTraceBuilder::begin_span() {
  span_has_id_ = false;
  span_time_ok_ = true;
  if (trace_.spans.size() >= options_.max_spans_per_trace) {
    dropping_span_ = true;
    return;
  }
  dropping_span_ = false;
  trace_.spans.emplace_back();
  trace_.spans.back().service = kUnresolved;
}

inline void JaegerTraceBuilder::end_span() {
  if (dropping_span_) {
    ++stats_.dropped_spans_over_limit;
    dropping_span_ = false;
    return;
  }
  if (!span_has_id_) {
    ++stats_.dropped_spans_without_id;
    trace_.spans.pop_back();
    return;
  }
  if (!span_time_ok_) ++stats_.bad_timestamps;
}

inline void JaegerTraceBuilder::end_reference() {
  Span* span = current_span();
  if (span == nullptr || !ref_has_id_) return;
  const bool replaces = span->parent_ref == RefType::kNone ||
                        (span->parent_ref == RefType::kFollowsFrom && ref_type_ == RefType::kChildOf);
  if (replaces) {
    span->parent_span_id = ref_span_id_;
    span->parent_ref = ref_type_;
  }
}

inline Trace& JaegerTraceBuilder::finish() {
  // processID -> service through a small open-addressing table (a trace has
  // few processes and many spans); later duplicates of a processID lose.
  const std::size_t n = process_count_;
  std::size_t capacity = 16;
  while (capacity < 2 * n) capacity *= 2;
  process_slots_.assign(capacity, kUnresolved);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t slot = quick_hash(processes_[i].first) & (capacity - 1);; slot = (slot + 1) & (capacity - 1)) {
      if (process_slots_[slot] == kUnresolved) {
        process_slots_[slot] = static_cast<std::uint32_t>(i);
        break;
      }
      if (processes_[process_slots_[slot]].first == processes_[i].first) break;
    }
  }
  for (Span& span : trace_.spans) {
    if (span.service != kUnresolved) continue;
    span.service = NameTable::kUnknownService;
    const std::string_view pid = trace_.str(span.process_id);
    for (std::size_t slot = quick_hash(pid) & (capacity - 1);; slot = (slot + 1) & (capacity - 1)) {
      const std::uint32_t p = process_slots_[slot];
      if (p == kUnresolved) {
        ++stats_.spans_without_service;
        break;
      }
      if (processes_[p].first == pid) {
        span.service = processes_[p].second;
        break;
      }
    }
  }
  return trace_;
}

}  // namespace tailscope::trace::internal
