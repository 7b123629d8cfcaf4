// libFuzzer target: the trace readers on arbitrary bytes, and every trace they
// accept through the three algorithms, what-if replay, JSON output and
// aggregation. A crash, a hang, a sanitizer report or a broken critical-path
// invariant is a finding. Gzip input (magic 1f 8b) goes through the file
// reader via a memfd so the zlib path is fuzzed too.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "analyze/aggregate.h"
#include "analyze/analysis_json.h"
#include "analyze/trace_analyzer.h"
#include "trace/trace_reader.h"

namespace {

using namespace tailscope;

void check_invariants(const analyze::TraceAnalysis& a) {
  if (!a.analyzed) return;
  std::int64_t at = a.tree->start(a.root);
  for (const auto& s : a.path.sections) {
    if (s.start_ns != at || s.end_ns <= s.start_ns) std::abort();
    at = s.end_ns;
  }
  if (at != a.tree->end(a.root)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  trace::NameTable names;
  trace::ReadOptions options;
  options.max_spans_per_trace = 4096;
  options.max_nesting_depth = 32;
  // Seeds use these service names; the scenario removes one of them.
  const trace::NameId removed = names.intern("S2");
  std::vector<analyze::WhatIfScenario> scenarios{{"remove:S2", {removed}, false}, {"no_delays", {}, true}};
  analyze::TraceAnalyzer analyzers[] = {
      analyze::TraceAnalyzer(analyze::make_capstone_algorithm(), scenarios),
      analyze::TraceAnalyzer(analyze::make_jaeger_algorithm(), scenarios),
      analyze::TraceAnalyzer(analyze::make_crisp_algorithm(), scenarios),
  };
  analyze::CriticalPathAggregator aggregator(names, scenarios);
  std::string json;
  int traces = 0;
  auto on_trace = [&](trace::Trace& t) {
    for (auto& analyzer : analyzers) {
      const auto& a = analyzer.analyze(t);
      check_invariants(a);
      json.clear();
      analyze::append_trace_analysis_json(a, names, scenarios, json);
      aggregator.add(a);
    }
    return ++traces < 64;
  };
  trace::ReadResult result;
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    const int fd = memfd_create("fuzz-input", 0);
    if (fd < 0) return 0;
    if (write(fd, data, size) != static_cast<ssize_t>(size)) {
      close(fd);
      return 0;
    }
    result = trace::read_trace_file("/proc/self/fd/" + std::to_string(fd), names, options, on_trace);
    close(fd);
  } else {
    result =
        trace::read_trace_text(std::string_view(reinterpret_cast<const char*>(data), size), names, options, on_trace);
  }
  aggregator.add_reader_stats(result.stats);
  (void)aggregator.to_json().dump();
  const analyze::MeasurementLists lists = aggregator.measurements("capstone");
  (void)lists.measurements.dump();
  (void)lists.unavailable.dump();
  return 0;
}
