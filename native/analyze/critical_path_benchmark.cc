// tailscope-critpath-bench: throughput of the critical-path analyzer on a
// generated socialnet-shaped trace file (trace/testing/synthetic_traces.h) —
// Jaeger JSON, one trace per line, as tailscope's tracer and Jaeger's NDJSON
// exports write it (or a {"data": [...]} envelope), and OTLP JSON, one
// resourceSpans document per line as the collector's file exporter writes it —
// beside the floor it cannot beat on the same file: simdjson On-Demand
// visiting every span field the reader uses, and nothing else, from memory. Prints spans/s, MB/s and each figure's
// ratio to the floor (thread CPU time, best of --repeat runs, side by side in one process): the readers alone (simdjson
// path and the RapidJSON path), the algorithm alone (tree, critical path, delays, aggregation over traces already in
// memory) and end to end (read + parse + tree + critical path + aggregation + writing every trace's result as NDJSON),
// and splits the end-to-end time into parse (the floor), trace building, algorithm and output, each measured. A
// performance artifact, not a test: it asserts nothing.
//
//   tailscope-critpath-bench [--spans N] [--spans-per-trace N] [--format ndjson|envelope|otlp]...
//                            [--file PREFIX] [--repeat N] [--pairs N] [--cpu N] [--keep]
//                            [--per-trace full|index]
//                            [--phases floor,read,algorithm,output,end_to_end]   (for callgrind, below)
#include <sched.h>
#include <simdjson.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "analyze/aggregate.h"
#include "analyze/analysis_json.h"
#include "analyze/critical_path.h"
#include "analyze/critpath_run.h"
#include "analyze/span_tree.h"
#include "analyze/trace_analyzer.h"
#include "core/clock.h"
#include "core/latency_summary.h"
#include "core/result_writer.h"
#include "trace/internal/simdjson_in_place.h"
#include "trace/internal/span_tags.h"
#include "trace/testing/synthetic_traces.h"
#include "trace/trace_reader.h"

namespace {

using namespace tailscope;

using trace::testing::SyntheticFormat;

const char* format_flag(SyntheticFormat f) {
  switch (f) {
    case SyntheticFormat::kJaegerNdjson:
      return "ndjson";
    case SyntheticFormat::kJaegerEnvelope:
      return "envelope";
    case SyntheticFormat::kOtlpNdjson:
      return "otlp";
  }
  return "";
}

struct Options {
  trace::testing::SyntheticTraceOptions traces;
  std::vector<SyntheticFormat> formats;  // default: Jaeger one trace per line, then OTLP
  std::string file = "/tmp/tailscope-critpath-bench";
  int repeat = 3;
  // Alternated pairs of the engine at 1 and N jobs (and of the floor on 1 and
  // N threads): their per-pair ratios, median and interval.
  int pairs = 8;
  int cpu = -1;  // -1: CPU 1 when this process may run there (one core, as `taskset -c 1`)
  bool keep = false;
  // The engine's --per-trace: full (every trace's result + the index, as
  // tailscope-critpath --artifacts writes by default) or index (the index
  // only, as `tailscope analyze` runs it).
  std::string per_trace = "full";
};

// Thread CPU time (user + system, page faults included): on a small shared
// machine wall-clock time measures the neighbours as much as the code.
double thread_cpu_seconds() { return static_cast<double>(thread_cpu_ns()) * 1e-9; }

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

// Members, keys and strings as the readers read them, through their own code
// (trace/internal/simdjson_in_place.h): each field in place, and text as a
// view into the input unless it holds an escape. With a copy of every field
// and simdjson's unescaping copy of every key and string, this floor measured
// slower than the reader itself.
using trace::internal::in_place;
void visit_scalar(ondemand::value& v, FloorSink& sink) {
  ondemand::json_type type;
  must(v.type().get(type));
  if (type == ondemand::json_type::string) {
    sink.text(trace::internal::string_of(v));
  } else if (type == ondemand::json_type::number) {
    std::int64_t n = 0;
    if (v.get_int64().get(n) == simdjson::SUCCESS) sink.numbers += n;
  }
}

// A Jaeger tag or an OTLP attribute: its key, and its value only when the
// reader uses that key (span.kind, error, the probe's delays, …:
// classify_span_tag; a resource's service.name) — the readers leave the
// other values unparsed, so a floor that parsed them would be no floor (it
// measured slower than the reader). A value before its key is visited.
void visit_tag(ondemand::object tag, FloorSink& sink, bool resource = false) {
  std::string_view key;
  bool has_key = false;
  for (auto field_result : tag) {
    ondemand::field& field = in_place(field_result);
    const std::string_view k = trace::internal::key_of(field);
    if (k == "key") {
      key = trace::internal::string_of(field.value());
      sink.text(key);
      has_key = true;
    } else if (k == "value") {
      const bool used = resource ? key == "service.name"
                                 : trace::internal::classify_span_tag(key) != trace::internal::SpanTag::kOther;
      if (has_key && !used) continue;  // left unparsed, as the readers do
      ondemand::value& v = field.value();
      ondemand::json_type type;
      must(v.type().get(type));
      if (type == ondemand::json_type::object) {
        for (auto any_result : v.get_object()) visit_scalar(in_place(any_result).value(), sink);  // {"stringValue": …}
      } else {
        visit_scalar(v, sink);
      }
    }
  }
}

// Every field the Jaeger reader uses: trace id; per span its id, parent
// (references / parentSpanID), operation, times, tags (keys, and the values
// of those it uses), processID; per process its serviceName.
void visit_trace(ondemand::object trace, FloorSink& sink) {
  for (auto field_result : trace) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = trace::internal::key_of(field);
    if (key == "traceID") {
      visit_scalar(field.value(), sink);
    } else if (key == "spans") {
      for (auto span_value : field.value().get_array()) {
        ++sink.spans;
        for (auto span_field_result : span_value.get_object()) {
          ondemand::field& span_field = in_place(span_field_result);
          const std::string_view k = trace::internal::key_of(span_field);
          if (k == "spanID" || k == "operationName" || k == "startTime" || k == "duration" || k == "processID" ||
              k == "traceID" || k == "parentSpanID") {
            visit_scalar(span_field.value(), sink);
          } else if (k == "references") {
            for (auto ref : span_field.value().get_array()) {
              for (auto ref_field_result : ref.get_object()) {
                ondemand::field& ref_field = in_place(ref_field_result);
                const std::string_view rk = trace::internal::key_of(ref_field);
                if (rk == "refType" || rk == "spanID") visit_scalar(ref_field.value(), sink);
              }
            }
          } else if (k == "tags") {
            for (auto tag : span_field.value().get_array()) visit_tag(tag.get_object(), sink);
          }
        }
      }
    } else if (key == "processes") {
      for (auto process_result : field.value().get_object()) {
        ondemand::field& process = in_place(process_result);
        const std::string_view id = trace::internal::key_of(process);
        sink.text(id);
        for (auto process_field_result : process.value().get_object()) {
          ondemand::field& process_field = in_place(process_field_result);
          const std::string_view pk = trace::internal::key_of(process_field);
          if (pk == "serviceName") visit_scalar(process_field.value(), sink);
        }
      }
    }
  }
}

