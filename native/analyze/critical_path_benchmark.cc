// tailscope-critpath-bench: throughput of the critical-path analyzer on a
// generated socialnet-shaped Jaeger JSON file (one trace per line, as
// tailscope's tracer and Jaeger's NDJSON exports write it; or a {"data": [...]}
// envelope), beside the floor it cannot beat on the same file: simdjson
// On-Demand visiting every span field the reader uses, and nothing else, from
// memory. Prints spans/s, MB/s and each figure's ratio to the floor (thread
// CPU time, best of --repeat runs, side by side in one process): the readers
// alone (simdjson path and the RapidJSON path), the algorithm alone (tree,
// critical path, delays, aggregation over traces already in memory) and end
// to end (read + parse + tree + critical path + aggregation + writing every
// trace's result as NDJSON). A performance artifact, not a test: it asserts
// nothing.
//
//   tailscope-critpath-bench [--spans N] [--spans-per-trace N] [--format ndjson|envelope]
//                            [--file PATH] [--repeat N] [--keep]
#include <simdjson.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "analyze/aggregate.h"
#include "analyze/analysis_json.h"
#include "analyze/critical_path.h"
#include "analyze/span_tree.h"
#include "analyze/trace_analyzer.h"
#include "core/result_writer.h"
#include "trace/trace_reader.h"

namespace {

using namespace tailscope;

struct Options {
  std::size_t spans = 1'000'000;
  std::size_t spans_per_trace = 30;  // a socialnet compose-post request is 20-40 spans
  bool envelope = false;             // {"data": [...]} instead of one trace per line
  std::string file = "/tmp/tailscope-critpath-bench.json";
  int repeat = 3;
  bool keep = false;
};

// Socialnet-shaped traces (DeathStarBench's services): a server root, nested
// client/server RPC pairs, a few tags per span, processes listed after the
// spans (as Jaeger exports them).
std::uint64_t write_synthetic_traces(const Options& o, std::size_t* traces_out) {
  std::FILE* f = std::fopen(o.file.c_str(), "wb");
  if (f == nullptr) {
    std::perror(o.file.c_str());
    std::exit(1);
  }
  static const char* kServices[] = {"nginx-web-server",     "compose-post-service", "text-service",
                                    "user-service",         "unique-id-service",    "media-service",
                                    "url-shorten-service",  "user-mention-service", "post-storage-service",
                                    "home-timeline-service"};
  std::mt19937_64 rng(42);
  std::string out;
  out.reserve(1 << 22);
  std::uint64_t bytes = 0;
  auto flush = [&](bool force) {
    if (out.size() > (1 << 21) || force) {
      std::fwrite(out.data(), 1, out.size(), f);
      bytes += out.size();
      out.clear();
    }
  };
  if (o.envelope) out += "{\"data\": [";
  const std::size_t traces = (o.spans + o.spans_per_trace - 1) / o.spans_per_trace;
  std::vector<std::int64_t> start(o.spans_per_trace), duration(o.spans_per_trace);
  std::vector<int> service(o.spans_per_trace);
  char buf[512];
  for (std::size_t t = 0; t < traces; ++t) {
    if (t > 0 && o.envelope) out += ',';
    std::snprintf(buf, sizeof buf, "{\"traceID\": \"%016llx\", \"spans\": [", static_cast<unsigned long long>(rng()));
    out += buf;
    const std::string trace_id(buf + 13, 16);
    const std::int64_t t0 = 1'700'000'000'000'000 + static_cast<std::int64_t>(t) * 10'000;
    for (std::size_t i = 0; i < o.spans_per_trace; ++i) {
      std::size_t parent = 0;
      if (i == 0) {
        start[0] = t0;
        duration[0] = 5'000 + static_cast<std::int64_t>(rng() % 20'000);
        service[0] = 0;
      } else {
        parent = i - 1 - rng() % std::min<std::size_t>(i, 4);
        const std::int64_t room = std::max<std::int64_t>(1, duration[parent]);
        start[i] = start[parent] + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(room / 2 + 1));
        duration[i] =
            1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(start[parent] + room - start[i]));
        service[i] = (i % 2 == 1) ? service[parent] : static_cast<int>(1 + rng() % 9);
      }
      if (i > 0) out += ',';
      std::snprintf(buf, sizeof buf,
                    "{\"traceID\": \"%s\", \"spanID\": \"%016zx\", \"flags\": 1, \"operationName\": \"%s_op%zu\", "
                    "\"references\": [",
                    trace_id.c_str(), i, kServices[service[i]], i % 3);
      out += buf;
      if (i > 0) {
        std::snprintf(buf, sizeof buf, "{\"refType\": \"CHILD_OF\", \"traceID\": \"%s\", \"spanID\": \"%016zx\"}",
                      trace_id.c_str(), parent);
        out += buf;
      }
      std::snprintf(buf, sizeof buf,
                    "], \"startTime\": %lld, \"duration\": %lld, \"tags\": ["
                    "{\"key\": \"span.kind\", \"type\": \"string\", \"value\": \"%s\"}, "
                    "{\"key\": \"component\", \"type\": \"string\", \"value\": \"thrift\"}, "
                    "{\"key\": \"internal.span.format\", \"type\": \"string\", \"value\": \"proto\"}], "
                    "\"logs\": [], \"processID\": \"p%d\", \"warnings\": null}",
                    static_cast<long long>(start[i]), static_cast<long long>(duration[i]),
                    i % 2 == 1 ? "client" : "server", service[i] + 1);
      out += buf;
    }
    out += "], \"processes\": {";
    for (int s = 0; s < 10; ++s) {
      std::snprintf(buf, sizeof buf,
                    "%s\"p%d\": {\"serviceName\": \"%s\", \"tags\": [{\"key\": \"hostname\", \"type\": \"string\", "
                    "\"value\": \"host-%d\"}]}",
                    s ? ", " : "", s + 1, kServices[s], s);
      out += buf;
    }
    out += "}, \"warnings\": null}\n";
    flush(false);
  }
  if (o.envelope) out += "], \"total\": 0, \"limit\": 0, \"offset\": 0, \"errors\": null}\n";
  flush(true);
  std::fclose(f);
  *traces_out = traces;
  return bytes;
}

