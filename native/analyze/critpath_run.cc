#include "analyze/critpath_run.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "analyze/aggregate.h"
#include "analyze/analysis_json.h"
#include "analyze/pretty_json.h"
#include "analyze/seen_hashes.h"
#include "analyze/timeline_json.h"
#include "analyze/trace_analyzer.h"
#include "analyze/trace_contribution.h"
#include "core/result_writer.h"
#include "trace/gzip_read_stream.h"
#include "trace/line_chunks.h"
#include "trace/trace_reader.h"

namespace tailscope::analyze {

namespace {

constexpr const char* kEngine = kCritpathEngine;
constexpr const char* kSchema = "tailscope.critpath/1";
using Options = CritpathOptions;

// The temporary files of the artifacts being streamed, for the signal handler:
// an interrupted run (Ctrl-C, the driver's timeout) must not leave a large
// .tmp file behind. Set while the writers owning the files are alive.
constexpr std::size_t kMaxTempFiles = 4;  // per-trace results, index, timelines, span dump
std::array<std::atomic<const char*>, kMaxTempFiles> temps_to_remove{};

extern "C" void remove_temp_and_reraise(int signal_number) {
  for (auto& temp : temps_to_remove)
    if (const char* path = temp.load()) ::unlink(path);
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

// Publishes the writers' temporary files to the signal handler for its lifetime
// (declared after the writers, so they are withdrawn before the writers go).
class TempFileRegistration {
 public:
  explicit TempFileRegistration(std::initializer_list<const AtomicFileWriter*> writers) {
    std::size_t i = 0;
    for (const AtomicFileWriter* writer : writers)
      if (writer != nullptr && i < kMaxTempFiles) temps_to_remove[i++].store(writer->temp_path());
  }
  ~TempFileRegistration() {
    for (auto& temp : temps_to_remove) temp.store(nullptr);
  }
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
      writer_->write_back_as_written();  // every span: as large as the input
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
  // A line a --jobs worker rendered (newline included); throws when the file
  // cannot be written.
  void add_line(std::string_view line) {
    writer_->append(line);
    ++traces_;
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

// The scenarios of --what-if / --what-if-no-delays, their services interned
// in `names` (first, before any trace: every table a run builds gives them
// the same ids).
std::vector<analyze::WhatIfScenario> make_scenarios(const Options& options, trace::NameTable& names) {
  std::vector<analyze::WhatIfScenario> scenarios;
  for (const std::string& service : options.what_if_services) {
    scenarios.push_back(analyze::WhatIfScenario{"remove:" + service, {names.intern(service)}, false});
  }
  if (options.what_if_no_delays) scenarios.push_back(analyze::WhatIfScenario{"no_delays", {}, true});
  return scenarios;
}

// --jobs N: an input is cut into chunks of whole lines (trace/line_chunks.h),
// each chunk is read and analysed by one of N workers into the chunk's own
// buffers — the traces' contributions to the aggregates, their per-trace
// JSON, timelines and span dumps — and the main thread takes the chunks in
// input order: it adds the contributions and writes the buffers exactly as
// one job would, so the result is byte-identical to --jobs 1.
// A line longer than this (one huge trace or envelope on a line) is left to
// the single-job reader, which streams it: the readers' own limit for
// buffering a value whole (trace_reader.cc).
constexpr std::size_t kMaxChunkLineBytes = std::size_t{8} << 20;
// Chunks in flight per job (queued, being analysed, or analysed and waiting
// for the main thread, which takes them in input order). When the main
// thread only read, merged and wrote (~0.5 CPU of a 2-job run: perf,
// docs/measurements.md#trace-analyzer), with 2 per worker the workers waited
// on it and both CPUs sat idle 13 % of a run.
constexpr std::size_t kChunksInFlightPerJob = 8;

// One trace of a chunk: its contribution and where its outputs lie in the
// chunk's buffers (its JSON is followed by a newline there: the main thread
// writes a chunk's results to critical_paths.ndjson in one piece).
struct ChunkTrace {
  analyze::TraceContribution contribution;
  std::uint64_t spans = 0;
  bool has_json = false;
  std::size_t json_begin = 0, json_end = 0;
  std::size_t index_end = 0;                         // where its trace_index.ndjson line ends (with its newline)
  std::size_t timeline_begin = 0, timeline_end = 0;  // empty: not a --timeline-trace
  std::size_t dump_begin = 0, dump_end = 0;          // empty: no --span-dump, or not analyzed
};

// A slot of the chunk ring; its vectors and strings keep their capacity from
// one chunk to the next.
struct Chunk {
  trace::ChunkText text;     // LineChunks (gzip): the main thread cut it
  std::uint64_t offset = 0;  // in the decompressed input (LineChunks)
  // FileLineChunks: the worker reads chunk `index` itself; `cut` says how
  // that went (kChunk: the text is there).
  std::uint64_t index = 0;
  trace::LineChunks::Status cut = trace::LineChunks::Status::kChunk;
  std::unique_ptr<trace::NameTable> names;  // the chunk's own: workers never share one
  trace::ReadResult read;
  bool blank = false;
  std::vector<ChunkTrace> traces;
  std::size_t trace_count = 0;
  std::string json, index_lines, timelines, dump;
  bool done = false;  // guarded by ChunkWorkers::mu_
};

// What a worker keeps between chunks.
struct WorkerState {
  std::vector<analyze::WhatIfScenario> scenarios;
  std::unique_ptr<analyze::TraceAnalyzer> analyzer;
  // FileLineChunks: the worker's own chunk text, read again and again into
  // one buffer that stays in its cache (nothing of it is needed once the
  // chunk is analysed), rather than into the slot's, which rotate over
  // kChunksInFlightPerJob × jobs MiB.
  trace::ChunkText text;
};

// The settings a worker reads (never written while workers run).
struct ChunkSettings {
  const Options* options = nullptr;
  trace::ReadOptions read_options;
  std::int64_t stagger_window_ns = 0;
  bool artifacts = false;  // every trace's full result is written (--per-trace full)
  bool index = false;      // every trace's index line is written (--artifacts)
  const std::unordered_set<std::string>* timeline_ids = nullptr;
  // A plain file's chunks, each read by its worker (null: the main thread
  // reads them, in order, with LineChunks).
  const trace::FileLineChunks* file_chunks = nullptr;
  // Set by the main thread once the document holds --doc-traces results:
  // without full artifacts nobody needs the per-trace JSON after that.
  std::atomic<bool> doc_full{false};
};

void process_chunk(Chunk& c, WorkerState& w, const ChunkSettings& settings) {
  const Options& options = *settings.options;
  trace::ChunkText& text = settings.file_chunks != nullptr ? w.text : c.text;
  if (settings.file_chunks != nullptr) {
    c.cut = settings.file_chunks->read(c.index, text);
    if (c.cut != trace::LineChunks::Status::kChunk) return;
  }
  c.names = std::make_unique<trace::NameTable>();
  // The same ids as in the worker's scenarios: interned first, in order.
  make_scenarios(options, *c.names);
  c.trace_count = 0;
  c.json.clear();
  c.index_lines.clear();
  c.timelines.clear();
  c.dump.clear();
  c.blank = trace::is_blank_json(text.view());
  if (c.blank) {
    c.read = trace::ReadResult{};
    c.read.stats.bytes = text.size;
    return;
  }
  w.analyzer->set_delay_options(c.names.get(), settings.stagger_window_ns);
  analyze::TraceAnalysisJsonWriter json(*c.names, w.scenarios);
  c.read = trace::read_padded_trace_text(text.view(), *c.names, settings.read_options, [&](trace::Trace& t) {
    const analyze::TraceAnalysis& analysis = w.analyzer->analyze(t);
    if (c.trace_count == c.traces.size()) c.traces.emplace_back();
    ChunkTrace& out = c.traces[c.trace_count++];
    out.contribution.assign(analysis);
    out.spans = t.spans.size();
    out.has_json = settings.artifacts || !settings.doc_full.load(std::memory_order_relaxed);
    out.json_begin = c.json.size();
    // Through the writer's own buffer, which keeps its room from trace to
    // trace (append() into c.json would grow c.json's zero-filled room anew
    // for every trace).
    if (out.has_json) json.write(analysis, [&](std::string_view piece) { c.json.append(piece); });
    out.json_end = c.json.size();
    if (out.has_json) c.json += '\n';
    if (settings.index) {
      c.index_lines.append(json.index_object(analysis));
      c.index_lines += '\n';
    }
    out.index_end = c.index_lines.size();
    out.timeline_begin = c.timelines.size();
    if (!settings.timeline_ids->empty() && settings.timeline_ids->count(t.trace_id) != 0) {
      analyze::append_trace_timeline_json(analysis, *c.names, w.scenarios, c.timelines);
      c.timelines += '\n';
    }
    out.timeline_end = c.timelines.size();
    out.dump_begin = c.dump.size();
    if (options.span_dump && analysis.analyzed) {
      analyze::append_trace_timeline_json(analysis, *c.names, w.scenarios, c.dump);
      c.dump += '\n';
    }
    out.dump_end = c.dump.size();
    return true;
  });
}

// N - 1 worker threads and the main thread taking chunks from one queue. The
// main thread, which merges the chunks in input order, works as the Nth job:
// while the chunk it merges next is not done, it analyses queued chunks
// itself (help_until_done), and sleeps only when none is queued. So N jobs
// are N busy threads, not N workers beside a merging thread: on 2 cores the
// third thread's context switches and its share of the caches made the same
// work run 1.2-1.45x slower per function (perf, docs/measurements.md#trace-analyzer).
// A chunk is owned by whoever analyses it from submit() until it is done, by
// the main thread otherwise.
class ChunkWorkers {
 public:
  ChunkWorkers(std::size_t jobs, const ChunkSettings& settings) : settings_(settings) {
    for (std::size_t i = 0; i < jobs; ++i) {
      auto state = std::make_unique<WorkerState>();
      trace::NameTable names;
      state->scenarios = make_scenarios(*settings.options, names);
      state->analyzer = std::make_unique<analyze::TraceAnalyzer>(
          analyze::make_critical_path_algorithm(settings.options->algorithm), state->scenarios);
      states_.push_back(std::move(state));
    }
    // states_[0] is the main thread's.
    for (std::size_t i = 1; i < jobs; ++i) {
      threads_.emplace_back([this, i](const std::stop_token& stop) { work(stop, *states_[i]); });
    }
  }
  ~ChunkWorkers() {
    for (std::jthread& t : threads_) t.request_stop();
    ready_.notify_all();
  }
  ChunkWorkers(const ChunkWorkers&) = delete;
  ChunkWorkers& operator=(const ChunkWorkers&) = delete;

  void submit(Chunk& chunk) {
    {
      const std::scoped_lock lock(mu_);
      chunk.done = false;
      queue_.push_back(&chunk);
    }
    ready_.notify_one();
  }
  // Drops the chunks nobody has started (the run stopped: their results
  // would be dropped); they count as done.
  void cancel_queued() {
    const std::scoped_lock lock(mu_);
    for (Chunk* c : queue_) c->done = true;
    queue_.clear();
  }
  // Returns once `chunk` is done, analysing queued chunks (the oldest first,
  // which may be `chunk` itself) on the calling thread meanwhile.
  void help_until_done(Chunk& chunk) {
    for (;;) {
      Chunk* queued = nullptr;
      {
        std::unique_lock lock(mu_);
        if (chunk.done) return;
        if (queue_.empty()) {  // every chunk before it is being analysed: wait
          done_.wait(lock, [&] { return chunk.done; });
          return;
        }
        queued = queue_.front();
        queue_.pop_front();
      }
      run(*queued, *states_[0]);
    }
  }

 private:
  void work(const std::stop_token& stop, WorkerState& state) {
    for (;;) {
      Chunk* chunk = nullptr;
      {
        std::unique_lock lock(mu_);
        if (!ready_.wait(lock, stop, [&] { return !queue_.empty(); })) return;
        chunk = queue_.front();
        queue_.pop_front();
      }
      run(*chunk, state);
    }
  }
  void run(Chunk& chunk, WorkerState& state) {
    try {
      process_chunk(chunk, state, settings_);
    } catch (const std::exception& e) {
      // The single-job reader reads the input again and meets it on the
      // main thread, which reports it as one job would.
      chunk.read.ok = false;
      chunk.read.error = e.what();
    }
    {
      const std::scoped_lock lock(mu_);
      chunk.done = true;
    }
    done_.notify_all();
  }

  const ChunkSettings& settings_;
  std::vector<std::unique_ptr<WorkerState>> states_;
  std::mutex mu_;
  std::condition_variable_any ready_;
  std::condition_variable done_;
  std::deque<Chunk*> queue_;
  std::vector<std::jthread> threads_;  // last: joined before the rest goes
};

// One run: the aggregates and every output, fed one trace at a time in input
// order, by the single-job reader's callback or from a chunk's buffers.
class CritpathRun {
 public:
  CritpathRun(const Options& options, std::size_t jobs, int argc, char** argv)
      : options_(options),
        jobs_(jobs),
        argc_(argc),
        argv_(argv),
        scenarios_(make_scenarios(options, names_)),
        stagger_window_ns_(static_cast<std::int64_t>(options.stagger_window_us * 1000.0)),
        analyzer_(analyze::make_critical_path_algorithm(options.algorithm), scenarios_),
        aggregator_(names_, scenarios_, aggregate_options(options, stagger_window_ns_)),
        trace_json_(names_, scenarios_),
        timeline_ids_(options.timeline_traces.begin(), options.timeline_traces.end()) {
    analyzer_.set_delay_options(&names_, stagger_window_ns_);
    read_options_.max_spans_per_trace = options.max_spans_per_trace;
    if (!options.artifacts_dir.empty()) {
      try {
        ensure_directory(options.artifacts_dir);
        index_path_ = options.artifacts_dir + "/trace_index.ndjson";
        index_ = std::make_unique<AtomicFileWriter>(index_path_);
        if (options.per_trace == "full") {
          artifacts_path_ = options.artifacts_dir + "/critical_paths.ndjson";
          artifacts_ = std::make_unique<AtomicFileWriter>(artifacts_path_);
          // About 40 % of the input's size: its writeback overlaps the
          // analysis instead of all waiting in commit()'s fsync.
          artifacts_->write_back_as_written();
        }
      } catch (const std::exception& e) {
        throw InputError(options.artifacts_dir, std::string("cannot write artifacts: ") + e.what());
      }
    }
    if (!timeline_ids_.empty()) {
      timelines_path_ = options.artifacts_dir + "/timelines.ndjson";
      try {
        timelines_ = std::make_unique<AtomicFileWriter>(timelines_path_);
      } catch (const std::exception& e) {
        throw InputError(options.artifacts_dir, std::string("cannot write artifacts: ") + e.what());
      }
    }
    if (options.span_dump) span_dump_ = std::make_unique<SpanDump>(options.artifacts_dir);
  }

  CritpathDocument run();

 private:
  static analyze::AggregateOptions aggregate_options(const Options& options, std::int64_t stagger_window_ns) {
    analyze::AggregateOptions a;
    a.top_n = options.top;
    a.stagger_window_ns = stagger_window_ns;
    return a;
  }

  // Per input: what was read from it so far.
  struct InputTally {
    std::uint64_t traces = 0;
    std::uint64_t spans = 0;
    trace::ReadStats stats;
    bool stopped = false;
    std::chrono::steady_clock::time_point last_progress;
  };

  // Counts a trace (and a repeated trace id). Every path calls it first.
  void count_trace(const std::string& trace_id, std::uint64_t spans, InputTally& tally) {
    if (!trace_id.empty() && !seen_trace_ids_.insert(std::hash<std::string>{}(trace_id))) {
      aggregator_.add_warning(analyze::Warning::kDuplicateTraceId);
    }
    ++traces_;
    ++tally.traces;
    tally.spans += spans;
    spans_ += spans;
  }
  // Progress, and --max-traces: false to stop.
  bool after_trace(std::size_t index, const std::string& input, InputTally& tally) {
    if ((traces_ & 1023) == 0 && seconds_since(tally.last_progress) >= 1.0) {
      tally.last_progress = std::chrono::steady_clock::now();
      emit_progress(kEngine, "progress", static_cast<double>(index) / input_count(),
                    {{"input", input}, {"traces", traces_}, {"spans", spans_}, {"elapsed_s", seconds_since(started_)}});
    }
    if (options_.max_traces != 0 && traces_ >= options_.max_traces) {
      reached_max_ = true;
      return false;
    }
    return true;
  }
  // Keeps a per-trace result in the document while it fits (--doc-traces, --doc-bytes).
  void keep_in_document(std::string_view json) {
    if (doc_bytes_used_ + json.size() > options_.doc_bytes) {
      ++omitted_over_doc_bytes_;
      return;
    }
    doc_bytes_used_ += json.size();
    doc_traces_.emplace_back(json);
  }
  double input_count() const { return static_cast<double>(options_.inputs.size()); }

  // The single-job reader over the whole input; the first `skip` traces were
  // already taken (by read_chunks, before a chunk it could not read).
  trace::ReadResult read_whole(std::size_t index, std::uint64_t skip, InputTally& tally);
  // --jobs N over the input; false when the input must be read whole
  // (read_whole, skipping tally.traces): a pipe, a line too long for a chunk,
  // a chunk that does not parse (a document across lines, invalid JSON: the
  // single-job reader then gives the exact error), a gzip error, no value.
  bool read_chunks(std::size_t index, InputTally& tally);
  bool take_chunk_trace(const Chunk& c, ChunkTrace& t, const std::vector<trace::NameId>& to_run, std::size_t index,
                        InputTally& tally);

  const Options& options_;
  std::size_t jobs_;
  int argc_;
  char** argv_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  trace::NameTable names_;
  std::vector<analyze::WhatIfScenario> scenarios_;
  std::int64_t stagger_window_ns_;
  trace::ReadOptions read_options_;
  analyze::TraceAnalyzer analyzer_;
  analyze::CriticalPathAggregator aggregator_;
  analyze::TraceAnalysisJsonWriter trace_json_;
  // critical_paths.ndjson: every trace's full result (--artifacts, --per-trace full).
  std::unique_ptr<AtomicFileWriter> artifacts_;
  std::string artifacts_path_;
  // trace_index.ndjson: every trace's index line (--artifacts).
  std::unique_ptr<AtomicFileWriter> index_;
  std::string index_path_;
  // Every span of the traces picked for a timeline (--timeline-trace).
  std::unique_ptr<AtomicFileWriter> timelines_;
  std::string timelines_path_;
  std::unordered_set<std::string> timeline_ids_;
  std::uint64_t timelines_written_ = 0;
  std::unique_ptr<SpanDump> span_dump_;
  std::vector<std::string> doc_traces_;
  std::size_t doc_bytes_used_ = 0;
  std::uint64_t omitted_over_doc_bytes_ = 0;
  analyze::SeenHashes seen_trace_ids_;
  std::string line_;
  std::uint64_t traces_ = 0;
  std::uint64_t spans_ = 0;
  bool reached_max_ = false;
  std::string artifact_error_;  // set while taking a trace, which then stops the read
  std::string artifact_error_path_;
};

trace::ReadResult CritpathRun::read_whole(std::size_t index, std::uint64_t skip, InputTally& tally) {
  const std::string& input = options_.inputs[index];
  return trace::read_trace_file(input, names_, read_options_, [&](trace::Trace& t) {
    if (skip > 0) {
      --skip;
      return true;
    }
    count_trace(t.trace_id, t.spans.size(), tally);
    const analyze::TraceAnalysis& analysis = analyzer_.analyze(t);
    aggregator_.add(analysis);
    // The result goes to the artifacts file in chunks as it is written; the
    // document keeps a copy while it fits in --doc-traces / --doc-bytes.
    bool keep_in_doc = doc_traces_.size() < options_.doc_traces;
    if (artifacts_ != nullptr || keep_in_doc) {
      line_.clear();
      try {
        trace_json_.write(analysis, [&](std::string_view chunk) {
          if (artifacts_ != nullptr) artifacts_->append(chunk);
          if (!keep_in_doc) return;
          if (doc_bytes_used_ + line_.size() + chunk.size() > options_.doc_bytes) {
            keep_in_doc = false;
            line_.clear();
            line_.shrink_to_fit();
            ++omitted_over_doc_bytes_;
            return;
          }
          line_.append(chunk);
        });
        if (artifacts_ != nullptr) artifacts_->append("\n");
      } catch (const std::exception& e) {
        artifact_error_ = e.what();
        artifact_error_path_ = artifacts_path_;
        return false;
      }
      if (keep_in_doc) {
        doc_bytes_used_ += line_.size();
        doc_traces_.push_back(line_);
      }
    }
    if (index_ != nullptr) {
      try {
        index_->append(trace_json_.index_object(analysis));
        index_->append("\n");
      } catch (const std::exception& e) {
        artifact_error_ = e.what();
        artifact_error_path_ = index_path_;
        return false;
      }
    }
    if (timelines_ != nullptr && timeline_ids_.count(t.trace_id) != 0) {
      line_.clear();
      analyze::append_trace_timeline_json(analysis, names_, scenarios_, line_);
      line_ += '\n';
      try {
        timelines_->append(line_);
        ++timelines_written_;
      } catch (const std::exception& e) {
        artifact_error_ = e.what();
        artifact_error_path_ = timelines_path_;
        return false;
      }
    }
    if (span_dump_ != nullptr && !span_dump_->add(analysis, names_, scenarios_, artifact_error_)) {
      artifact_error_path_ = span_dump_->path();
      return false;
    }
    return after_trace(index, input, tally);
  });
}

bool CritpathRun::take_chunk_trace(const Chunk& c, ChunkTrace& t, const std::vector<trace::NameId>& to_run,
                                   std::size_t index, InputTally& tally) {
  count_trace(t.contribution.trace_id, t.spans, tally);
  t.contribution.remap(to_run);
  aggregator_.add(t.contribution);
  const std::string_view json(c.json.data() + t.json_begin, t.json_end - t.json_begin);
  if (doc_traces_.size() < options_.doc_traces) keep_in_document(json);
  const std::string* failed_path = &timelines_path_;
  try {
    if (t.timeline_end > t.timeline_begin) {
      timelines_->append(std::string_view(c.timelines.data() + t.timeline_begin, t.timeline_end - t.timeline_begin));
      ++timelines_written_;
    }
    if (t.dump_end > t.dump_begin) {
      failed_path = &span_dump_->path();
      span_dump_->add_line(std::string_view(c.dump.data() + t.dump_begin, t.dump_end - t.dump_begin));
    }
  } catch (const std::exception& e) {
    artifact_error_ = e.what();
    artifact_error_path_ = *failed_path;
    return false;
  }
  return after_trace(index, options_.inputs[index], tally);
}

bool CritpathRun::read_chunks(std::size_t index, InputTally& tally) {
  const std::string& input = options_.inputs[index];
  // Only regular files: a pipe (stdin, a FIFO) cannot be read again from its
  // start should a chunk not parse, and opening it here would take bytes the
  // single-job reader then misses.
  struct stat st {};
  if (input == "-" || ::stat(input.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  // A plain file: the workers read their own chunks. Gzip: the main thread
  // inflates the input in order and hands out chunks of it.
  const std::size_t padding = trace::trace_text_padding_bytes();
  const trace::FileLineChunks file_chunks(input, options_.chunk_bytes, kMaxChunkLineBytes, padding);
  std::unique_ptr<trace::GzipReadStream> stream;
  std::unique_ptr<trace::LineChunks> cuts;
  if (!file_chunks.ok()) {
    stream = std::make_unique<trace::GzipReadStream>(input);
    if (!stream->ok() || !stream->rewindable()) return false;
    cuts = std::make_unique<trace::LineChunks>(*stream, options_.chunk_bytes, kMaxChunkLineBytes, padding);
  }
  ChunkSettings settings;
  settings.options = &options_;
  settings.read_options = read_options_;
  settings.stagger_window_ns = stagger_window_ns_;
  settings.artifacts = artifacts_ != nullptr;
  settings.index = index_ != nullptr;
  settings.timeline_ids = &timeline_ids_;
  settings.file_chunks = file_chunks.ok() ? &file_chunks : nullptr;
  settings.doc_full = doc_traces_.size() >= options_.doc_traces;
  const std::size_t window = kChunksInFlightPerJob * jobs_;
  std::vector<Chunk> slots(window);
  std::vector<trace::NameId> to_run;
  std::size_t submitted = 0;
  std::size_t taken = 0;
  bool input_end = false;
  bool whole = false;  // read it with the single-job reader instead
  bool any_value = false;
  bool stop = false;
  {
    ChunkWorkers workers(jobs_, settings);
    while (!stop && !whole) {
      while (!input_end && !whole && submitted - taken < window) {
        Chunk& c = slots[submitted % window];
        if (cuts == nullptr) {
          if (submitted == file_chunks.count()) {
            input_end = true;
            break;
          }
          c.index = submitted;
          workers.submit(c);
          ++submitted;
          continue;
        }
        c.cut = trace::LineChunks::Status::kChunk;
        switch (cuts->next(c.text, &c.offset)) {
          case trace::LineChunks::Status::kChunk:
            workers.submit(c);
            ++submitted;
            break;
          case trace::LineChunks::Status::kEnd:
            input_end = true;
            break;
          case trace::LineChunks::Status::kLineTooLong:
          case trace::LineChunks::Status::kStreamError:
            whole = true;
            break;
        }
      }
      if (taken == submitted || whole) break;
      Chunk& c = slots[taken % window];
      workers.help_until_done(c);
      ++taken;
      // A line too long for a chunk, or a file that shrank under its reader.
      if (c.cut != trace::LineChunks::Status::kChunk || !c.read.ok) {
        whole = true;
        break;
      }
      any_value = any_value || !c.blank;
      // The chunk's names in the order it met them, after every earlier
      // chunk's: the run's table gives each the id one job would have.
      to_run.resize(c.names->size());
      for (std::size_t i = 0; i < to_run.size(); ++i) {
        to_run[i] = i <= trace::NameTable::kOverflowName ? static_cast<trace::NameId>(i)
                                                         : names_.intern(c.names->name(static_cast<trace::NameId>(i)));
      }
      std::size_t k = 0;
      for (; k < c.trace_count; ++k) {
        if (!take_chunk_trace(c, c.traces[k], to_run, index, tally)) {
          stop = true;
          break;
        }
      }
      // The chunk's results and index lines, each in one write (up to the
      // trace --max-traces stopped at): every trace's are there when there
      // are artifacts.
      if (index_ != nullptr && artifact_error_.empty()) {
        const std::size_t json_end = k < c.trace_count ? c.traces[k].json_end + 1 : c.json.size();
        const std::size_t index_end = k < c.trace_count ? c.traces[k].index_end : c.index_lines.size();
        const std::string* failed = &artifacts_path_;
        try {
          if (artifacts_ != nullptr) artifacts_->append(std::string_view(c.json.data(), json_end));
          failed = &index_path_;
          index_->append(std::string_view(c.index_lines.data(), index_end));
        } catch (const std::exception& e) {
          artifact_error_ = e.what();
          artifact_error_path_ = *failed;
          break;
        }
      }
      if (doc_traces_.size() >= options_.doc_traces) settings.doc_full = true;
      if (!stop) {
        tally.stats.add(c.read.stats);
        continue;
      }
      if (!artifact_error_.empty()) break;
      // --max-traces reached inside the chunk: its counters up to that
      // trace, as the single-job reader stops (a second read of one chunk;
      // a plain file's chunk is read from the file again).
      const trace::ChunkText* text = &c.text;
      trace::ChunkText reread;
      if (cuts == nullptr) {
        if (file_chunks.read(c.index, reread) != trace::LineChunks::Status::kChunk) {
          throw InputError(input, "the file changed while it was read");
        }
        text = &reread;
      }
      std::uint64_t left = k + 1;
      trace::NameTable scratch;
      trace::ReadResult partial = trace::read_padded_trace_text(text->view(), scratch, read_options_,
                                                                [&](trace::Trace&) { return --left > 0; });
      tally.stats.add(partial.stats);
      tally.stopped = true;
    }
    settings.doc_full = true;  // what is still being read is dropped
    workers.cancel_queued();
    for (; taken < submitted; ++taken) workers.help_until_done(slots[taken % window]);
  }
  if (!artifact_error_.empty()) return true;
  if (whole || (!any_value && !stop)) return false;
  tally.stats.compressed = stream != nullptr && stream->compressed();
  return true;
}

CritpathDocument CritpathRun::run() {
  const TempFileRegistration registration(
      {artifacts_.get(), index_.get(), timelines_.get(), span_dump_ ? span_dump_->writer() : nullptr});
  nlohmann::ordered_json inputs = nlohmann::ordered_json::array();

  for (std::size_t index = 0; index < options_.inputs.size() && !reached_max_; ++index) {
    const std::string& input = options_.inputs[index];
    const auto input_started = std::chrono::steady_clock::now();
    InputTally tally;
    tally.last_progress = input_started;
    emit_progress(kEngine, "start", static_cast<double>(index) / input_count(),
                  {{"input", input}, {"algorithm", options_.algorithm}});
    if (jobs_ <= 1 || !read_chunks(index, tally)) {
      const trace::ReadResult result = read_whole(index, tally.traces, tally);
      if (!artifact_error_.empty()) throw InputError(artifact_error_path_, artifact_error_);
      if (!result.ok) throw InputError(input, result.error);
      tally.stats = result.stats;
      tally.stopped = result.stopped;
    }
    if (!artifact_error_.empty()) throw InputError(artifact_error_path_, artifact_error_);
    aggregator_.add_reader_stats(tally.stats);
    inputs.push_back({{"path", input},
                      {"format", format_name(tally.stats)},
                      {"compressed", tally.stats.compressed},
                      {"bytes", tally.stats.bytes},
                      {"traces", tally.traces},
                      {"spans", tally.spans},
                      {"stopped_at_max_traces", tally.stopped}});
    if (tally.traces == 0 && !reached_max_) {
      emit_progress(kEngine, "warning", static_cast<double>(index + 1) / input_count(),
                    {{"input", input}, {"message", "no traces found (not a Jaeger or OTLP document?)"}});
    }
    emit_progress(kEngine, "input_done", static_cast<double>(index + 1) / input_count(),
                  {{"input", input},
                   {"traces", tally.traces},
                   {"spans", tally.spans},
                   {"bytes", tally.stats.bytes},
                   {"elapsed_s", seconds_since(input_started)}});
  }

  if (span_dump_ != nullptr) span_dump_->commit();
  if (timelines_ != nullptr) {
    try {
      timelines_->commit();
    } catch (const std::exception& e) {
      throw InputError(timelines_path_, std::string("cannot write artifacts: ") + e.what());
    }
  }
  for (const auto& [writer, path] :
       {std::pair{artifacts_.get(), &artifacts_path_}, std::pair{index_.get(), &index_path_}}) {
    if (writer == nullptr) continue;
    try {
      writer->commit();
    } catch (const std::exception& e) {
      throw InputError(*path, std::string("cannot write artifacts: ") + e.what());
    }
  }

  const double elapsed_s = seconds_since(started_);
  // The result/1 envelope (engine, version, start time, command line, machine)
  // first, then the critical-path sections.
  const nlohmann::json envelope = new_result_document(kEngine, argc_, argv_);
  nlohmann::ordered_json doc;
  doc["schema"] = kSchema;
  for (const char* key : {"engine", "engine_version", "started_at", "command_line", "machine"}) {
    doc[key] = nlohmann::ordered_json(envelope.at(key));
  }
  doc["algorithm"] = options_.algorithm;
  doc["time_unit"] = "ns";
  doc["config"] = {{"algorithm", options_.algorithm},
                   {"max_traces", options_.max_traces},
                   {"top", options_.top},
                   {"doc_traces", options_.doc_traces},
                   {"doc_bytes", options_.doc_bytes},
                   {"max_spans_per_trace", options_.max_spans_per_trace},
                   {"what_if", options_.what_if_services},
                   {"what_if_no_delays", options_.what_if_no_delays},
                   {"stagger_window_ns", stagger_window_ns_},
                   {"timeline_traces", options_.timeline_traces},
                   {"per_trace", options_.per_trace},
                   {"jobs", jobs_}};
  doc["inputs"] = std::move(inputs);
  doc["summary"] = {{"traces", traces_},
                    {"traces_analyzed", aggregator_.traces_analyzed()},
                    {"spans", spans_},
                    {"elapsed_s", elapsed_s},
                    {"spans_per_s", elapsed_s > 0 ? nlohmann::ordered_json(static_cast<double>(spans_) / elapsed_s)
                                                  : nlohmann::ordered_json(nullptr)},
                    {"stopped_at_max_traces", reached_max_}};
  // Its entries stay text (CritpathDocument::traces), printed by critpath_document_text().
  doc["traces"] = nlohmann::ordered_json::array();
  doc["traces_in_document"] = doc_traces_.size();
  doc["traces_omitted"] = traces_ - doc_traces_.size();
  doc["traces_omitted_over_doc_bytes"] = omitted_over_doc_bytes_;
  doc["artifacts"] = nlohmann::ordered_json(nullptr);
  if (!artifacts_path_.empty()) doc["artifacts"]["critical_paths_ndjson"] = artifacts_path_;
  if (!index_path_.empty()) doc["artifacts"]["trace_index_ndjson"] = index_path_;
  if (span_dump_ != nullptr) {
    doc["artifacts"]["spans_ndjson"] = span_dump_->path();
    doc["artifacts"]["span_dump_traces"] = span_dump_->traces();
  }
  if (timelines_ != nullptr) {
    doc["artifacts"]["timelines_ndjson"] = timelines_path_;
    doc["artifacts"]["timelines_written"] = timelines_written_;
  }
  nlohmann::ordered_json aggregates = aggregator_.to_json();
  for (auto& [key, value] : aggregates.items()) doc[key] = std::move(value);
  // Moved, not copied: one measurement (with its CDF) per operation, service and RPC edge.
  analyze::MeasurementLists lists = aggregator_.measurements(options_.algorithm);
  doc["measurements"] = std::move(lists.measurements);
  doc["unavailable"] = std::move(lists.unavailable);

  emit_progress(kEngine, "done", 1.0,
                {{"traces", traces_},
                 {"spans", spans_},
                 {"elapsed_s", elapsed_s},
                 {"out", options_.out.empty() ? std::string("-") : options_.out}});
  return CritpathDocument{std::move(doc), std::move(doc_traces_)};
}

}  // namespace

void install_critpath_signal_handlers() {
  std::signal(SIGINT, remove_temp_and_reraise);
  std::signal(SIGTERM, remove_temp_and_reraise);
  std::signal(SIGHUP, remove_temp_and_reraise);
}

CritpathDocument run_critpath(const CritpathOptions& options, std::size_t jobs, int argc, char** argv) {
  return CritpathRun(options, jobs, argc, argv).run();
}

std::string critpath_document_text(const CritpathDocument& doc, int indent) {
  constexpr auto kReplace = nlohmann::ordered_json::error_handler_t::replace;
  if (!doc.document.is_object() || doc.document.empty()) return doc.document.dump(indent, ' ', false, kReplace);
  // dump()'s form of an object, one member at a time: "{\n", each member
  // indented as "key": value, ",\n" between them, "\n}".
  const std::size_t pad = static_cast<std::size_t>(indent);
  std::string text;
  // Room for the results, which print about twice their compact size, and
  // the rest: the text is not copied again as it grows.
  std::size_t traces_bytes = 0;
  for (const std::string& t : doc.traces) traces_bytes += t.size();
  text.reserve(2 * traces_bytes + (std::size_t{64} << 10));
  text += "{\n";
  bool first = true;
  for (auto it = doc.document.begin(); it != doc.document.end(); ++it) {
    if (!first) text += ",\n";
    first = false;
    text.append(pad, ' ');
    text += nlohmann::ordered_json(it.key()).dump(-1, ' ', false, kReplace);
    text += ": ";
    if (it.key() != "traces" || doc.traces.empty()) {
      append_nested(it.value().dump(indent, ' ', false, kReplace), indent, 1, text);
      continue;
    }
    text += "[\n";
    for (std::size_t i = 0; i < doc.traces.size(); ++i) {
      if (i > 0) text += ",\n";
      text.append(2 * pad, ' ');
      append_pretty_json_or_reparse(doc.traces[i], indent, 2, text);
    }
    text += '\n';
    text.append(pad, ' ');
    text += ']';
  }
  text += "\n}";
  return text;
}

}  // namespace tailscope::analyze