// An OTLP attribute list: every key, and the values the reader uses.
void visit_attributes(ondemand::array attributes, FloorSink& sink, bool resource) {
  for (auto attribute : attributes) visit_tag(attribute.get_object(), sink, resource);
}

// Every field the OTLP reader uses: per resource its attributes; per span its
// trace id, id, parent, name, kind, times, attributes and status code.
void visit_otlp_document(ondemand::object document, FloorSink& sink) {
  for (auto field_result : document) {
    ondemand::field& field = in_place(field_result);
    const std::string_view key = trace::internal::key_of(field);
    if (key != "resourceSpans") continue;
    for (auto resource_spans : field.value().get_array()) {
      for (auto rs_field_result : resource_spans.get_object()) {
        ondemand::field& rs_field = in_place(rs_field_result);
        const std::string_view rk = trace::internal::key_of(rs_field);
        if (rk == "resource") {
          for (auto resource_field_result : rs_field.value().get_object()) {
            ondemand::field& resource_field = in_place(resource_field_result);
            const std::string_view k = trace::internal::key_of(resource_field);
            if (k == "attributes") visit_attributes(resource_field.value().get_array(), sink, true);
          }
        } else if (rk == "scopeSpans") {
          for (auto scope_spans : rs_field.value().get_array()) {
            for (auto ss_field_result : scope_spans.get_object()) {
              ondemand::field& ss_field = in_place(ss_field_result);
              const std::string_view sk = trace::internal::key_of(ss_field);
              if (sk != "spans") continue;
              for (auto span : ss_field.value().get_array()) {
                ++sink.spans;
                for (auto span_field_result : span.get_object()) {
                  ondemand::field& span_field = in_place(span_field_result);
                  const std::string_view k = trace::internal::key_of(span_field);
                  if (k == "traceId" || k == "spanId" || k == "parentSpanId" || k == "name" || k == "kind" ||
                      k == "startTimeUnixNano" || k == "endTimeUnixNano") {
                    visit_scalar(span_field.value(), sink);
                  } else if (k == "attributes") {
                    visit_attributes(span_field.value().get_array(), sink, false);
                  } else if (k == "status") {
                    for (auto status_field_result : span_field.value().get_object()) {
                      ondemand::field& status_field = in_place(status_field_result);
                      const std::string_view stk = trace::internal::key_of(status_field);
                      if (stk == "code") visit_scalar(status_field.value(), sink);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

// The parser-only floor: simdjson On-Demand over the file already in memory,
// visiting what the readers use and building nothing. One document per line
// goes through iterate_many (simdjson's own multi-document stream); the
// envelope is one document. One core, as the readers: iterate_many would
// otherwise run stage 1 of each next batch on a thread of its own, which
// this thread's CPU time (and callgrind's --toggle-collect, per thread) does
// not count — measured, that left ~1 800 of a Jaeger span's ~5 800
// instructions out of the floor.
std::uint64_t parser_floor(const simdjson::padded_string& text, SyntheticFormat format) {
  ondemand::parser parser;
#ifdef SIMDJSON_THREADS_ENABLED
  parser.threaded = false;
#endif
  FloorSink sink;
  try {
    if (format == SyntheticFormat::kJaegerEnvelope) {
      ondemand::document doc;
      must(parser.iterate(text).get(doc));
      ondemand::array data;
      must(doc["data"].get_array().get(data));
      for (auto trace : data) visit_trace(trace.get_object(), sink);
    } else {
      ondemand::document_stream docs;
      must(parser.iterate_many(text).get(docs));
      for (auto doc : docs) {
        ondemand::object object;
        must(doc.get_object().get(object));
        if (format == SyntheticFormat::kOtlpNdjson) {
          visit_otlp_document(object, sink);
        } else {
          visit_trace(object, sink);
        }
      }
    }
  } catch (const trace::internal::GiveUp&) {  // in_place(), key_of(), string_of(): a member that does not parse
    std::fprintf(stderr, "tailscope-critpath-bench: simdjson: a member of the generated file does not parse\n");
    std::exit(1);
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

// Pins the process to one CPU: the figures are per core (`taskset -c N`).
// Without --cpu, CPU 1 when allowed, else unpinned (said in the output: the
// figures are thread CPU time, so still per core, but migrations are not
// excluded). An explicit --cpu that cannot be honoured exits 2.
// The CPU set this process started with, before pin_to_cpu(): the --jobs
// figures run the engine on all of it.
cpu_set_t g_startup_cpus;

// The engine itself (analyze/critpath_run.h: chunks, workers, the in-order
// merge, the result document and critical_paths.ndjson) in wall time,
// unpinned over the startup CPU set.
struct EngineSeconds {
  double wall = 0;
  double cpu = 0;  // every thread of the process
};
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
// One run, on an artifacts folder emptied before the clock starts: replacing
// the last run's critical_paths.ndjson (~40 % of the input) made a run ~10 %
// slower on the development VM, whichever the job count.
EngineSeconds engine_run(const std::string& path, std::size_t jobs, const std::string& per_trace) {
  analyze::CritpathOptions options;
  options.inputs = {path};
  options.artifacts_dir = path + ".artifacts";
  options.per_trace = per_trace;
  std::filesystem::remove_all(options.artifacts_dir);
  std::string argv0 = "tailscope-critpath-bench";
  char* argv[] = {argv0.data(), nullptr};
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_seconds();
  const analyze::CritpathDocument doc = analyze::run_critpath(options, jobs, 1, argv);
  // The engine prints the document: its text is part of the run.
  const std::string text = analyze::critpath_document_text(doc, 2);
  const EngineSeconds s{std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                        process_cpu_seconds() - cpu0};
  if (doc.document["summary"]["traces"].get<std::uint64_t>() == 0 || text.empty()) std::exit(1);
  return s;
}

// Runs `first` and `second` in alternated order (AB, BA, AB, ...) `pairs`
// times over the startup CPU set, so that a slow stretch of a shared machine
// lands on both sides of a pair; returns each pair's two results.
template <typename Result, typename Run>
std::vector<std::pair<Result, Result>> alternated(int pairs, Run run) {
  cpu_set_t pinned;
  sched_getaffinity(0, sizeof pinned, &pinned);
  sched_setaffinity(0, sizeof g_startup_cpus, &g_startup_cpus);
  std::vector<std::pair<Result, Result>> out;
  for (int i = 0; i < pairs; ++i) {
    std::pair<Result, Result> r;
    if (i % 2 == 0) {
      r.first = run(0);
      r.second = run(1);
    } else {
      r.second = run(1);
      r.first = run(0);
    }
    out.push_back(r);
  }
  sched_setaffinity(0, sizeof pinned, &pinned);
  return out;
}

// The median of per-pair ratios and its distribution-free 95 % interval
// (order statistics, core/latency_summary.h: the ranks that bound the median
// of n samples, whatever their distribution; none under 6 pairs), and the
// verdict against a target: met when the whole interval reaches it, not met
// when none of it does, undecided otherwise.
struct PairedRatio {
  std::size_t pairs = 0;
  double median = 0;
  std::optional<std::pair<double, double>> interval;
  std::string unavailable;  // why there is no interval
};
PairedRatio paired_ratio(std::vector<double> ratios) {
  PairedRatio r;
  r.pairs = ratios.size();
  if (ratios.empty()) return r;
  std::sort(ratios.begin(), ratios.end());
  const std::size_t n = ratios.size();
  r.median = n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  if (const auto ranks = order_statistic_ranks(static_cast<std::int64_t>(n), 0.5)) {
    r.interval = std::pair{ratios[static_cast<std::size_t>(ranks->lower_rank - 1)],
                           ratios[static_cast<std::size_t>(ranks->upper_rank - 1)]};
  } else {
    r.unavailable = "fewer than " + std::to_string(min_samples_for_interval(0.5)) + " pairs";
  }
  return r;
}
std::string verdict(const PairedRatio& r, double target) {
  if (!r.interval) return "undecided (no interval: " + r.unavailable + ")";
  if (r.interval->first >= target) return "met";
  if (r.interval->second < target) return "not met";
  return "undecided at " + std::to_string(r.pairs) + " pairs";
}
std::string interval_text(const PairedRatio& r) {
  if (!r.interval) return "95 % interval unavailable: " + r.unavailable;
  char buf[64];
  std::snprintf(buf, sizeof buf, "95 %% interval [%.2f - %.2f]", r.interval->first, r.interval->second);
  return buf;
}
std::string interval_json(const PairedRatio& r) {
  if (!r.interval) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%.3f, %.3f]", r.interval->first, r.interval->second);
  return buf;
}

// This machine's own ceiling for N jobs: the parse floor on N threads at
// once, each over the whole file in memory, against one thread, in wall time
// over the startup CPU set, per alternated pair. No shared state, no I/O, no
// merge: an engine's N jobs / (N x 1 job) is not expected to beat it here
// (a VM's vCPUs, shared caches, memory bandwidth, other tenants).
PairedRatio floor_parallel_ceiling(const simdjson::padded_string& text, SyntheticFormat format, std::size_t jobs,
                                   int pairs) {
  const auto runs = alternated<double>(pairs, [&](int side) {
    const std::size_t threads = side == 0 ? 1 : jobs;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::jthread> running;
    for (std::size_t t = 0; t < threads; ++t) running.emplace_back([&] { parser_floor(text, format); });
    running.clear();  // joins
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  std::vector<double> ratios;
  for (const auto& [one, n] : runs) ratios.push_back(one / n);
  return paired_ratio(ratios);
}

// One job of the engine against the floor, per alternated pair, both in
// wall time on the startup CPU set (the floor on one thread over the file in
// memory, the engine reading it from the page cache): engine spans/s / floor
// spans/s = floor wall / engine wall. The best-of figures above come from
// different minutes, and on the development VM the floor alone moved 2.8-3.7 M
// spans/s between runs of one build: paired, a slow stretch lands on both
// sides.
PairedRatio one_job_over_floor(const simdjson::padded_string& text, SyntheticFormat format, const std::string& path,
                               const std::string& per_trace, int pairs) {
  const auto runs = alternated<double>(pairs, [&](int side) {
    if (side == 1) return engine_run(path, 1, per_trace).wall;
    const auto t0 = std::chrono::steady_clock::now();
    parser_floor(text, format);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  std::vector<double> ratios;
  for (const auto& [floor, engine] : runs) ratios.push_back(floor / engine);
  return paired_ratio(ratios);
}

int pin_to_cpu(int requested) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool have_mask = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
  const int cpu = requested >= 0 ? requested : 1;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (have_mask && CPU_ISSET(cpu, &allowed) && sched_setaffinity(0, sizeof one, &one) == 0) return cpu;
  if (requested >= 0) {
    std::fprintf(stderr, "tailscope-critpath-bench: --cpu %d: cannot run there (not in this process's CPU set)\n",
                 requested);
    std::exit(2);
  }
  return -1;
}

// Everything for one input format: the file, the floor, the readers, the
// algorithm, the output and end to end, and the split of the end-to-end time.
void run_format(const Options& o, SyntheticFormat format, int cpu) {
  const std::string path = o.file + "-" + format_flag(format) + ".json";
  const trace::testing::SyntheticTraceFile file = trace::testing::write_synthetic_trace_file(o.traces, format, path);
  const std::size_t traces = file.traces;
  const std::uint64_t bytes = file.bytes;
  const std::size_t spans = traces * o.traces.spans_per_trace;
  const double mb = static_cast<double>(bytes) / 1e6;
  const char* description = format == SyntheticFormat::kJaegerEnvelope ? "Jaeger JSON, {\"data\": [...]} envelope"
                            : format == SyntheticFormat::kOtlpNdjson
                                ? "OTLP JSON, one resourceSpans document of 10 traces per line"
                                : "Jaeger JSON, one trace per line";
  std::printf("\n%s: %zu spans in %zu traces, %.1f MB (%s); thread CPU time, best of %d, %s\n", description, spans,
              traces, mb, path.c_str(), o.repeat,
              cpu >= 0 ? ("pinned to CPU " + std::to_string(cpu)).c_str()
                       : "not pinned (CPU 1 is not in this process's CPU set)");

  // The floor, from memory (the file is read before the clock starts).
  simdjson::padded_string text;
  if (simdjson::padded_string::load(path).get(text) != simdjson::SUCCESS) {
    std::fprintf(stderr, "tailscope-critpath-bench: cannot load %s\n", path.c_str());
    std::exit(1);
  }
  if (parser_floor(text, format) != spans) {
    std::fprintf(stderr, "tailscope-critpath-bench: the floor did not visit every span\n");
    std::exit(1);
  }
  const double floor_s = best_seconds(o.repeat, [&] { parser_floor(text, format); });
  // For the engine's --jobs figures below: what N threads reach here at all.
  const std::size_t jobs = std::max(1, CPU_COUNT(&g_startup_cpus));
  const PairedRatio ceiling = floor_parallel_ceiling(text, format, jobs, o.pairs);
  const PairedRatio one_job_ratio = one_job_over_floor(text, format, path, o.per_trace, o.pairs);
  text = simdjson::padded_string();
  auto report = [&](const char* what, double seconds) {
    std::printf("  %-52s %7.3f s  %6.2f M spans/s  %7.1f MB/s  %5.2fx floor\n", what, seconds,
                static_cast<double>(spans) / seconds / 1e6, mb / seconds, floor_s / seconds);
  };
  report("parser floor: simdjson On-Demand, used fields only", floor_s);

  trace::ReadStats read_stats;
  const double read_s = best_seconds(o.repeat, [&] {
    trace::NameTable names;
    const auto r = trace::read_trace_file(path, names, {}, [](trace::Trace&) { return true; });
    fail_read(r);
    read_stats = r.stats;
  });
  report("read traces (tailscope readers: simdjson path)", read_s);
  trace::ReadOptions rapidjson_only;
  rapidjson_only.use_simdjson = false;
  const double rapidjson_read_s = best_seconds(o.repeat, [&] {
    trace::NameTable names;
    fail_read(trace::read_trace_file(path, names, rapidjson_only, [](trace::Trace&) { return true; }));
  });
  report("read traces (RapidJSON SAX path, the fallback)", rapidjson_read_s);
  if (read_stats.values_rapidjson != 0) {
    std::printf("  note: %llu of %llu top-level values went to the RapidJSON path\n",
                static_cast<unsigned long long>(read_stats.values_rapidjson),
                static_cast<unsigned long long>(read_stats.values_rapidjson + read_stats.values_simdjson));
  }

  // The algorithm alone, and with the NDJSON output: the traces are read
  // once, outside the clock.
  trace::NameTable held_names;
  std::vector<trace::Trace> held;
  held.reserve(traces);
  fail_read(trace::read_trace_file(path, held_names, {}, [&](trace::Trace& t) {
    held.push_back(t);
    return true;
  }));

  const std::string ndjson_path = path + ".critical_paths.ndjson";
  double capstone_s = 0;
  double capstone_algorithm_s = 0;
  double capstone_output_s = 0;
  for (const char* algorithm : {"capstone", "jaeger", "crisp"}) {
    const double algorithm_s = best_seconds(o.repeat, [&] {
      analyze::TraceAnalyzer analyzer(analyze::make_critical_path_algorithm(algorithm), {});
      analyze::CriticalPathAggregator aggregator(held_names, {});
      for (const trace::Trace& t : held) aggregator.add(analyzer.analyze(t));
      if (aggregator.traces_analyzed() != traces) std::exit(1);
    });
    // The output alone: every trace's result written as the engine writes
    // it (chunks into the atomic file writer), over analyses redone outside
    // the clock's difference: (analysis + output) - analysis.
    const double with_output_s = best_seconds(o.repeat, [&] {
      analyze::TraceAnalyzer analyzer(analyze::make_critical_path_algorithm(algorithm), {});
      analyze::CriticalPathAggregator aggregator(held_names, {});
      AtomicFileWriter artifacts(ndjson_path);
      analyze::TraceAnalysisJsonWriter trace_json(held_names, {});
      const analyze::JsonChunkSink sink = [&](std::string_view chunk) { artifacts.append(chunk); };
      for (const trace::Trace& t : held) {
        const analyze::TraceAnalysis& analysis = analyzer.analyze(t);
        aggregator.add(analysis);
        trace_json.write(analysis, sink);
        artifacts.append("\n");
      }
      artifacts.commit();
    });
    const double s = best_seconds(o.repeat, [&] {
      trace::NameTable names;
      analyze::TraceAnalyzer analyzer(analyze::make_critical_path_algorithm(algorithm), {});
      analyze::CriticalPathAggregator aggregator(names, {});
      AtomicFileWriter artifacts(ndjson_path);
      analyze::TraceAnalysisJsonWriter trace_json(names, {});
      const analyze::JsonChunkSink sink = [&](std::string_view chunk) { artifacts.append(chunk); };
      const auto r = trace::read_trace_file(path, names, {}, [&](trace::Trace& t) {
        const analyze::TraceAnalysis& analysis = analyzer.analyze(t);
        aggregator.add(analysis);
        trace_json.write(analysis, sink);
        artifacts.append("\n");
        return true;
      });
      fail_read(r);
      artifacts.commit();
      if (aggregator.traces_analyzed() != traces) std::exit(1);
    });
    if (std::strcmp(algorithm, "capstone") == 0) {
      capstone_s = s;
      capstone_algorithm_s = algorithm_s;
      capstone_output_s = std::max(0.0, with_output_s - algorithm_s);
    }
    report((std::string("algorithm alone (tree+path+delays+aggregate), ") + algorithm).c_str(), algorithm_s);
    report((std::string("algorithm + NDJSON output, ") + algorithm).c_str(), with_output_s);
    report((std::string("end to end (read..write NDJSON), ") + algorithm).c_str(), s);
  }
  std::remove(ndjson_path.c_str());
  const double spans_per_s = static_cast<double>(spans) / capstone_s;
  const double ratio = floor_s / capstone_s;
  // Where the end-to-end time goes, each part measured above: parse = the
  // floor, build = the reader beyond the floor (cutting values out, walking
  // them, building traces, interning names), algorithm, output; "other" is
  // what the parts do not add up to (cache effects of running them together).
  const double build_s = std::max(0.0, read_s - floor_s);
  const double other_s = capstone_s - floor_s - build_s - capstone_algorithm_s - capstone_output_s;
  auto share = [&](double part) { return 100.0 * part / capstone_s; };
  std::printf(
      "  end to end (capstone) %.3f s: parse (floor) %.3f s %.0f%%, build traces %.3f s %.0f%%, algorithm %.3f s "
      "%.0f%%, output %.3f s %.0f%%, other %+.3f s %+.0f%%\n",
      capstone_s, floor_s, share(floor_s), build_s, share(build_s), capstone_algorithm_s, share(capstone_algorithm_s),
      capstone_output_s, share(capstone_output_s), other_s, share(other_s));
  std::printf("  end to end (capstone) %.2f M spans/s = %.2fx the parser floor, %.2fx the RapidJSON reader alone\n",
              spans_per_s / 1e6, ratio, rapidjson_read_s / capstone_s);
  std::printf(
      "  targets (docs/critical-path.md): >= 5.00 M spans/s end to end on one core -> %s; >= 0.80x floor -> %s\n",
      spans_per_s >= 5e6 ? "met" : "not met", ratio >= 0.8 ? "met" : "not met");
  // What the ratio target leaves for everything after the parse, from this run: end to end at
  // 0.8x the floor may take 1.25x the floor's time, so reading (parse + build) plus the
  // algorithm and the output must fit in it.
  const double budget_s = floor_s / 0.8;
  std::printf(
      "  0.80x floor leaves %.3f s for everything: the reader alone took %.3f s (%.2fx that budget), "
      "algorithm %.3f s and output %.3f s more%s\n",
      budget_s, read_s, read_s / budget_s, capstone_algorithm_s, capstone_output_s,
      read_s >= budget_s ? " (reading alone is over it)" : "");
  // The engine on N cores against one: tailscope-critpath --jobs 1 and
  // --jobs N (N = the CPUs this process started with), in alternated pairs.
  const auto runs =
      alternated<EngineSeconds>(o.pairs, [&](int side) { return engine_run(path, side == 0 ? 1 : jobs, o.per_trace); });
  EngineSeconds one_job = runs[0].first, n_jobs = runs[0].second;  // the best of each side
  std::vector<double> wall_ratios, cpu_ratios;
  for (const auto& [one, n] : runs) {
    one_job.wall = std::min(one_job.wall, one.wall);
    one_job.cpu = std::min(one_job.cpu, one.cpu);
    n_jobs.wall = std::min(n_jobs.wall, n.wall);
    n_jobs.cpu = std::min(n_jobs.cpu, n.cpu);
    wall_ratios.push_back(one.wall / (static_cast<double>(jobs) * n.wall));
    cpu_ratios.push_back(one.cpu / n.cpu);
  }
  const PairedRatio scaling = paired_ratio(wall_ratios);
  // What N jobs cost beyond one in CPU time: the wall-time scaling they reach
  // when N CPUs are free for them (on a shared machine the wall time is not).
  const PairedRatio cpu_efficiency = paired_ratio(cpu_ratios);
  const double floor_spans_per_s = static_cast<double>(spans) / floor_s;
  const double one_job_spans_per_s = static_cast<double>(spans) / one_job.wall;
  const double n_jobs_spans_per_s = static_cast<double>(spans) / n_jobs.wall;
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 1) load[0] = -1;
  std::printf(
      "  the engine (tailscope-critpath: read, analyse, merge, document + NDJSON, --per-trace %s), %d alternated "
      "pairs of 1 and %zu jobs on the %zu CPUs this process started with (load average %.2f):\n",
      o.per_trace.c_str(), o.pairs, jobs, jobs, load[0]);
  std::printf("    parse floor (above, one core)   %6.2f M spans/s\n", floor_spans_per_s / 1e6);
  std::printf("    --jobs 1    best wall %6.3f s  %6.2f M spans/s  %5.2fx floor   CPU %6.3f s\n", one_job.wall,
              one_job_spans_per_s / 1e6, one_job_spans_per_s / floor_spans_per_s, one_job.cpu);
  std::printf("    --jobs %-3zu  best wall %6.3f s  %6.2f M spans/s  %5.2fx floor   CPU %6.3f s\n", jobs, n_jobs.wall,
              n_jobs_spans_per_s / 1e6, n_jobs_spans_per_s / floor_spans_per_s, n_jobs.cpu);
  std::printf(
      "    %zu jobs / (%zu x 1 job), per pair (wall): median %.2f, %s; CPU time of 1 job / CPU time of %zu jobs: "
      "median %.2f, %s (the wall ratio with %zu idle CPUs)\n",
      jobs, jobs, scaling.median, interval_text(scaling).c_str(), jobs, cpu_efficiency.median,
      interval_text(cpu_efficiency).c_str(), jobs);
  std::printf(
      "    this machine's ceiling: the parse floor on %zu threads at once / (%zu x 1 thread), per pair: median %.2f, "
      "%s (wall; no I/O, no merge); the engine reaches %.2f of it\n",
      jobs, jobs, ceiling.median, interval_text(ceiling).c_str(), scaling.median / ceiling.median);
  std::printf(
      "    1 job / the parse floor, per pair (wall, the floor on one thread alternated with the engine at 1 job): "
      "median %.2f, %s\n",
      one_job_ratio.median, interval_text(one_job_ratio).c_str());
  const std::string one_job_verdict = verdict(one_job_ratio, 0.6);
  std::printf("  targets (issue 30): 1 job >= 0.60x floor -> %s (paired); %zu jobs >= 0.85 x %zu x 1 job -> %s\n",
              one_job_verdict.c_str(), jobs, jobs, verdict(scaling, 0.85).c_str());
  std::printf(
      "{\"bench\": \"tailscope-critpath\", \"format\": \"%s\", \"cpu\": %d, \"spans\": %zu, \"bytes\": %llu, "
      "\"floor_spans_per_s\": %.0f, \"read_spans_per_s\": %.0f, \"rapidjson_read_spans_per_s\": %.0f, "
      "\"algorithm_spans_per_s\": %.0f, \"end_to_end_spans_per_s\": %.0f, \"end_to_end_mb_per_s\": %.1f, "
      "\"ratio_to_floor\": %.3f, \"seconds\": {\"parse\": %.4f, \"build\": %.4f, \"algorithm\": %.4f, "
      "\"output\": %.4f, \"end_to_end\": %.4f}, \"jobs\": %zu, \"pairs\": %d, \"per_trace\": \"%s\", "
      "\"engine_1_job_spans_per_s\": %.0f, "
      "\"engine_n_jobs_spans_per_s\": %.0f, \"n_jobs_over_n_times_1_job\": %.3f, "
      "\"n_jobs_over_n_times_1_job_ci\": %s, \"n_jobs_verdict\": \"%s\", \"cpu_efficiency\": %.3f, "
      "\"cpu_efficiency_ci\": %s, \"floor_parallel_ceiling\": %.3f, \"floor_parallel_ceiling_ci\": %s, "
      "\"interval_unavailable\": %s, \"one_job_over_floor\": %.3f, \"one_job_over_floor_ci\": %s, "
      "\"one_job_verdict\": \"%s\", \"load_average\": %.2f}\n",
      format_flag(format), cpu, spans, static_cast<unsigned long long>(bytes), static_cast<double>(spans) / floor_s,
      static_cast<double>(spans) / read_s, static_cast<double>(spans) / rapidjson_read_s,
      static_cast<double>(spans) / capstone_algorithm_s, spans_per_s, mb / capstone_s, ratio, floor_s, build_s,
      capstone_algorithm_s, capstone_output_s, capstone_s, jobs, o.pairs, o.per_trace.c_str(), one_job_spans_per_s,
      n_jobs_spans_per_s, scaling.median, interval_json(scaling).c_str(), verdict(scaling, 0.85).c_str(),
      cpu_efficiency.median, interval_json(cpu_efficiency).c_str(), ceiling.median, interval_json(ceiling).c_str(),
      scaling.interval ? "null" : ("\"" + scaling.unavailable + "\"").c_str(), one_job_ratio.median,
      interval_json(one_job_ratio).c_str(), one_job_verdict.c_str(), load[0]);
  std::filesystem::remove_all(path + ".artifacts");
  if (!o.keep) std::remove(path.c_str());
}

// --phases NAME[,NAME…]: each phase once over the generated file, in its own
// function (noinline: callgrind's --toggle-collect names them), for
// scripts/critpath-callgrind, which prints instructions per span per phase.
// Instruction counts do not depend on the machine's load, so a before and an
// after compare across runs and branches, where CPU time on a shared machine
// moves by ±15 %. The phases are the bench's split of the end-to-end time:
//   floor       the parser floor (simdjson, used fields only, from memory)
//   read        the reader: file reads, scanning, simdjson, building traces,
//               interning (build = read - floor)
//   algorithm   tree, critical path, delays, aggregation (capstone)
//   output      writing every trace's result as NDJSON into the file writer
//               (collected only inside phase_output_write, per trace)
//   end_to_end  read + algorithm + output, as run_format() times it
// The file stays (`PREFIX-FORMAT.json`): the script runs the engine on it too.
#define CRITPATH_PHASE __attribute__((noinline))

// The file writer as a chunk sink (a named type, for the same reason as EndToEndStep).
struct OutputSink {
  AtomicFileWriter& artifacts;
  void operator()(std::string_view chunk) const { artifacts.append(chunk); }
};

CRITPATH_PHASE std::uint64_t phase_floor(const simdjson::padded_string& text, SyntheticFormat format) {
  return parser_floor(text, format);
}

struct SpanCounter {
  std::uint64_t* spans;
  bool operator()(trace::Trace& t) const {
    *spans += t.spans.size();
    return true;
  }
};

CRITPATH_PHASE std::uint64_t phase_read(const std::string& path) {
  trace::NameTable names;
  std::uint64_t spans = 0;
  fail_read(trace::read_trace_file(path, names, {}, SpanCounter{&spans}));
  return spans;
}

CRITPATH_PHASE std::uint64_t phase_algorithm(const trace::NameTable& names, const std::vector<trace::Trace>& held) {
  analyze::TraceAnalyzer analyzer(analyze::make_critical_path_algorithm("capstone"), {});
  analyze::CriticalPathAggregator aggregator(names, {});
  for (const trace::Trace& t : held) aggregator.add(analyzer.analyze(t));
  return aggregator.traces_analyzed();
}

CRITPATH_PHASE void phase_output_write(analyze::TraceAnalysisJsonWriter& writer, const analyze::TraceAnalysis& analysis,
                                       const analyze::JsonChunkSink& sink, AtomicFileWriter& artifacts) {
  writer.write(analysis, sink);
  artifacts.append("\n");
}

void phase_output(const trace::NameTable& names, const std::vector<trace::Trace>& held, const std::string& out_path) {
  analyze::TraceAnalyzer analyzer(analyze::make_critical_path_algorithm("capstone"), {});
  AtomicFileWriter artifacts(out_path);
  analyze::TraceAnalysisJsonWriter trace_json(names, {});
  const analyze::JsonChunkSink sink = OutputSink{artifacts};
  for (const trace::Trace& t : held) phase_output_write(trace_json, analyzer.analyze(t), sink, artifacts);
  artifacts.commit();
  std::remove(out_path.c_str());
}

// The end-to-end callback, a named type: a lambda inside phase_end_to_end
// would carry the phase's name, and callgrind's --toggle-collect would switch
// collection off again on entering it.
struct EndToEndStep {
  analyze::TraceAnalyzer& analyzer;
  analyze::CriticalPathAggregator& aggregator;
  analyze::TraceAnalysisJsonWriter& trace_json;
  const analyze::JsonChunkSink& sink;
  AtomicFileWriter& artifacts;
  bool operator()(trace::Trace& t) const {
    const analyze::TraceAnalysis& analysis = analyzer.analyze(t);
    aggregator.add(analysis);
    trace_json.write(analysis, sink);
    artifacts.append("\n");
    return true;
  }
};

CRITPATH_PHASE std::uint64_t phase_end_to_end(const std::string& path, const std::string& out_path) {
  trace::NameTable names;
  analyze::TraceAnalyzer analyzer(analyze::make_critical_path_algorithm("capstone"), {});
  analyze::CriticalPathAggregator aggregator(names, {});
  AtomicFileWriter artifacts(out_path);
  analyze::TraceAnalysisJsonWriter trace_json(names, {});
  const analyze::JsonChunkSink sink = OutputSink{artifacts};
  fail_read(trace::read_trace_file(path, names, {}, EndToEndStep{analyzer, aggregator, trace_json, sink, artifacts}));
  artifacts.commit();
  std::remove(out_path.c_str());
  return aggregator.traces_analyzed();
}

int run_phases(const Options& o, std::string_view names) {
  auto has = [&](std::string_view phase) {
    for (std::size_t at = 0; at <= names.size();) {
      std::size_t comma = names.find(',', at);
      if (comma == std::string_view::npos) comma = names.size();
      if (names.substr(at, comma - at) == phase || names.substr(at, comma - at) == "all") return true;
      at = comma + 1;
    }
    return false;
  };
  for (SyntheticFormat format : o.formats) {
    const std::string path = o.file + "-" + format_flag(format) + ".json";
    const std::string out_path = path + ".critical_paths.ndjson";
    const trace::testing::SyntheticTraceFile file = trace::testing::write_synthetic_trace_file(o.traces, format, path);
    const std::size_t spans = file.traces * o.traces.spans_per_trace;
    std::printf("%s %zu spans %zu traces %s\n", format_flag(format), spans, file.traces, path.c_str());
    if (has("floor")) {
      simdjson::padded_string text;
      if (simdjson::padded_string::load(path).get(text) != simdjson::SUCCESS) return 1;
      if (phase_floor(text, format) != spans) return 1;
    }
    if (has("read") && phase_read(path) != spans) return 1;
    if (has("algorithm") || has("output")) {
      trace::NameTable held_names;
      std::vector<trace::Trace> held;
      fail_read(trace::read_trace_file(path, held_names, {}, [&](trace::Trace& t) {
        held.push_back(t);
        return true;
      }));
      if (has("algorithm") && phase_algorithm(held_names, held) != file.traces) return 1;
      if (has("output")) phase_output(held_names, held, out_path);
    }
    if (has("end_to_end") && phase_end_to_end(path, out_path) != file.traces) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string phases;  // --phases: run those once each (for callgrind), nothing else
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
      o.traces.spans = parse_count(arg, value(), 1, 20'000'000);  // ~11 GB of JSON at most
    } else if (arg == "--spans-per-trace") {
      o.traces.spans_per_trace = parse_count(arg, value(), 1, 1'000'000);
    } else if (arg == "--format") {
      const std::string format = value();
      if (format == "ndjson") {
        o.formats.push_back(SyntheticFormat::kJaegerNdjson);
      } else if (format == "envelope") {
        o.formats.push_back(SyntheticFormat::kJaegerEnvelope);
      } else if (format == "otlp") {
        o.formats.push_back(SyntheticFormat::kOtlpNdjson);
      } else {
        std::fprintf(stderr, "tailscope-critpath-bench: --format expects ndjson, envelope or otlp, got '%s'\n",
                     format.c_str());
        return 2;
      }
    } else if (arg == "--file") {
      o.file = value();
    } else if (arg == "--repeat") {
      o.repeat = static_cast<int>(parse_count(arg, value(), 1, 100));
    } else if (arg == "--pairs") {
      o.pairs = static_cast<int>(parse_count(arg, value(), 1, 100));
    } else if (arg == "--cpu") {
      o.cpu = static_cast<int>(parse_count(arg, value(), 0, CPU_SETSIZE - 1));
    } else if (arg == "--keep") {
      o.keep = true;
    } else if (arg == "--per-trace") {
      o.per_trace = value();
      if (o.per_trace != "full" && o.per_trace != "index") {
        std::fprintf(stderr, "tailscope-critpath-bench: --per-trace expects full or index, got '%s'\n",
                     o.per_trace.c_str());
        return 2;
      }
    } else if (arg == "--phases") {
      phases = value();
    } else {
      std::fprintf(stderr,
                   "usage: tailscope-critpath-bench [--spans N] [--spans-per-trace N] "
                   "[--format ndjson|envelope|otlp]... [--file PREFIX] [--repeat N] [--pairs N] [--cpu N] [--keep] "
                   "[--per-trace full|index] "
                   "[--phases floor,read,algorithm,output,end_to_end]\n");
      return 2;
    }
  }
  if (o.formats.empty()) o.formats = {SyntheticFormat::kJaegerNdjson, SyntheticFormat::kOtlpNdjson};
  if (!phases.empty()) {
    try {
      return run_phases(o, phases);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tailscope-critpath-bench: %s\n", e.what());
      return 1;
    }
  }
  CPU_ZERO(&g_startup_cpus);
  sched_getaffinity(0, sizeof g_startup_cpus, &g_startup_cpus);
  const int cpu = pin_to_cpu(o.cpu);
  std::printf("tailscope-critpath-bench: %zu spans in traces of %zu, socialnet-shaped\n", o.traces.spans,
              o.traces.spans_per_trace);
  try {
    for (SyntheticFormat format : o.formats) run_format(o, format, cpu);
  } catch (const std::exception& e) {  // the trace file could not be written
    std::fprintf(stderr, "tailscope-critpath-bench: %s\n", e.what());
    return 1;
  }
  report_wide_fan_outs(o.repeat);
  return 0;
}
