#include "trace/testing/synthetic_traces.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

namespace tailscope::trace::testing {
namespace {

const char* const kServices[] = {"nginx-web-server",     "compose-post-service", "text-service",
                                 "user-service",         "unique-id-service",    "media-service",
                                 "url-shorten-service",  "user-mention-service", "post-storage-service",
                                 "home-timeline-service"};
constexpr int kServiceCount = 10;

// The text is handed on once it passes this size: memory stays bounded
// however many spans are asked for.
constexpr std::size_t kChunkBytes = std::size_t{1} << 21;

struct GeneratedSpan {
  std::size_t parent;  // index in the trace; the root's is its own (0)
  std::int64_t start_us;
  std::int64_t duration_us;
  int service;
};

std::size_t trace_count(const SyntheticTraceOptions& o) {
  return (o.spans + o.spans_per_trace - 1) / o.spans_per_trace;
}

// One trace's spans: the root, then each span a child of one of the four
// before it, starting inside its parent and ending before it; client spans
// (odd) stay on their parent's service, server spans (even) go to another.
void generate_trace(std::mt19937_64& rng, std::size_t t, std::size_t spans_per_trace,
                    std::vector<GeneratedSpan>& spans) {
  spans.resize(spans_per_trace);
  const std::int64_t t0 = 1'700'000'000'000'000 + static_cast<std::int64_t>(t) * 10'000;
  for (std::size_t i = 0; i < spans_per_trace; ++i) {
    GeneratedSpan& s = spans[i];
    if (i == 0) {
      s = GeneratedSpan{0, t0, 5'000 + static_cast<std::int64_t>(rng() % 20'000), 0};
      continue;
    }
    s.parent = i - 1 - rng() % std::min<std::size_t>(i, 4);
    const GeneratedSpan& p = spans[s.parent];
    const std::int64_t room = std::max<std::int64_t>(1, p.duration_us);
    s.start_us = p.start_us + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(room / 2 + 1));
    s.duration_us = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(p.start_us + room - s.start_us));
    s.service = (i % 2 == 1) ? p.service : static_cast<int>(1 + rng() % 9);
  }
}

// Jaeger JSON, processes listed after the spans (as Jaeger exports them).
std::size_t write_jaeger_traces(const SyntheticTraceOptions& o, bool envelope, const SyntheticTextSink& sink) {
  std::mt19937_64 rng(42);
  std::string out;
  out.reserve(2 * kChunkBytes);
  auto flush = [&](bool force) {
    if (out.size() > kChunkBytes || force) {
      sink(out);
      out.clear();
    }
  };
  if (envelope) out += "{\"data\": [";
  const std::size_t traces = trace_count(o);
  std::vector<GeneratedSpan> spans;
  char buf[512];
  for (std::size_t t = 0; t < traces; ++t) {
    if (t > 0 && envelope) out += ',';
    std::snprintf(buf, sizeof buf, "{\"traceID\": \"%016llx\", \"spans\": [", static_cast<unsigned long long>(rng()));
    out += buf;
    const std::string trace_id(buf + 13, 16);
    generate_trace(rng, t, o.spans_per_trace, spans);
    for (std::size_t i = 0; i < spans.size(); ++i) {
      const GeneratedSpan& s = spans[i];
      if (i > 0) out += ',';
      std::snprintf(buf, sizeof buf,
                    "{\"traceID\": \"%s\", \"spanID\": \"%016zx\", \"flags\": 1, \"operationName\": \"%s_op%zu\", "
                    "\"references\": [",
                    trace_id.c_str(), i, kServices[s.service], i % 3);
      out += buf;
      if (i > 0) {
        std::snprintf(buf, sizeof buf, "{\"refType\": \"CHILD_OF\", \"traceID\": \"%s\", \"spanID\": \"%016zx\"}",
                      trace_id.c_str(), s.parent);
        out += buf;
      }
      std::snprintf(buf, sizeof buf,
                    "], \"startTime\": %lld, \"duration\": %lld, \"tags\": ["
                    "{\"key\": \"span.kind\", \"type\": \"string\", \"value\": \"%s\"}, "
                    "{\"key\": \"component\", \"type\": \"string\", \"value\": \"thrift\"}, "
                    "{\"key\": \"internal.span.format\", \"type\": \"string\", \"value\": \"proto\"}], "
                    "\"logs\": [], \"processID\": \"p%d\", \"warnings\": null}",
                    static_cast<long long>(s.start_us), static_cast<long long>(s.duration_us),
                    i % 2 == 1 ? "client" : "server", s.service + 1);
      out += buf;
    }
    out += "], \"processes\": {";
    for (int s = 0; s < kServiceCount; ++s) {
      std::snprintf(buf, sizeof buf,
                    "%s\"p%d\": {\"serviceName\": \"%s\", \"tags\": [{\"key\": \"hostname\", \"type\": \"string\", "
                    "\"value\": \"host-%d\"}]}",
                    s ? ", " : "", s + 1, kServices[s], s);
      out += buf;
    }
    out += "}, \"warnings\": null}\n";
    flush(false);
  }
  if (envelope) out += "], \"total\": 0, \"limit\": 0, \"offset\": 0, \"errors\": null}\n";
  flush(true);
  return traces;
}