// Thread CPU time (user + system, page faults included): on a small shared
// machine wall-clock time measures the neighbours as much as the code.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double seconds_of(const std::function<void()>& fn) {
  const double t0 = thread_cpu_seconds();
  fn();
  return thread_cpu_seconds() - t0;
}

double best_seconds(int repeat, const std::function<void()>& fn) {
  double best = 1e300;
  for (int i = 0; i < repeat; ++i) best = std::min(best, seconds_of(fn));
  return best;
}

namespace ondemand = simdjson::ondemand;

// What the floor visits of each value, summed so the compiler keeps the work.
struct FloorSink {
  std::uint64_t bytes = 0;
  std::int64_t numbers = 0;
  std::uint64_t spans = 0;
  void text(std::string_view s) { bytes += s.size(); }
};

void must(simdjson::error_code e) {
  if (e != simdjson::SUCCESS) {
    std::fprintf(stderr, "tailscope-critpath-bench: simdjson: %s\n", simdjson::error_message(e));
    std::exit(1);
  }
}

void visit_scalar(ondemand::value v, FloorSink& sink) {
  ondemand::json_type type;
  must(v.type().get(type));
  if (type == ondemand::json_type::string) {
    std::string_view s;
    must(v.get_string().get(s));
    sink.text(s);
  } else if (type == ondemand::json_type::number) {
    std::int64_t n = 0;
    if (v.get_int64().get(n) == simdjson::SUCCESS) sink.numbers += n;
  }
}

// Every field the Jaeger reader uses: trace id; per span its id, parent
// (references / parentSpanID), operation, times, tags (key and value),
// processID; per process its serviceName.
void visit_trace(ondemand::object trace, FloorSink& sink) {
  for (auto field : trace) {
    std::string_view key;
    must(field.unescaped_key().get(key));
    if (key == "traceID") {
      visit_scalar(field.value(), sink);
    } else if (key == "spans") {
      for (auto span_value : field.value().get_array()) {
        ++sink.spans;
        for (auto span_field : span_value.get_object()) {
          std::string_view k;
          must(span_field.unescaped_key().get(k));
          if (k == "spanID" || k == "operationName" || k == "startTime" || k == "duration" || k == "processID" ||
              k == "traceID" || k == "parentSpanID") {
            visit_scalar(span_field.value(), sink);
          } else if (k == "references") {
            for (auto ref : span_field.value().get_array()) {
              for (auto ref_field : ref.get_object()) {
                std::string_view rk;
                must(ref_field.unescaped_key().get(rk));
                if (rk == "refType" || rk == "spanID") visit_scalar(ref_field.value(), sink);
              }
            }
          } else if (k == "tags") {
            for (auto tag : span_field.value().get_array()) {
              for (auto tag_field : tag.get_object()) {
                std::string_view tk;
                must(tag_field.unescaped_key().get(tk));
                if (tk == "key" || tk == "value") visit_scalar(tag_field.value(), sink);
              }
            }
          }
        }
      }
    } else if (key == "processes") {
      for (auto process : field.value().get_object()) {
        std::string_view id;
        must(process.unescaped_key().get(id));
        sink.text(id);
        for (auto process_field : process.value().get_object()) {
          std::string_view pk;
          must(process_field.unescaped_key().get(pk));
          if (pk == "serviceName") visit_scalar(process_field.value(), sink);
        }
      }
    }
  }
}

