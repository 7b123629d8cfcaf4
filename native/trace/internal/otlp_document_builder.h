// Builds traces from the SAX events (or the typed events) inside an OTLP JSON
// "resourceSpans" array. OTLP groups spans by resource, not by trace, so the
// spans of one document are buffered and split by traceId when the array ends.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trace/internal/json_scalar.h"
#include "trace/internal/span_tags.h"
#include "trace/trace.h"
#include "trace/trace_reader.h"

namespace tailscope::trace::internal {

class OtlpDocumentBuilder {
 public:
  OtlpDocumentBuilder(NameTable& names, const ReadOptions& options, ReadStats& stats)
      : names_(names), options_(options), stats_(stats) {}

  // Starts a resourceSpans array; the events that follow are those inside it.
  void begin();
  void key(std::string_view key);
  void scalar(const JsonScalar& value);
  void start_object();
  void start_array();
  void end_container();
  // Emits the buffered spans as one Trace per traceId (in traceId order, spans
  // in input order). Returns false when the callback asked to stop.
  bool finish(const TraceCallback& on_trace);

  // Typed events, for a reader that walks the documents itself (the simdjson
  // path) instead of sending SAX events: each call is what the SAX events of
  // that member do, so both paths build the same traces. Strings are views
  // valid for the call. A resourceSpans object: begin_resource_spans(), its
  // members, end_resource_spans().
  void begin_resource_spans();
  void end_resource_spans();
  // An attribute {"key", "value": {"stringValue" | "intValue" | …}} of the
  // resource, or of the open span: its key and its value's last scalar.
  void resource_attribute(std::string_view key, const JsonScalar& value);
  void span_attribute(std::string_view key, const JsonScalar& value);
  // A span object: begin_span(), its members, end_span().
  void begin_span();
  void end_span();
  void span_trace_id(std::string_view text);
  void span_id(std::string_view text);
  void parent_span_id(std::string_view text);
  void span_name(std::string_view text);
  void span_kind(const JsonScalar& value);
  // startTimeUnixNano / endTimeUnixNano, any scalar.
  void span_time(bool is_start, const JsonScalar& value);
  void status_code(const JsonScalar& value);

 private:
  enum class Frame : std::uint8_t {
    kResourceSpansArray,
    kResourceSpans,
    kResource,
    kAttributes,
    kAttribute,
    kAnyValue,
    kScopeSpansArray,
    kScopeSpans,
    kSpans,
    kSpan,
    kStatus
  };
  enum class Field : std::uint8_t {
    kNone,
    kResource,
    kScopeSpans,
    kAttributes,
    kKey,
    kValue,
    kStringValue,
    kIntValue,
    kBoolValue,
    kDoubleValue,
    kSpans,
    kTraceId,
    kSpanId,
    kParentSpanId,
    kName,
    kKind,
    kStart,
    kEnd,
    kStatus,
    kCode
  };

  Frame frame() const { return frames_.back(); }
  void start_container(bool is_object);
  void end_attribute();
  bool in_span() const;
  Span* open_span() { return dropping_span_ ? nullptr : &document_.spans.back(); }

  NameTable& names_;
  const ReadOptions& options_;
  ReadStats& stats_;

  Trace document_;  // every span of the document
  std::vector<Frame> frames_;
  Field field_ = Field::kNone;
  int skip_depth_ = 0;

  std::size_t resource_first_span_ = 0;
  NameId resource_service_ = NameTable::kUnknownService;
  bool resource_has_service_ = false;

  bool dropping_span_ = false;
  bool span_has_id_ = false;
  bool span_has_start_ = false;
  bool span_has_end_ = false;
  bool span_time_ok_ = true;
  std::int64_t span_end_ns_ = 0;
  std::uint32_t span_group_ = 0;  // of the open span's traceId (trace_group())

  std::string attribute_key_;
  OwnedScalar attribute_value_;

  // The document's distinct traceIds (few per document; its spans many):
  // each span's id is looked up once, when read, in an open-addressing table
  // of them, and the span keeps the index of its group. The id's text is
  // stored once per group, not once per span.
  struct TraceGroup {
    StrRef trace_id;  // in document_.arena
    std::uint32_t spans = 0;
    std::uint32_t next = 0;  // finish(): where its next span goes in order_
  };
  static constexpr std::uint32_t kNoGroup = 0xFFFFFFFFu;
  std::uint32_t trace_group(std::string_view trace_id);
  void grow_group_table();
  void order_spans_by_trace();
  std::vector<std::uint32_t> id_slots_;  // group indexes, kNoGroup where free
  std::vector<TraceGroup> groups_;
  std::uint32_t last_group_ = kNoGroup;     // the previous lookup's: spans of a trace often follow each other
  std::vector<std::uint32_t> span_groups_;  // parallel to document_.spans
  std::vector<std::uint32_t> group_order_;  // groups with spans, by traceId
  std::vector<std::uint32_t> order_;        // spans by traceId, input order inside one
  Trace out_;
};

}  // namespace tailscope::trace::internal
