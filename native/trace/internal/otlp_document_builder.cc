#include "trace/internal/otlp_document_builder.h"

#include <algorithm>
#include <limits>

namespace tailscope::trace::internal {

namespace {

// Slots of the traceId table at a document's start (it doubles past half full).
constexpr std::size_t kInitialGroupSlots = 64;

}  // namespace

void OtlpDocumentBuilder::begin() {
  document_.clear();
  id_slots_.assign(kInitialGroupSlots, kNoGroup);
  groups_.clear();
  last_group_ = kNoGroup;
  span_groups_.clear();
  frames_.clear();
  frames_.push_back(Frame::kResourceSpansArray);
  field_ = Field::kNone;
  skip_depth_ = 0;
  dropping_span_ = false;
}

bool OtlpDocumentBuilder::in_span() const {
  // [kResourceSpansArray, kResourceSpans, kScopeSpansArray, kScopeSpans, kSpans, kSpan, ...]
  return frames_.size() >= 6 && frames_[5] == Frame::kSpan && !dropping_span_;
}

void OtlpDocumentBuilder::key(std::string_view key) {
  if (skip_depth_ > 0) return;
  field_ = Field::kNone;
  switch (frame()) {
    case Frame::kResourceSpans:
      if (is_literal(key, "resource"))
        field_ = Field::kResource;
      else if (is_literal(key, "scopeSpans") || is_literal(key, "instrumentationLibrarySpans"))
        field_ = Field::kScopeSpans;
      break;
    case Frame::kResource:
      if (is_literal(key, "attributes")) field_ = Field::kAttributes;
      break;
    case Frame::kAttribute:
      if (is_literal(key, "key"))
        field_ = Field::kKey;
      else if (is_literal(key, "value"))
        field_ = Field::kValue;
      break;
    case Frame::kAnyValue:
      if (is_literal(key, "stringValue"))
        field_ = Field::kStringValue;
      else if (is_literal(key, "intValue"))
        field_ = Field::kIntValue;
      else if (is_literal(key, "boolValue"))
        field_ = Field::kBoolValue;
      else if (is_literal(key, "doubleValue"))
        field_ = Field::kDoubleValue;
      break;
    case Frame::kScopeSpans:
      if (is_literal(key, "spans")) field_ = Field::kSpans;
      break;
    case Frame::kSpan:
      if (is_literal(key, "traceId"))
        field_ = Field::kTraceId;
      else if (is_literal(key, "spanId"))
        field_ = Field::kSpanId;
      else if (is_literal(key, "parentSpanId"))
        field_ = Field::kParentSpanId;
      else if (is_literal(key, "name"))
        field_ = Field::kName;
      else if (is_literal(key, "kind"))
        field_ = Field::kKind;
      else if (is_literal(key, "startTimeUnixNano"))
        field_ = Field::kStart;
      else if (is_literal(key, "endTimeUnixNano"))
        field_ = Field::kEnd;
      else if (is_literal(key, "attributes"))
        field_ = Field::kAttributes;
      else if (is_literal(key, "status"))
        field_ = Field::kStatus;
      break;
    case Frame::kStatus:
      if (is_literal(key, "code")) field_ = Field::kCode;
      break;
    default:
      break;
  }
}

void OtlpDocumentBuilder::scalar(const JsonScalar& value) {
  if (skip_depth_ > 0) return;
  const Field field = field_;
  field_ = Field::kNone;
  switch (field) {
    case Field::kKey:
      if (value.is_string()) attribute_key_.assign(value.text);
      return;
    case Field::kStringValue:
    case Field::kIntValue:
    case Field::kBoolValue:
    case Field::kDoubleValue:
      attribute_value_.set(value);
      return;
    default:
      break;
  }
  // The span's own members (their frame is always inside a span).
  if (!in_span()) return;
  switch (field) {
    case Field::kTraceId:
      if (value.is_string()) span_trace_id(value.text);
      break;
    case Field::kSpanId:
      if (value.is_string()) span_id(value.text);
      break;
    case Field::kParentSpanId:
      if (value.is_string()) parent_span_id(value.text);
      break;
    case Field::kName:
      if (value.is_string()) span_name(value.text);
      break;
    case Field::kKind:
      span_kind(value);
      break;
    case Field::kStart:
    case Field::kEnd:
      span_time(field == Field::kStart, value);
      break;
    case Field::kCode:
      status_code(value);
      break;
    default:
      break;
  }
}

void OtlpDocumentBuilder::span_trace_id(std::string_view text) {
  if (!dropping_span_) span_group_ = trace_group(text);
}

std::uint32_t OtlpDocumentBuilder::trace_group(std::string_view trace_id) {
  if (last_group_ != kNoGroup && same_text(document_.str(groups_[last_group_].trace_id), trace_id)) return last_group_;
  const std::size_t mask = id_slots_.size() - 1;
  for (std::size_t slot = quick_hash(trace_id) & mask;; slot = (slot + 1) & mask) {
    const std::uint32_t group = id_slots_[slot];
    if (group == kNoGroup) {
      const auto added = static_cast<std::uint32_t>(groups_.size());
      groups_.push_back(TraceGroup{document_.store(trace_id), 0, 0});
      id_slots_[slot] = added;
      if (2 * groups_.size() > id_slots_.size()) grow_group_table();
      return last_group_ = added;
    }
    if (same_text(document_.str(groups_[group].trace_id), trace_id)) return last_group_ = group;
  }
}

void OtlpDocumentBuilder::grow_group_table() {
  id_slots_.assign(2 * id_slots_.size(), kNoGroup);
  const std::size_t mask = id_slots_.size() - 1;
  for (std::uint32_t group = 0; group < groups_.size(); ++group) {
    std::size_t slot = quick_hash(document_.str(groups_[group].trace_id)) & mask;
    while (id_slots_[slot] != kNoGroup) slot = (slot + 1) & mask;
    id_slots_[slot] = group;
  }
}

void OtlpDocumentBuilder::span_id(std::string_view text) {
  Span* span = open_span();
  if (span != nullptr && !text.empty()) {
    span->span_id = document_.store(text);
    span_has_id_ = true;
  }
}

void OtlpDocumentBuilder::parent_span_id(std::string_view text) {
  Span* span = open_span();
  if (span != nullptr && !text.empty()) {
    span->parent_span_id = document_.store(text);
    span->parent_ref = RefType::kChildOf;
  }
}

void OtlpDocumentBuilder::span_name(std::string_view text) {
  if (Span* span = open_span()) span->operation = names_.intern(text);
}

void OtlpDocumentBuilder::span_kind(const JsonScalar& value) {
  Span* span = open_span();
  if (span == nullptr) return;
  if (value.is_string()) {
    span->kind = parse_span_kind(value.text);
    return;
  }
  // OTLP enum: 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
  std::int64_t k = 0;
  if (value.to_int64(&k) && k >= 1 && k <= 5) {
    static constexpr SpanKind kKinds[] = {SpanKind::kInternal, SpanKind::kServer, SpanKind::kClient,
                                          SpanKind::kProducer, SpanKind::kConsumer};
    span->kind = kKinds[k - 1];
  }
}

void OtlpDocumentBuilder::span_time(bool is_start, const JsonScalar& value) {
  Span* span = open_span();
  if (span == nullptr) return;
  std::int64_t ns = 0;
  if (!value.to_nanoseconds(1, &ns)) {
    span_time_ok_ = false;
  } else if (is_start) {
    span->start_ns = ns;
    span_has_start_ = true;
  } else {
    span_end_ns_ = ns;
    span_has_end_ = true;
  }
}

void OtlpDocumentBuilder::status_code(const JsonScalar& value) {
  Span* span = open_span();
  if (span == nullptr) return;
  std::int64_t code = 0;
  if ((value.is_string() && is_literal(value.text, "STATUS_CODE_ERROR")) || (value.to_int64(&code) && code == 2)) {
    span->error = true;
  }
}

void OtlpDocumentBuilder::start_object() { start_container(true); }
void OtlpDocumentBuilder::start_array() { start_container(false); }

void OtlpDocumentBuilder::start_container(bool is_object) {
  if (skip_depth_ > 0) {
    ++skip_depth_;
    return;
  }
  const Field field = field_;
  field_ = Field::kNone;
  Frame next = Frame::kResourceSpansArray;  // here: "skip"
  switch (frame()) {
    case Frame::kResourceSpansArray:
      if (is_object) next = Frame::kResourceSpans;
      break;
    case Frame::kResourceSpans:
      if (field == Field::kResource && is_object)
        next = Frame::kResource;
      else if (field == Field::kScopeSpans && !is_object)
        next = Frame::kScopeSpansArray;
      break;
    case Frame::kResource:
    case Frame::kSpan:
      if (field == Field::kAttributes && !is_object)
        next = Frame::kAttributes;
      else if (field == Field::kStatus && is_object)
        next = Frame::kStatus;
      break;
    case Frame::kAttributes:
      if (is_object) next = Frame::kAttribute;
      break;
    case Frame::kAttribute:
      if (field == Field::kValue && is_object) next = Frame::kAnyValue;
      break;
    case Frame::kScopeSpansArray:
      if (is_object) next = Frame::kScopeSpans;
      break;
    case Frame::kScopeSpans:
      if (field == Field::kSpans && !is_object) next = Frame::kSpans;
      break;
    case Frame::kSpans:
      if (is_object) next = Frame::kSpan;
      break;
    default:
      break;
  }
  if (next == Frame::kResourceSpansArray) {
    skip_depth_ = 1;
    return;
  }
  frames_.push_back(next);
  switch (next) {
    case Frame::kResourceSpans:
      begin_resource_spans();
      break;
    case Frame::kAttribute:
      attribute_key_.clear();
      attribute_value_.reset();
      break;
    case Frame::kSpan:
      begin_span();
      break;
    default:
      break;
  }
}

void OtlpDocumentBuilder::end_container() {
  if (skip_depth_ > 0) {
    --skip_depth_;
    return;
  }
  field_ = Field::kNone;
  const Frame ending = frame();
  if (ending == Frame::kResourceSpansArray) return;  // finish() handles the array end
  switch (ending) {
    case Frame::kSpan:
      end_span();
      break;
    case Frame::kAttribute:
      end_attribute();
      break;
    case Frame::kResourceSpans:
      end_resource_spans();
      break;
    default:
      break;
  }
  frames_.pop_back();
}

void OtlpDocumentBuilder::begin_resource_spans() {
  resource_first_span_ = document_.spans.size();
  resource_has_service_ = false;
  resource_service_ = NameTable::kUnknownService;
}

void OtlpDocumentBuilder::end_resource_spans() {
  // The resource may follow its spans in the object: assign it now.
  const NameId service = resource_has_service_ ? resource_service_ : NameTable::kUnknownService;
  for (std::size_t i = resource_first_span_; i < document_.spans.size(); ++i) {
    document_.spans[i].service = service;
  }
  if (!resource_has_service_) stats_.spans_without_service += document_.spans.size() - resource_first_span_;
}

void OtlpDocumentBuilder::begin_span() {
  span_has_id_ = false;
  span_has_start_ = false;
  span_has_end_ = false;
  span_time_ok_ = true;
  span_group_ = kNoGroup;
  if (document_.spans.size() >= options_.max_spans_per_trace) {
    dropping_span_ = true;
  } else {
    document_.spans.emplace_back();
  }
}

void OtlpDocumentBuilder::end_span() {
  if (dropping_span_) {
    ++stats_.dropped_spans_over_limit;
    dropping_span_ = false;
    return;
  }
  Span& span = document_.spans.back();
  if (!span_has_id_) {
    ++stats_.dropped_spans_without_id;
    document_.spans.pop_back();
    return;
  }
  if (!span_time_ok_ || !span_has_start_ || !span_has_end_) {
    ++stats_.bad_timestamps;
    span.duration_ns = 0;
  } else {
    // Hostile (or saturated) times must not overflow: the difference
    // saturates too, and the analyzer clamps what is out of range.
    if (__builtin_sub_overflow(span_end_ns_, span.start_ns, &span.duration_ns)) {
      span.duration_ns = span_end_ns_ > span.start_ns ? std::numeric_limits<std::int64_t>::max()
                                                      : std::numeric_limits<std::int64_t>::min();
    }
  }
  // A span without a traceId is in the trace whose id is "".
  const std::uint32_t group = span_group_ != kNoGroup ? span_group_ : trace_group({});
  ++groups_[group].spans;
  span_groups_.push_back(group);
}

void OtlpDocumentBuilder::end_attribute() {
  if (!attribute_value_.present) return;
  // [kResourceSpansArray, kResourceSpans, kResource, kAttributes, kAttribute]
  if (frames_.size() == 5 && frames_[2] == Frame::kResource) {
    resource_attribute(attribute_key_, attribute_value_.scalar);
  } else if (in_span()) {
    span_attribute(attribute_key_, attribute_value_.scalar);
  }
}

void OtlpDocumentBuilder::resource_attribute(std::string_view key, const JsonScalar& value) {
  if (key == "service.name" && value.is_string()) {
    resource_service_ = names_.intern(value.text);
    resource_has_service_ = true;
  }
}

void OtlpDocumentBuilder::span_attribute(std::string_view key, const JsonScalar& value) {
  if (Span* span = open_span()) apply_span_tag(*span, classify_span_tag(key), value);
}

void OtlpDocumentBuilder::order_spans_by_trace() {
  // The order is that of a stable sort of the spans by traceId, without
  // comparing ids per span (measured: the per-span sort was a tenth of
  // reading OTLP): only the distinct ids are sorted, and the spans placed by
  // counting. A group without spans (its span was dropped) is no trace.
  group_order_.clear();
  for (std::uint32_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g].spans != 0) group_order_.push_back(g);
  }
  std::sort(group_order_.begin(), group_order_.end(), [&](std::uint32_t a, std::uint32_t b) {
    return document_.str(groups_[a].trace_id) < document_.str(groups_[b].trace_id);
  });
  std::uint32_t next = 0;
  for (const std::uint32_t g : group_order_) {
    groups_[g].next = next;
    next += groups_[g].spans;
  }
  const std::size_t n = document_.spans.size();
  order_.resize(n);
  for (std::size_t i = 0; i < n; ++i) order_[groups_[span_groups_[i]].next++] = static_cast<std::uint32_t>(i);
}

bool OtlpDocumentBuilder::finish(const TraceCallback& on_trace) {
  order_spans_by_trace();
  std::size_t begin = 0;
  for (const std::uint32_t g : group_order_) {
    const std::size_t end = begin + groups_[g].spans;
    out_.clear();
    out_.trace_id.assign(document_.str(groups_[g].trace_id));
    for (std::size_t k = begin; k < end; ++k) {
      Span span = document_.spans[order_[k]];
      span.span_id = out_.store(document_.str(span.span_id));
      span.parent_span_id = out_.store(document_.str(span.parent_span_id));
      out_.spans.push_back(span);
    }
    ++stats_.traces;
    ++stats_.otlp_traces;
    stats_.spans += out_.spans.size();
    if (!on_trace(out_)) return false;
    begin = end;
  }
  return true;
}

}  // namespace tailscope::trace::internal