// The parser-only floor: simdjson On-Demand over the file already in memory,
// visiting what the readers use and building nothing. NDJSON goes through
// iterate_many (simdjson's own multi-document stream); the envelope is one
// document.
std::uint64_t parser_floor(const simdjson::padded_string& text, bool envelope) {
  ondemand::parser parser;
  FloorSink sink;
  if (envelope) {
    ondemand::document doc;
    must(parser.iterate(text).get(doc));
    ondemand::array data;
    must(doc["data"].get_array().get(data));
    for (auto trace : data) visit_trace(trace.get_object(), sink);
  } else {
    ondemand::document_stream docs;
    must(parser.iterate_many(text).get(docs));
    for (auto doc : docs) {
      ondemand::object trace;
      must(doc.get_object().get(trace));
      visit_trace(trace, sink);
    }
  }
  if (sink.bytes == 0) std::exit(1);  // keeps the visit observable
  return sink.spans;
}

// One root and `children` overlapping siblings (each 20 ns, one every 5 ns).
trace::Trace fan_out_trace(trace::NameTable& names, int children) {
  trace::Trace t;
  t.trace_id = "fan-out";
  auto add = [&](std::string_view id, std::string_view parent, std::int64_t start_ns, std::int64_t duration_ns) {
    trace::Span s;
    s.span_id = t.store(id);
    if (!parent.empty()) {
      s.parent_span_id = t.store(parent);
      s.parent_ref = trace::RefType::kChildOf;
    }
    s.service = names.intern("svc");
    s.operation = names.intern("op");
    s.start_ns = start_ns;
    s.duration_ns = duration_ns;
    t.spans.push_back(s);
  };
  add("root", "", 0, 10 * static_cast<std::int64_t>(children));
  char id[24];  // snprintf, not std::string concatenation: gcc 12 -O3 warns falsely (-Wrestrict)
  for (int i = 0; i < children; ++i) {
    std::snprintf(id, sizeof id, "c%d", i);
    add(id, "root", 5 * static_cast<std::int64_t>(i), 20);
  }
  return t;
}

// Wide fan-outs: 20 000 overlapping siblings under one root, against the same
// number of spans as 400 fan-outs of 50. An algorithm quadratic in the number
// of siblings shows as a ratio far above 1. (This was a unit test with a
// time limit; a test asserts behaviour, the benchmark reports speed.)
void report_wide_fan_outs(int repeat) {
  constexpr int kWideChildren = 20'000;
  constexpr int kNarrowChildren = 50;
  constexpr int kNarrowTraces = kWideChildren / kNarrowChildren;
  trace::NameTable names;
  const trace::Trace wide = fan_out_trace(names, kWideChildren);
  const trace::Trace narrow = fan_out_trace(names, kNarrowChildren);
  std::printf("  wide fan-out: %d overlapping siblings vs %d traces of %d (same span count), critical path only\n",
              kWideChildren, kNarrowTraces, kNarrowChildren);
  for (const char* algorithm : {"capstone", "jaeger", "crisp"}) {
    auto cp_algorithm = analyze::make_critical_path_algorithm(algorithm);
    analyze::Warnings warnings;
    analyze::SpanTree wide_tree;
    wide_tree.build(wide, warnings);
    analyze::SpanTree narrow_tree;
    narrow_tree.build(narrow, warnings);
    analyze::CriticalPath path;
    const double wide_s = best_seconds(repeat, [&] { cp_algorithm->compute(wide_tree, path); });
    const double narrow_s = best_seconds(repeat, [&] {
      for (int i = 0; i < kNarrowTraces; ++i) cp_algorithm->compute(narrow_tree, path);
    });
    std::printf("    %-9s wide %8.3f ms  narrow %8.3f ms  wide/narrow %.2f\n", algorithm, wide_s * 1e3, narrow_s * 1e3,
                narrow_s > 0 ? wide_s / narrow_s : 0.0);
  }
}

