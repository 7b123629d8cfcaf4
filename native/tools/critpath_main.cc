// tailscope-critpath: per-request critical paths of Jaeger / OTLP traces, with
// the capstone, Jaeger UI or CRISP model; delays, bottlenecks and what-ifs.
// The flags; the run itself is analyze/critpath_run.h.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <iostream>
#include <limits>
#include <string>

#include "analyze/critpath_run.h"
#include "core/affinity.h"
#include "core/result_writer.h"

namespace {

using namespace tailscope;
using analyze::InputError;
constexpr const char* kEngine = analyze::kCritpathEngine;

// --jobs as asked, capped at the CPUs this process may run on (more workers
// than CPUs only contend: said on stderr); the default is all of them.
std::size_t effective_jobs(long asked) {
  const std::size_t allowed = std::max<std::size_t>(1, allowed_cpus().size());
  if (asked == 0) return allowed;
  if (static_cast<unsigned long>(asked) > allowed) {
    std::cerr << kEngine << ": --jobs " << asked << " capped at " << allowed
              << ": the CPUs this process may run on (sched_getaffinity)\n";
    return allowed;
  }
  return static_cast<std::size_t>(asked);
}

}  // namespace

int main(int argc, char** argv) {
  analyze::CritpathOptions options;
  long jobs = 0;  // 0: not given (the validator refuses it from the user)
  CLI::App app{
      "tailscope-critpath: critical-path analysis of Jaeger JSON ({\"data\": [...]}, one trace, NDJSON) "
      "and OTLP JSON (resourceSpans) traces, plain or gzip-compressed"};
  app.set_version_flag("--version", std::string(kEngine) + " " + TAILSCOPE_VERSION);
  app.add_option("--algorithm", options.algorithm, "Critical-path model")
      ->check(CLI::IsMember({"capstone", "jaeger", "crisp"}))
      ->capture_default_str();
  app.add_option("--out", options.out, "Result document (default: stdout); written atomically");
  app.add_option("--artifacts", options.artifacts_dir,
                 "Write DIR/trace_index.ndjson (every trace's id, span count, start and end-to-end time) and "
                 "DIR/critical_paths.ndjson (every trace's result; not with --per-trace index)");
  CLI::Option* per_trace =
      app.add_option("--per-trace", options.per_trace,
                     "What --artifacts holds per trace: full (the index and every trace's whole result) or index "
                     "(the index only: ~1/50 of the bytes)")
          ->check(CLI::IsMember({"full", "index"}))
          ->capture_default_str();
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
  app.add_option("--jobs", jobs,
                 "Worker threads reading and analysing traces (default: the CPUs this process may run on); "
                 "the result is the same for every N")
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              if (std::stol(text) >= 1) return std::string();
            } catch (const std::exception&) {
            }
            return "expects a number of worker threads >= 1, got " + text;
          },
          "N >= 1"));
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
  if (per_trace->count() > 0 && options.artifacts_dir.empty()) {
    std::cerr << "--per-trace: needs --artifacts DIR (the per-trace file is written there)\n";
    return 2;
  }
  if (options.span_dump && options.artifacts_dir.empty()) {
    std::cerr << "--span-dump: needs --artifacts DIR (the spans go to DIR/spans.ndjson)\n";
    return 2;
  }
  analyze::install_critpath_signal_handlers();
  try {
    std::string text =
        analyze::critpath_document_text(analyze::run_critpath(options, effective_jobs(jobs), argc, argv), 2);
    text += '\n';
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
