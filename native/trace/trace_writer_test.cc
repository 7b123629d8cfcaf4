#include "trace/trace_writer.h"

#include <gtest/gtest.h>

#include <vector>

#include "trace/trace_reader.h"

namespace tailscope::trace {
namespace {

Trace sample_trace(NameTable& names) {
  Trace t;
  t.trace_id = "abc123";
  Span root;
  root.span_id = t.store("r");
  root.service = names.intern("frontend");
  root.operation = names.intern("GET /home");
  root.kind = SpanKind::kServer;
  root.start_ns = 1'000'000;
  root.duration_ns = 9'000'000;
  t.spans.push_back(root);
  Span child;
  child.span_id = t.store("c");
  child.parent_span_id = t.store("r");
  child.parent_ref = RefType::kChildOf;
  child.service = names.intern("backend \"quoted\"");
  child.operation = names.intern("rpc");
  child.kind = SpanKind::kClient;
  child.error = true;
  child.start_ns = 2'000'000;
  child.duration_ns = 3'000'000;
  child.probe_scheduling_delay_ns = 1500;
  child.probe_join_delay_ns = 700;
  child.cache = CacheResult::kMiss;
  t.spans.push_back(child);
  Span async;
  async.span_id = t.store("f");
  async.parent_span_id = t.store("c");
  async.parent_ref = RefType::kFollowsFrom;
  async.service = root.service;
  async.operation = names.intern("send");
  async.kind = SpanKind::kProducer;
  async.start_ns = 4'000'000;
  async.duration_ns = 1'000;
  t.spans.push_back(async);
  return t;
}

std::vector<Trace> read_back(const std::string& text, NameTable& names) {
  std::vector<Trace> traces;
  auto result = read_trace_text(text, names, {}, [&](Trace& t) {
    traces.push_back(t);
    return true;
  });
  EXPECT_TRUE(result.ok) << result.error << "\n" << text;
  return traces;
}

void expect_same_spans(const Trace& want, const Trace& got, const NameTable& names, bool same_ref_types) {
  ASSERT_EQ(got.trace_id, want.trace_id);
  ASSERT_EQ(got.spans.size(), want.spans.size());
  for (const Span& w : want.spans) {
    const Span* g = nullptr;
    for (const Span& s : got.spans) {
      if (got.span_id(s) == want.span_id(w)) g = &s;
    }
    ASSERT_NE(g, nullptr) << want.span_id(w);
    EXPECT_EQ(names.name(g->service), names.name(w.service));
    EXPECT_EQ(names.name(g->operation), names.name(w.operation));
    EXPECT_EQ(g->start_ns, w.start_ns);
    EXPECT_EQ(g->duration_ns, w.duration_ns);
    EXPECT_EQ(g->kind, w.kind);
    EXPECT_EQ(g->error, w.error);
    EXPECT_EQ(got.parent_span_id(*g), want.parent_span_id(w));
    if (same_ref_types) {
      EXPECT_EQ(g->parent_ref, w.parent_ref);
    }
    EXPECT_EQ(g->probe_scheduling_delay_ns, w.probe_scheduling_delay_ns);
    EXPECT_EQ(g->probe_join_delay_ns, w.probe_join_delay_ns);
    EXPECT_EQ(g->cache, w.cache);
  }
}

TEST(TraceWriterTest, JaegerJsonRoundTrips) {
  NameTable names;
  const Trace trace = sample_trace(names);
  const std::vector<Trace> in{trace, trace};
  auto doc = read_back(jaeger_json_document(in, names), names);
  ASSERT_EQ(doc.size(), 2u);
  expect_same_spans(trace, doc[0], names, true);
  auto line = read_back(jaeger_json_trace(trace, names), names);
  ASSERT_EQ(line.size(), 1u);
  expect_same_spans(trace, line[0], names, true);
}

TEST(TraceWriterTest, OtlpJsonRoundTrips) {
  NameTable names;
  const Trace trace = sample_trace(names);
  auto got = read_back(otlp_json_document(std::span<const Trace>(&trace, 1), names), names);
  ASSERT_EQ(got.size(), 1u);
  // OTLP has no FOLLOWS_FROM: every parent reads back as CHILD_OF.
  expect_same_spans(trace, got[0], names, false);
}

TEST(TraceWriterTest, WritesValidUtf8ForInvalidIds) {
  NameTable names;
  Trace t;
  t.trace_id = "bad\xff";
  Span s;
  s.span_id = t.store("id\xfe");
  t.spans.push_back(s);
  const std::string text = jaeger_json_trace(t, names);
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_TRUE(is_valid_utf8(otlp_json_document(std::span<const Trace>(&t, 1), names)));
}

}  // namespace
}  // namespace tailscope::trace
