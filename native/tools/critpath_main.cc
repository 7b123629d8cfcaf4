// tailscope-critpath: per-request critical paths of Jaeger / OTLP traces, with
// the capstone, Jaeger UI or CRISP model; delays, bottlenecks and what-ifs.
// One JSON result document (schema tailscope.critpath/1, docs/critical-path.md)
// on stdout or --out; every trace's result as NDJSON under --artifacts;
// progress as JSON lines on stderr.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "analyze/aggregate.h"
#include "analyze/analysis_json.h"
#include "analyze/trace_analyzer.h"
#include "trace/trace_reader.h"

namespace {

using namespace tailscope;

constexpr const char* kEngine = "tailscope-critpath";
constexpr const char* kSchema = "tailscope.critpath/1";
constexpr const char* kVersion = "0.1.0";

constexpr const char* kUsage = R"(usage: tailscope-critpath [options] FILE... ('-' reads stdin)

Critical-path analysis of Jaeger JSON ({"data": [...]}, one trace, NDJSON) and
OTLP JSON (resourceSpans) traces, plain or gzip-compressed.

  --algorithm capstone|jaeger|crisp   critical-path model (default capstone)
  --out FILE                 result document (default: stdout); written atomically
  --artifacts DIR            write DIR/critical_paths.ndjson: every trace's result
  --what-if SERVICE          project end-to-end latency without SERVICE's own time
                             (repeatable: one scenario each)
  --what-if-no-delays        project it without RPC scheduling/join delay
  --max-traces N             stop after N traces (default: all)
  --top N                    length of rankings and top-path lists (default 20)
  --doc-traces N             per-trace results kept in the document (default 100)
  --max-spans-per-trace N    drop spans past N in one trace (default 1000000)
  --help, --version
)";

struct Options {
  std::string algorithm = "capstone";
  std::string out;
  std::string artifacts_dir;
  std::vector<std::string> what_if_services;
  bool what_if_no_delays = false;
  std::uint64_t max_traces = 0;  // 0: all
  std::size_t top = 20;
  std::size_t doc_traces = 100;
  std::size_t max_spans_per_trace = 1'000'000;
  std::vector<std::string> inputs;
};

[[noreturn]] void UsageError(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n%s", kEngine, message.c_str(), kUsage);
  std::exit(2);
}

std::uint64_t ParseCount(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || text[0] == '-') {
    UsageError(flag + " expects a non-negative integer, got '" + text + "'");
  }
  return v;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_inline_value = false;
    if (arg.rfind("--", 0) == 0) {
      if (const auto eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_inline_value = true;
      }
    }
    auto next = [&]() -> std::string {
      if (has_inline_value) return value;
      if (i + 1 >= argc) UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--version") {
      std::printf("%s %s\n", kEngine, kVersion);
      std::exit(0);
    } else if (arg == "--algorithm") {
      o.algorithm = next();
    } else if (arg == "--out") {
      o.out = next();
    } else if (arg == "--artifacts") {
      o.artifacts_dir = next();
    } else if (arg == "--what-if") {
      o.what_if_services.push_back(next());
    } else if (arg == "--what-if-no-delays") {
      o.what_if_no_delays = true;
    } else if (arg == "--max-traces") {
      o.max_traces = ParseCount(arg, next());
    } else if (arg == "--top") {
      o.top = ParseCount(arg, next());
    } else if (arg == "--doc-traces") {
      o.doc_traces = ParseCount(arg, next());
    } else if (arg == "--max-spans-per-trace") {
      o.max_spans_per_trace = std::max<std::uint64_t>(1, ParseCount(arg, next()));
    } else if (arg == "-" || arg.empty() || arg[0] != '-') {
      o.inputs.push_back(arg);
    } else {
      UsageError("unknown option " + arg);
    }
  }
  if (o.inputs.empty()) UsageError("no input files");
  if (analyze::MakeCriticalPathAlgorithm(o.algorithm) == nullptr) {
    UsageError("--algorithm must be capstone, jaeger or crisp (got '" + o.algorithm + "')");
  }
  return o;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Progress: one JSON object per line on stderr.
