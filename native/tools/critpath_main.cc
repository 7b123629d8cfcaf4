// tailscope-critpath: per-request critical paths of Jaeger / OTLP traces, with
// the capstone, Jaeger UI or CRISP model; delays, bottlenecks and what-ifs.
// One JSON document (schema tailscope.critpath/1: the result/1 envelope with
// measurements, plus the critical-path sections; docs/critical-path.md) on
// stdout or atomically to --out; every trace's result as NDJSON under
// --artifacts; progress as JSON lines on stderr.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "analyze/aggregate.h"
#include "analyze/analysis_json.h"
#include "analyze/timeline_json.h"
#include "analyze/trace_analyzer.h"
#include "core/result_writer.h"
#include "trace/trace_reader.h"

namespace {

using namespace tailscope;

constexpr const char* kEngine = "tailscope-critpath";
constexpr const char* kSchema = "tailscope.critpath/1";

struct Options {
  std::string algorithm = "capstone";
  std::string out;
  std::string artifacts_dir;
  std::vector<std::string> what_if_services;
  bool what_if_no_delays = false;
  std::uint64_t max_traces = 0;  // 0: all
  std::size_t top = 20;
  std::size_t doc_traces = 100;
  // Bytes of per-trace results the document may hold: it stays summary-sized
  // however large a trace is (one 1 M-span trace's result is ~500 MB; the
  // artifacts NDJSON has every trace whole).
  std::size_t doc_bytes = 1 << 20;
  std::size_t max_spans_per_trace = 1'000'000;
  double stagger_window_us = 1000;  // analyze/delays.h kDefaultStaggerWindowNs
  std::vector<std::string> timeline_traces;
  bool span_dump = false;
  std::vector<std::string> inputs;
};

// A failure attributable to one input (a trace file, the artifacts folder,
// --out): the message names it. Exit status 1.
class InputError : public std::runtime_error {
 public:
  InputError(const std::string& input, const std::string& message) : std::runtime_error(input + ": " + message) {}
};

// The temporary file of the artifact being streamed, for the signal handler:
// an interrupted run (Ctrl-C, the driver's timeout) must not leave a large
// .tmp file behind. Set while the writer owning the file is alive.
std::atomic<const char*> temp_to_remove{nullptr};

extern "C" void remove_temp_and_reraise(int signal_number) {
  if (const char* temp = temp_to_remove.load()) ::unlink(temp);
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

// Publishes a writer's temporary file to the signal handler for its lifetime
// (declared after the writer, so it is withdrawn before the writer goes).
class TempFileRegistration {
 public:
  explicit TempFileRegistration(const AtomicFileWriter* writer) {
    if (writer != nullptr) temp_to_remove.store(writer->temp_path());
  }
  ~TempFileRegistration() { temp_to_remove.store(nullptr); }
  TempFileRegistration(const TempFileRegistration&) = delete;
  TempFileRegistration& operator=(const TempFileRegistration&) = delete;
};

// --span-dump: every analyzed trace's spans and per-trace analysis (the timeline
// form, analyze/timeline_json.h) as DIR/spans.ndjson, so the driver's topology
// inference (tailscope topology from-traces) reads the spans through this
// engine's readers instead of parsing Jaeger/OTLP a second time.
class SpanDump {
 public:
  explicit SpanDump(const std::string& artifacts_dir) : path_(artifacts_dir + "/spans.ndjson") {
    try {
      writer_ = std::make_unique<AtomicFileWriter>(path_);
    } catch (const std::exception& e) {
      throw InputError(artifacts_dir, std::string("cannot write artifacts: ") + e.what());
    }
  }
  // False (with `error` set) when the file cannot be written.
  bool add(const analyze::TraceAnalysis& analysis, const trace::NameTable& names,
           const std::vector<analyze::WhatIfScenario>& scenarios, std::string& error) {
    if (!analysis.analyzed) return true;  // no repaired tree: nothing to infer from
    line_.clear();
    analyze::append_trace_timeline_json(analysis, names, scenarios, line_);
    line_ += '\n';
    try {
      writer_->append(line_);
    } catch (const std::exception& e) {
      error = e.what();
      return false;
    }
    ++traces_;
    return true;
  }
  void commit() {
    try {
      writer_->commit();
    } catch (const std::exception& e) {
      throw InputError(path_, std::string("cannot write artifacts: ") + e.what());
    }
  }
  const AtomicFileWriter* writer() const { return writer_.get(); }
  const std::string& path() const { return path_; }
  std::uint64_t traces() const { return traces_; }

 private:
  std::string path_;
  std::unique_ptr<AtomicFileWriter> writer_;
  std::string line_;
  std::uint64_t traces_ = 0;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

const char* format_name(const trace::ReadStats& stats) {
  if (stats.jaeger_traces && stats.otlp_traces) return "mixed";
  if (stats.otlp_traces) return "otlp";
  if (stats.jaeger_traces) return "jaeger";
  return "empty";
}

nlohmann::ordered_json run(const Options& options, int argc, char** argv) {
  const auto started = std::chrono::steady_clock::now();

  trace::NameTable names;
  std::vector<analyze::WhatIfScenario> scenarios;
  for (const std::string& service : options.what_if_services) {
    scenarios.push_back(analyze::WhatIfScenario{"remove:" + service, {names.intern(service)}, false});
  }
  if (options.what_if_no_delays) scenarios.push_back(analyze::WhatIfScenario{"no_delays", {}, true});

  analyze::TraceAnalyzer analyzer(analyze::make_critical_path_algorithm(options.algorithm), scenarios);
  const auto stagger_window_ns = static_cast<std::int64_t>(options.stagger_window_us * 1000.0);
  analyzer.set_delay_options(&names, stagger_window_ns);
  analyze::AggregateOptions aggregate_options;
  aggregate_options.top_n = options.top;
  aggregate_options.stagger_window_ns = stagger_window_ns;
  analyze::CriticalPathAggregator aggregator(names, scenarios, aggregate_options);

  std::unique_ptr<AtomicFileWriter> artifacts;
  std::string artifacts_path;
  if (!options.artifacts_dir.empty()) {
    try {
      ensure_directory(options.artifacts_dir);
      artifacts_path = options.artifacts_dir + "/critical_paths.ndjson";
      artifacts = std::make_unique<AtomicFileWriter>(artifacts_path);
    } catch (const std::exception& e) {
      throw InputError(options.artifacts_dir, std::string("cannot write artifacts: ") + e.what());
    }
  }
  const TempFileRegistration registration(artifacts.get());
  // Every span of the traces picked for a timeline (--timeline-trace).
  std::unique_ptr<AtomicFileWriter> timelines;
  std::string timelines_path;
  const std::unordered_set<std::string> timeline_ids(options.timeline_traces.begin(), options.timeline_traces.end());
  std::uint64_t timelines_written = 0;
  if (!timeline_ids.empty()) {
    timelines_path = options.artifacts_dir + "/timelines.ndjson";
    try {
      timelines = std::make_unique<AtomicFileWriter>(timelines_path);
    } catch (const std::exception& e) {
      throw InputError(options.artifacts_dir, std::string("cannot write artifacts: ") + e.what());
    }
  }

  analyze::TraceAnalysisJsonWriter trace_json(names, scenarios);
  std::unique_ptr<SpanDump> span_dump;
  if (options.span_dump) span_dump = std::make_unique<SpanDump>(options.artifacts_dir);

  std::vector<std::string> doc_traces;
  std::size_t doc_bytes_used = 0;
  std::uint64_t omitted_over_doc_bytes = 0;
  std::unordered_set<std::uint64_t> seen_trace_ids;
  std::string line;
  std::uint64_t traces = 0;
  std::uint64_t spans = 0;
  trace::ReadOptions read_options;
  read_options.max_spans_per_trace = options.max_spans_per_trace;
  nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
  bool reached_max = false;
  const double input_count = static_cast<double>(options.inputs.size());

  for (std::size_t index = 0; index < options.inputs.size() && !reached_max; ++index) {
    const std::string& input = options.inputs[index];
    const auto input_started = std::chrono::steady_clock::now();
    auto last_progress = input_started;
    std::uint64_t input_traces = 0;
    std::uint64_t input_spans = 0;
    std::string artifact_error;  // set inside the callback, which then stops the read
    emit_progress(kEngine, "start", static_cast<double>(index) / input_count,
                  {{"input", input}, {"algorithm", options.algorithm}});
    const trace::ReadResult result = trace::read_trace_file(input, names, read_options, [&](trace::Trace& t) {
      if (!t.trace_id.empty() && !seen_trace_ids.insert(std::hash<std::string>{}(t.trace_id)).second) {
        aggregator.add_warning(analyze::Warning::kDuplicateTraceId);
      }
      const analyze::TraceAnalysis& analysis = analyzer.analyze(t);
      aggregator.add(analysis);
      ++traces;
      ++input_traces;
      input_spans += t.spans.size();
      spans += t.spans.size();
      // The result goes to the artifacts file in chunks as it is written; the
      // document keeps a copy while it fits in --doc-traces / --doc-bytes.
      bool keep_in_doc = doc_traces.size() < options.doc_traces;
      if (artifacts != nullptr || keep_in_doc) {
        line.clear();
        try {
          trace_json.write(analysis, [&](std::string_view chunk) {
            if (artifacts != nullptr) artifacts->append(chunk);
            if (!keep_in_doc) return;
            if (doc_bytes_used + line.size() + chunk.size() > options.doc_bytes) {
              keep_in_doc = false;
              line.clear();
              line.shrink_to_fit();
              ++omitted_over_doc_bytes;
              return;
            }
            line.append(chunk);
          });
          if (artifacts != nullptr) artifacts->append("\n");
        } catch (const std::exception& e) {
          artifact_error = e.what();
          return false;
        }
        if (keep_in_doc) {
          doc_bytes_used += line.size();
          doc_traces.push_back(line);
        }
      }
      if (timelines != nullptr && timeline_ids.count(t.trace_id) != 0) {
        line.clear();
        analyze::append_trace_timeline_json(analysis, names, scenarios, line);
        line += '\n';
        try {
          timelines->append(line);
          ++timelines_written;
        } catch (const std::exception& e) {
          artifact_error = e.what();
          return false;
        }
      }
      if (span_dump != nullptr && !span_dump->add(analysis, names, scenarios, artifact_error)) return false;
      if ((traces & 1023) == 0 && seconds_since(last_progress) >= 1.0) {
        last_progress = std::chrono::steady_clock::now();
        emit_progress(kEngine, "progress", static_cast<double>(index) / input_count,
                      {{"input", input}, {"traces", traces}, {"spans", spans}, {"elapsed_s", seconds_since(started)}});
      }
      if (options.max_traces != 0 && traces >= options.max_traces) {
        reached_max = true;
        return false;
      }
      return true;
    });
    if (!artifact_error.empty()) throw InputError(artifacts_path, artifact_error);
    if (!result.ok) throw InputError(input, result.error);
    aggregator.add_reader_stats(result.stats);
    inputs.push_back({{"path", input},
                      {"format", format_name(result.stats)},
                      {"compressed", result.stats.compressed},
                      {"bytes", result.stats.bytes},
                      {"traces", input_traces},
                      {"spans", input_spans},
                      {"stopped_at_max_traces", result.stopped}});
    if (input_traces == 0 && !reached_max) {
      emit_progress(kEngine, "warning", static_cast<double>(index + 1) / input_count,
                    {{"input", input}, {"message", "no traces found (not a Jaeger or OTLP document?)"}});
    }
    emit_progress(kEngine, "input_done", static_cast<double>(index + 1) / input_count,
                  {{"input", input},
                   {"traces", input_traces},
                   {"spans", input_spans},
                   {"bytes", result.stats.bytes},
                   {"elapsed_s", seconds_since(input_started)}});
  }

  if (span_dump != nullptr) span_dump->commit();
  if (timelines != nullptr) {
    try {
      timelines->commit();
    } catch (const std::exception& e) {
      throw InputError(timelines_path, std::string("cannot write artifacts: ") + e.what());
    }
  }
  if (artifacts != nullptr) {
    try {
      artifacts->commit();
    } catch (const std::exception& e) {
      throw InputError(artifacts_path, std::string("cannot write artifacts: ") + e.what());
    }
  }

  const double elapsed_s = seconds_since(started);
  // The result/1 envelope (engine, version, start time, command line, machine)
  // first, then the critical-path sections.
  const nlohmann::json envelope = new_result_document(kEngine, argc, argv);
  nlohmann::ordered_json doc;
  doc["schema"] = kSchema;
  for (const char* key : {"engine", "engine_version", "started_at", "command_line", "machine"}) {
    doc[key] = nlohmann::ordered_json(envelope.at(key));
  }
  doc["algorithm"] = options.algorithm;
  doc["time_unit"] = "ns";
  doc["config"] = {{"algorithm", options.algorithm},
                   {"max_traces", options.max_traces},
                   {"top", options.top},
                   {"doc_traces", options.doc_traces},
                   {"doc_bytes", options.doc_bytes},
                   {"max_spans_per_trace", options.max_spans_per_trace},
                   {"what_if", options.what_if_services},
                   {"what_if_no_delays", options.what_if_no_delays},
                   {"stagger_window_ns", stagger_window_ns},
                   {"timeline_traces", options.timeline_traces}};
  doc["inputs"] = std::move(inputs);
  doc["summary"] = {{"traces", traces},
                    {"traces_analyzed", aggregator.traces_analyzed()},
                    {"spans", spans},
                    {"elapsed_s", elapsed_s},
                    {"spans_per_s", elapsed_s > 0 ? nlohmann::ordered_json(static_cast<double>(spans) / elapsed_s)
                                                  : nlohmann::ordered_json(nullptr)},
                    {"stopped_at_max_traces", reached_max}};
  nlohmann::ordered_json trace_list = nlohmann::ordered_json::array();
  for (const std::string& t : doc_traces) trace_list.push_back(nlohmann::ordered_json::parse(t));
  doc["traces"] = std::move(trace_list);
  doc["traces_in_document"] = doc_traces.size();
  doc["traces_omitted"] = traces - doc_traces.size();
  doc["traces_omitted_over_doc_bytes"] = omitted_over_doc_bytes;
  doc["artifacts"] = artifacts_path.empty() ? nlohmann::ordered_json(nullptr)
                                            : nlohmann::ordered_json{{"critical_paths_ndjson", artifacts_path}};
  if (span_dump != nullptr) {
    doc["artifacts"]["spans_ndjson"] = span_dump->path();
    doc["artifacts"]["span_dump_traces"] = span_dump->traces();
  }
  if (timelines != nullptr) {
    doc["artifacts"]["timelines_ndjson"] = timelines_path;
    doc["artifacts"]["timelines_written"] = timelines_written;
  }
  nlohmann::ordered_json aggregates = aggregator.to_json();
  for (auto& [key, value] : aggregates.items()) doc[key] = std::move(value);
  // Moved, not copied: one measurement (with its CDF) per operation, service and RPC edge.
  analyze::MeasurementLists lists = aggregator.measurements(options.algorithm);
  doc["measurements"] = std::move(lists.measurements);
  doc["unavailable"] = std::move(lists.unavailable);

  emit_progress(kEngine, "done", 1.0,
                {{"traces", traces},
                 {"spans", spans},
                 {"elapsed_s", elapsed_s},
                 {"out", options.out.empty() ? std::string("-") : options.out}});
  return doc;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{
      "tailscope-critpath: critical-path analysis of Jaeger JSON ({\"data\": [...]}, one trace, NDJSON) "
      "and OTLP JSON (resourceSpans) traces, plain or gzip-compressed"};
  app.set_version_flag("--version", std::string(kEngine) + " " + TAILSCOPE_VERSION);
  app.add_option("--algorithm", options.algorithm, "Critical-path model")
      ->check(CLI::IsMember({"capstone", "jaeger", "crisp"}))
      ->capture_default_str();
  app.add_option("--out", options.out, "Result document (default: stdout); written atomically");
  app.add_option("--artifacts", options.artifacts_dir, "Write DIR/critical_paths.ndjson: every trace's result");
  app.add_option("--what-if", options.what_if_services,
                 "Project end-to-end latency without SERVICE's own time (repeatable: one scenario each)")
      ->allow_extra_args(false)  // one SERVICE per flag: the trace files follow
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--what-if-no-delays", options.what_if_no_delays,
               "Project end-to-end latency without RPC scheduling/join delay");
  // CLI11 would otherwise wrap "-1" into a huge unsigned count.
  const CLI::Validator non_negative(
      [](std::string& text) {
        return !text.empty() && text[0] == '-' ? "expects a non-negative integer, got " + text : std::string();
      },
      "N >= 0");
  app.add_option("--max-traces", options.max_traces, "Stop after N traces (default: all)")->check(non_negative);
  app.add_option("--top", options.top, "Length of rankings and top-path lists")
      ->check(non_negative)
      ->capture_default_str();
  app.add_option("--doc-traces", options.doc_traces, "Per-trace results kept in the document")
      ->check(non_negative)
      ->capture_default_str();
  app.add_option("--doc-bytes", options.doc_bytes,
                 "Bytes of per-trace results kept in the document (a result past it is left to the artifacts)")
      ->check(non_negative & CLI::Range(std::size_t{0}, std::size_t{1} << 30))
      ->capture_default_str();
  app.add_option("--max-spans-per-trace", options.max_spans_per_trace, "Drop spans past N in one trace")
      ->check(non_negative & CLI::Range(std::size_t{1}, std::numeric_limits<std::size_t>::max()))
      ->capture_default_str();
  app.add_option("--stagger-window-us", options.stagger_window_us,
                 "Sibling client spans starting within this many us of the first are one fan-out launch")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  app.add_option("--timeline-trace", options.timeline_traces,
                 "Write every span of trace ID to DIR/timelines.ndjson (repeatable; needs --artifacts)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--span-dump", options.span_dump,
               "Write every analyzed trace's spans to DIR/spans.ndjson (for topology inference; needs --artifacts)");
  app.add_option("inputs", options.inputs, "Trace files ('-' reads stdin)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    return status == 0 ? 0 : 2;  // docs/critical-path.md: usage errors exit with 2
  }

  if (!options.timeline_traces.empty() && options.artifacts_dir.empty()) {
    std::cerr << "--timeline-trace: needs --artifacts DIR (the spans go to DIR/timelines.ndjson)\n";
    return 2;
  }
  if (options.span_dump && options.artifacts_dir.empty()) {
    std::cerr << "--span-dump: needs --artifacts DIR (the spans go to DIR/spans.ndjson)\n";
    return 2;
  }
  std::signal(SIGINT, remove_temp_and_reraise);
  std::signal(SIGTERM, remove_temp_and_reraise);
  std::signal(SIGHUP, remove_temp_and_reraise);
  try {
    const nlohmann::ordered_json doc = run(options, argc, argv);
    const std::string text = doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    if (options.out.empty() || options.out == "-") {
      std::cout << text << std::flush;
      if (!std::cout) throw InputError("stdout", "cannot write the result document");
    } else {
      try {
        write_file_atomic(options.out, text);
      } catch (const std::exception& e) {
        throw InputError(options.out, e.what());
      }
    }
  } catch (const std::exception& e) {
    std::cerr << kEngine << ": error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
