// tailscope-critpath's run, as a library: the engine's main parses the flags
// and calls run_critpath(); tests call it in-process (with any number of jobs,
// under ThreadSanitizer too). One JSON document (schema tailscope.critpath/1,
// docs/critical-path.md), every trace's result and index line as NDJSON under --artifacts,
// progress as JSON lines on stderr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace tailscope::analyze {

inline constexpr const char* kCritpathEngine = "tailscope-critpath";

struct CritpathOptions {
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
  // What --artifacts holds per trace besides trace_index.ndjson (each trace's
  // id, analyzed, span_count, start and end-to-end time: what picking traces
  // needs, ~120 bytes a trace): "full" adds critical_paths.ndjson (every
  // trace's whole result, ~225 bytes a span), "index" does not.
  std::string per_trace = "full";
  // --jobs N cuts each input into chunks of whole lines of about this size,
  // one per worker at a time: big enough that the per-chunk setup (a name
  // table, a JSON writer) is noise, small enough that 8 x N chunks in flight
  // stay small. Tests make it tiny, so that small inputs split.
  std::size_t chunk_bytes = std::size_t{1} << 20;
  std::vector<std::string> inputs;
};

// A failure attributable to one input (a trace file, the artifacts folder,
// --out): the message names it. Exit status 1.
class InputError : public std::runtime_error {
 public:
  InputError(const std::string& input, const std::string& message) : std::runtime_error(input + ": " + message) {}
};

// Removes the temporary file of an artifact being streamed on SIGINT,
// SIGTERM and SIGHUP, then dies of the signal.
void install_critpath_signal_handlers();

// The result document, its per-trace results ("traces") kept as the compact
// JSON text the per-trace writer made for the artifacts: parsing them into
// nlohmann values to print them again cost more instructions than reading a
// 20 000-span input (analyze/pretty_json.h).
struct CritpathDocument {
  nlohmann::ordered_json document;  // "traces" is an empty array: its entries are `traces`
  std::vector<std::string> traces;  // compact JSON objects, in document order
};

// Reads every input with `jobs` workers (1: the single-job reader; the result
// is byte-identical for every N, only config.jobs and the timings differ) and
// returns the result document. Throws InputError.
CritpathDocument run_critpath(const CritpathOptions& options, std::size_t jobs, int argc, char** argv);

// The document as text: byte for byte what document.dump(indent, ' ', false,
// error_handler_t::replace) prints once "traces" holds every entry of
// `traces` parsed (no newline at the end). The engine prints it with indent 2.
std::string critpath_document_text(const CritpathDocument& doc, int indent);

}  // namespace tailscope::analyze