void Progress(const nlohmann::ordered_json& event) {
  std::fprintf(stderr, "%s\n", event.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  std::fflush(stderr);
}

[[noreturn]] void Fail(const std::string& input, const std::string& message, const std::vector<std::string>& temp_files) {
  for (const std::string& f : temp_files) std::remove(f.c_str());
  Progress({{"event", "error"}, {"input", input}, {"message", message}});
  std::fprintf(stderr, "%s: error: %s: %s\n", kEngine, input.c_str(), message.c_str());
  std::exit(1);
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string TempPathFor(const std::string& path) { return path + ".tmp." + std::to_string(getpid()); }

// Writes `text` to `path` through a temporary file and a rename: readers see
// the old file or the whole new one, never half of it.
bool WriteAtomically(const std::string& path, const std::string& text, std::string* error) {
  const std::string temp = TempPathFor(path);
  std::FILE* f = std::fopen(temp.c_str(), "wb");
  if (f == nullptr) {
    *error = std::string("cannot write ") + temp + ": " + std::strerror(errno);
    return false;
  }
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(temp.c_str(), path.c_str()) != 0) {
    *error = std::string("cannot write ") + path + ": " + std::strerror(errno);
    std::remove(temp.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  const double started = Now();

  trace::NameTable names;
  std::vector<analyze::WhatIfScenario> scenarios;
  for (const std::string& service : options.what_if_services) {
    scenarios.push_back(analyze::WhatIfScenario{"remove:" + service, {names.Intern(service)}, false});
  }
  if (options.what_if_no_delays) scenarios.push_back(analyze::WhatIfScenario{"no_delays", {}, true});

  analyze::TraceAnalyzer analyzer(analyze::MakeCriticalPathAlgorithm(options.algorithm), scenarios);
  analyze::AggregateOptions aggregate_options;
  aggregate_options.top_n = options.top;
  analyze::CriticalPathAggregator aggregator(names, scenarios, aggregate_options);

  std::vector<std::string> temp_files;
  std::FILE* artifacts = nullptr;
  std::string artifacts_path;
  if (!options.artifacts_dir.empty()) {
    mkdir(options.artifacts_dir.c_str(), 0755);  // may exist already
    artifacts_path = options.artifacts_dir + "/critical_paths.ndjson";
    temp_files.push_back(TempPathFor(artifacts_path));
    artifacts = std::fopen(temp_files.back().c_str(), "wb");
    if (artifacts == nullptr) Fail(options.artifacts_dir, std::string("cannot write artifacts: ") + std::strerror(errno), {});
  }

  std::vector<std::string> doc_traces;
  std::unordered_set<std::uint64_t> seen_trace_ids;
  std::string line;
  std::uint64_t traces = 0;
  std::uint64_t spans = 0;
  trace::ReadOptions read_options;
  read_options.max_spans_per_trace = options.max_spans_per_trace;
  nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
  bool reached_max = false;

  for (const std::string& input : options.inputs) {
    if (reached_max) break;
    const double input_started = Now();
    double last_progress = input_started;
    std::uint64_t input_traces = 0;
    std::uint64_t input_spans = 0;
    Progress({{"event", "start"}, {"input", input}, {"algorithm", options.algorithm}});
    const trace::ReadResult result = trace::ReadTraceFile(input, names, read_options, [&](trace::Trace& t) {
      if (!t.trace_id.empty() && !seen_trace_ids.insert(std::hash<std::string>{}(t.trace_id)).second) {
        aggregator.AddWarning(analyze::Warning::kDuplicateTraceId);
      }
      const analyze::TraceAnalysis& analysis = analyzer.Analyze(t);
      aggregator.Add(analysis);
      ++traces;
      ++input_traces;
      input_spans += t.spans.size();
      spans += t.spans.size();
      if (artifacts != nullptr || doc_traces.size() < options.doc_traces) {
        line.clear();
        analyze::AppendTraceAnalysisJson(analysis, names, scenarios, line);
        if (doc_traces.size() < options.doc_traces) doc_traces.push_back(line);
        if (artifacts != nullptr) {
          line += '\n';
          if (std::fwrite(line.data(), 1, line.size(), artifacts) != line.size()) {
            Fail(artifacts_path, std::string("cannot write artifacts: ") + std::strerror(errno), temp_files);
          }
        }
      }
      if ((traces & 1023) == 0) {
        const double now = Now();
        if (now - last_progress >= 1.0) {
          last_progress = now;
          Progress({{"event", "progress"},
                    {"input", input},
                    {"traces", traces},
                    {"spans", spans},
                    {"elapsed_s", now - started}});
        }
      }
      if (options.max_traces != 0 && traces >= options.max_traces) {
        reached_max = true;
        return false;
      }
      return true;
    });
    if (!result.ok) Fail(input, result.error, temp_files);
    aggregator.AddReaderStats(result.stats);
    const char* format = result.stats.jaeger_traces && result.stats.otlp_traces ? "mixed"
                         : result.stats.otlp_traces                             ? "otlp"
                         : result.stats.jaeger_traces                           ? "jaeger"
                                                                                : "empty";
    const double elapsed = Now() - input_started;
    nlohmann::ordered_json in = {{"path", input},
                         {"format", format},
                         {"compressed", result.stats.compressed},
                         {"bytes", result.stats.bytes},
                         {"traces", input_traces},
                         {"spans", input_spans},
                         {"stopped_at_max_traces", result.stopped}};
    inputs.push_back(in);
    if (input_traces == 0 && !reached_max) {
      Progress({{"event", "warning"}, {"input", input}, {"message", "no traces found (not a Jaeger or OTLP document?)"}});
    }
    Progress({{"event", "input_done"},
              {"input", input},
              {"traces", input_traces},
              {"spans", input_spans},
              {"bytes", result.stats.bytes},
              {"elapsed_s", elapsed}});
  }

  if (artifacts != nullptr) {
    const bool closed = std::fclose(artifacts) == 0;
    if (!closed || std::rename(temp_files.back().c_str(), artifacts_path.c_str()) != 0) {
      Fail(artifacts_path, std::string("cannot write artifacts: ") + std::strerror(errno), temp_files);
    }
    temp_files.clear();
  }

  const double elapsed = Now() - started;
  nlohmann::ordered_json doc;
  doc["schema"] = kSchema;
  doc["engine"] = kEngine;
  doc["engine_version"] = kVersion;
  doc["created_utc"] = UtcNow();
  doc["algorithm"] = options.algorithm;
  doc["time_unit"] = "ns";
  nlohmann::ordered_json what_if_services = options.what_if_services;
  doc["config"] = {{"max_traces", options.max_traces},
                   {"top", options.top},
                   {"doc_traces", options.doc_traces},
                   {"max_spans_per_trace", options.max_spans_per_trace},
                   {"what_if", what_if_services},
                   {"what_if_no_delays", options.what_if_no_delays}};
  doc["inputs"] = std::move(inputs);
  doc["summary"] = {{"traces", traces},
                    {"traces_analyzed", aggregator.traces_analyzed()},
                    {"spans", spans},
                    {"elapsed_s", elapsed},
                    {"spans_per_s", elapsed > 0 ? static_cast<double>(spans) / elapsed : 0.0},
                    {"stopped_at_max_traces", reached_max}};
  nlohmann::ordered_json trace_list = nlohmann::ordered_json::array();
  for (const std::string& t : doc_traces) trace_list.push_back(nlohmann::ordered_json::parse(t));
  doc["traces"] = std::move(trace_list);
  doc["traces_in_document"] = doc_traces.size();
  doc["traces_omitted"] = traces - doc_traces.size();
  doc["artifacts"] = artifacts_path.empty() ? nlohmann::ordered_json(nullptr)
                                            : nlohmann::ordered_json{{"critical_paths_ndjson", artifacts_path}};
  nlohmann::ordered_json aggregates = aggregator.ToJson();
  for (auto& [key, value] : aggregates.items()) doc[key] = std::move(value);

  const std::string text = doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  if (options.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    std::string error;
    if (!WriteAtomically(options.out, text, &error)) Fail(options.out, error, {});
  }
  Progress({{"event", "done"},
            {"traces", traces},
            {"spans", spans},
            {"elapsed_s", elapsed},
            {"out", options.out.empty() ? std::string("-") : options.out}});
  return 0;
}