// A bounded count from the command line; exits 2 naming the flag otherwise.
std::size_t parse_count(const std::string& flag, const std::string& text, std::size_t low, std::size_t high) {
  std::size_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < low || value > high) {
    std::fprintf(stderr, "tailscope-critpath-bench: %s expects an integer in [%zu, %zu], got '%s'\n", flag.c_str(), low,
                 high, text.c_str());
    std::exit(2);
  }
  return value;
}

void fail_read(const trace::ReadResult& r) {
  if (!r.ok) {
    std::fprintf(stderr, "tailscope-critpath-bench: %s\n", r.error.c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tailscope-critpath-bench: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--spans") {
      o.spans = parse_count(arg, value(), 1, 20'000'000);  // ~11 GB of JSON at most
    } else if (arg == "--spans-per-trace") {
      o.spans_per_trace = parse_count(arg, value(), 1, 1'000'000);
    } else if (arg == "--format") {
      const std::string format = value();
      if (format != "ndjson" && format != "envelope") {
        std::fprintf(stderr, "tailscope-critpath-bench: --format expects ndjson or envelope, got '%s'\n",
                     format.c_str());
        return 2;
      }
      o.envelope = format == "envelope";
    } else if (arg == "--file") {
      o.file = value();
    } else if (arg == "--repeat") {
      o.repeat = static_cast<int>(parse_count(arg, value(), 1, 100));
    } else if (arg == "--keep") {
      o.keep = true;
    } else {
      std::fprintf(stderr,
                   "usage: tailscope-critpath-bench [--spans N] [--spans-per-trace N] [--format ndjson|envelope] "
                   "[--file PATH] [--repeat N] [--keep]\n");
      return 2;
    }
  }

  std::size_t traces = 0;
  const std::uint64_t bytes = write_synthetic_traces(o, &traces);
  const std::size_t spans = traces * o.spans_per_trace;
  const double mb = static_cast<double>(bytes) / 1e6;
  const char* format = o.envelope ? "{\"data\": [...]} envelope" : "one trace per line";
  std::printf(
      "tailscope-critpath-bench: %zu spans in %zu traces, %.1f MB of Jaeger JSON (%s, %s); thread CPU time, best "
      "of %d\n",
      spans, traces, mb, format, o.file.c_str(), o.repeat);

  // The floor, from memory (the file is read before the clock starts).
  simdjson::padded_string text;
  if (simdjson::padded_string::load(o.file).get(text) != simdjson::SUCCESS) {
    std::fprintf(stderr, "tailscope-critpath-bench: cannot load %s\n", o.file.c_str());
    return 1;
  }
  if (parser_floor(text, o.envelope) != spans) {
    std::fprintf(stderr, "tailscope-critpath-bench: the floor did not visit every span\n");
    return 1;
  }
  const double floor_s = best_seconds(o.repeat, [&] { parser_floor(text, o.envelope); });
  text = simdjson::padded_string();
  auto report = [&](const char* what, double seconds) {
    std::printf("  %-52s %7.3f s  %6.2f M spans/s  %7.1f MB/s  %5.2fx floor\n", what, seconds,
                static_cast<double>(spans) / seconds / 1e6, mb / seconds, floor_s / seconds);
  };
  report("parser floor: simdjson On-Demand, used fields only", floor_s);

  trace::ReadStats read_stats;
  const double read_s = best_seconds(o.repeat, [&] {
    trace::NameTable names;
    const auto r = trace::read_trace_file(o.file, names, {}, [](trace::Trace&) { return true; });
    fail_read(r);
    read_stats = r.stats;
  });
  report("read traces (tailscope readers: simdjson path)", read_s);
  trace::ReadOptions rapidjson_only;
  rapidjson_only.use_simdjson = false;
  const double rapidjson_read_s = best_seconds(o.repeat, [&] {
    trace::NameTable names;
    fail_read(trace::read_trace_file(o.file, names, rapidjson_only, [](trace::Trace&) { return true; }));
  });
  report("read traces (RapidJSON SAX path, the fallback)", rapidjson_read_s);
  if (read_stats.values_rapidjson != 0) {
    std::printf("  note: %llu of %llu top-level values went to the RapidJSON path\n",
                static_cast<unsigned long long>(read_stats.values_rapidjson),
                static_cast<unsigned long long>(read_stats.values_rapidjson + read_stats.values_simdjson));
  }

  // The algorithm alone: the traces are read once, outside the clock.
  trace::NameTable held_names;
  std::vector<trace::Trace> held;
  held.reserve(traces);
  fail_read(trace::read_trace_file(o.file, held_names, {}, [&](trace::Trace& t) {
    held.push_back(t);
    return true;
  }));

  const std::string ndjson_path = o.file + ".critical_paths.ndjson";
  double capstone_s = 0;
  double capstone_algorithm_s = 0;
  for (const char* algorithm : {"capstone", "jaeger", "crisp"}) {
    const double algorithm_s = best_seconds(o.repeat, [&] {
      analyze::TraceAnalyzer analyzer(analyze::make_critical_path_algorithm(algorithm), {});
      analyze::CriticalPathAggregator aggregator(held_names, {});
      for (const trace::Trace& t : held) aggregator.add(analyzer.analyze(t));
      if (aggregator.traces_analyzed() != traces) std::exit(1);
    });
    const double s = best_seconds(o.repeat, [&] {
      trace::NameTable names;
      analyze::TraceAnalyzer analyzer(analyze::make_critical_path_algorithm(algorithm), {});
      analyze::CriticalPathAggregator aggregator(names, {});
      AtomicFileWriter artifacts(ndjson_path);
      analyze::TraceAnalysisJsonWriter trace_json(names, {});
      std::string line;
      const auto r = trace::read_trace_file(o.file, names, {}, [&](trace::Trace& t) {
        const analyze::TraceAnalysis& analysis = analyzer.analyze(t);
        aggregator.add(analysis);
        line.clear();
        trace_json.append(analysis, line);
        line += '\n';
        artifacts.append(line);
        return true;
      });
      fail_read(r);
      artifacts.commit();
      if (aggregator.traces_analyzed() != traces) std::exit(1);
    });
    if (std::strcmp(algorithm, "capstone") == 0) {
      capstone_s = s;
      capstone_algorithm_s = algorithm_s;
    }
    report((std::string("algorithm alone (tree+path+delays+aggregate), ") + algorithm).c_str(), algorithm_s);
    report((std::string("end to end (read..write NDJSON), ") + algorithm).c_str(), s);
  }
  std::remove(ndjson_path.c_str());
  report_wide_fan_outs(o.repeat);
  const double spans_per_s = static_cast<double>(spans) / capstone_s;
  const double ratio = floor_s / capstone_s;
  std::printf("  end to end (capstone) %.2f M spans/s = %.2fx the parser floor, %.2fx the RapidJSON reader alone\n",
              spans_per_s / 1e6, ratio, rapidjson_read_s / capstone_s);
  std::printf("  targets (issue 14): >= 5.00 M spans/s end to end on one core -> %s; >= 0.80x floor -> %s\n",
              spans_per_s >= 5e6 ? "met" : "not met", ratio >= 0.8 ? "met" : "not met");
  std::printf(
      "{\"bench\": \"tailscope-critpath\", \"format\": \"%s\", \"spans\": %zu, \"bytes\": %llu, "
      "\"floor_spans_per_s\": %.0f, \"read_spans_per_s\": %.0f, \"rapidjson_read_spans_per_s\": %.0f, "
      "\"algorithm_spans_per_s\": %.0f, \"end_to_end_spans_per_s\": %.0f, \"end_to_end_mb_per_s\": %.1f, "
      "\"ratio_to_floor\": %.3f}\n",
      o.envelope ? "envelope" : "ndjson", spans, static_cast<unsigned long long>(bytes),
      static_cast<double>(spans) / floor_s, static_cast<double>(spans) / read_s,
      static_cast<double>(spans) / rapidjson_read_s, static_cast<double>(spans) / capstone_algorithm_s, spans_per_s,
      mb / capstone_s, ratio);
  if (!o.keep) std::remove(o.file.c_str());
  return 0;
}