// OTLP JSON as the collector's file exporter writes it: one
// {"resourceSpans": [...]} document per line, each a batch of
// kOtlpTracesPerDocument traces, spans grouped by service; times in ns as
// strings, kind as a number (protobuf's JSON mapping).
std::size_t write_otlp_traces(const SyntheticTraceOptions& o, const SyntheticTextSink& sink) {
  std::mt19937_64 rng(42);
  std::string out;
  out.reserve(2 * kChunkBytes);
  const std::size_t traces = trace_count(o);
  std::vector<std::vector<GeneratedSpan>> batch(kOtlpTracesPerDocument);
  std::vector<std::string> trace_ids(kOtlpTracesPerDocument);
  char buf[512];
  for (std::size_t first = 0; first < traces; first += kOtlpTracesPerDocument) {
    const std::size_t count = std::min(kOtlpTracesPerDocument, traces - first);
    for (std::size_t k = 0; k < count; ++k) {
      std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                    static_cast<unsigned long long>(rng()));
      trace_ids[k] = buf;
      generate_trace(rng, first + k, o.spans_per_trace, batch[k]);
    }
    out += "{\"resourceSpans\": [";
    bool first_resource = true;
    for (int service = 0; service < kServiceCount; ++service) {
      bool first_span = true;
      for (std::size_t k = 0; k < count; ++k) {
        for (std::size_t i = 0; i < batch[k].size(); ++i) {
          const GeneratedSpan& s = batch[k][i];
          if (s.service != service) continue;
          if (first_span) {
            std::snprintf(buf, sizeof buf,
                          "%s{\"resource\": {\"attributes\": [{\"key\": \"service.name\", \"value\": "
                          "{\"stringValue\": \"%s\"}}, {\"key\": \"host.name\", \"value\": {\"stringValue\": "
                          "\"host-%d\"}}]}, \"scopeSpans\": [{\"scope\": {\"name\": \"tailscope\"}, \"spans\": [",
                          first_resource ? "" : ", ", kServices[service], service);
            out += buf;
            first_resource = false;
          } else {
            out += ", ";
          }
          first_span = false;
          std::snprintf(buf, sizeof buf, "{\"traceId\": \"%s\", \"spanId\": \"%016zx\", ", trace_ids[k].c_str(), i);
          out += buf;
          if (i > 0) {
            std::snprintf(buf, sizeof buf, "\"parentSpanId\": \"%016zx\", ", s.parent);
            out += buf;
          }
          const long long start_ns = static_cast<long long>(s.start_us) * 1000;
          std::snprintf(buf, sizeof buf,
                        "\"name\": \"%s_op%zu\", \"kind\": %d, \"startTimeUnixNano\": \"%lld\", "
                        "\"endTimeUnixNano\": \"%lld\", \"attributes\": ["
                        "{\"key\": \"component\", \"value\": {\"stringValue\": \"thrift\"}}, "
                        "{\"key\": \"internal.span.format\", \"value\": {\"stringValue\": \"proto\"}}], "
                        "\"status\": {}}",
                        kServices[s.service], i % 3, i % 2 == 1 ? 3 : 2, start_ns,
                        start_ns + static_cast<long long>(s.duration_us) * 1000);
          out += buf;
        }
      }
      if (!first_span) out += "]}]}";
    }
    out += "]}\n";
    if (out.size() > kChunkBytes) {
      sink(out);
      out.clear();
    }
  }
  sink(out);
  return traces;
}

}  // namespace

std::size_t write_synthetic_traces(const SyntheticTraceOptions& options, SyntheticFormat format,
                                   const SyntheticTextSink& sink) {
  if (options.spans_per_trace == 0) throw std::invalid_argument("synthetic traces: spans_per_trace must be > 0");
  switch (format) {
    case SyntheticFormat::kJaegerNdjson:
      return write_jaeger_traces(options, false, sink);
    case SyntheticFormat::kJaegerEnvelope:
      return write_jaeger_traces(options, true, sink);
    case SyntheticFormat::kOtlpNdjson:
      return write_otlp_traces(options, sink);
  }
  return 0;
}

SyntheticTraceFile write_synthetic_trace_file(const SyntheticTraceOptions& options, SyntheticFormat format,
                                              const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error(path + ": " + std::strerror(errno));
  SyntheticTraceFile written;
  bool failed = false;
  try {
    written.traces = write_synthetic_traces(options, format, [&](std::string_view chunk) {
      failed = failed || std::fwrite(chunk.data(), 1, chunk.size(), f) != chunk.size();
      written.bytes += chunk.size();
    });
  } catch (...) {
    std::fclose(f);
    throw;
  }
  const int err = errno;
  if (std::fclose(f) != 0 || failed)
    throw std::runtime_error(path + ": cannot write the synthetic traces: " + std::strerror(failed ? err : errno));
  return written;
}

std::string synthetic_trace_text(const SyntheticTraceOptions& options, SyntheticFormat format, std::size_t* traces) {
  std::string text;
  const std::size_t n = write_synthetic_traces(options, format, [&](std::string_view chunk) { text += chunk; });
  if (traces != nullptr) *traces = n;
  return text;
}

}  // namespace tailscope::trace::testing
