// The span recorder: client and server spans of every RPC, spans of simulated
// store operations, and the five async-probe timestamps of every async or
// deferred call (exec/async_probe.h, the same probe the async-models study
// uses).
//
// Hot path: record() appends to a buffer owned by the calling thread, under
// that buffer's own mutex — uncontended except for the moment drain() swaps
// the buffer out, so it costs an uncontended lock, no allocation beyond the
// vector's growth. A thread's buffer is registered once (under the registry
// mutex) on its first span and outlives the thread, so spans of exited
// threads are still exported. A SpanSpiller drains the buffers to disk
// during the run (binary records, encoded to the span file at stop), so a
// long traced run holds about one period of spans in memory (`make soak`
// saw every service's RSS grow with the run's length while the spans were
// kept until shutdown).
//
// Sampling is decided once at the root (the front) with probability
// sample_rate and travels in the trace context; unsampled requests record
// nothing anywhere downstream. The root decision can be paused while the
// service runs (SIGUSR1 pauses, SIGUSR2 resumes at sample_rate: see
// take_sampling_signal), so tracing on and off can be compared on one warmed
// graph instead of two fresh ones (issue 30: fresh graphs differed more from
// each other than tracing costs).
#pragma once

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/async_probe.h"
#include "net/frame.h"
#include "trace/trace.h"

namespace tailscope::svc {

enum class SpanRole : uint8_t { kServer, kClient, kInternal };

struct SpanRecord {
  uint64_t trace_id_high = 0, trace_id_low = 0;
  uint64_t span_id = 0, parent_span_id = 0;
  const std::string* service = nullptr;    // points into the Topology (lives as long as the process)
  const std::string* operation = nullptr;  // ditto
  SpanRole role = SpanRole::kInternal;
  bool error = false;
  net::RpcStatus status = net::RpcStatus::kOk;
  const char* launch = nullptr;  // "async", "deferred", "sync" for calls; nullptr otherwise
  // Real store operations: the db.system tag (memcached, redis, postgresql) and,
  // when the server plays another system's role, tailscope.store_role (mongodb).
  const char* db_system = nullptr;
  const char* store_role = nullptr;
  // A follower fan-out's store span (`members` / `for_each`): how many
  // followers it wrote to, tag tailscope.followers; -1: not a fan-out.
  int64_t followers = -1;
  // A real cache read with a miss path (on_miss): what the server answered, tag
  // tailscope.cache (trace.h); kNone elsewhere.
  trace::CacheResult cache = trace::CacheResult::kNone;
  int64_t start_ns = 0, end_ns = 0;  // monotonic
  bool has_probe = false;
  exec::AsyncProbe probe;
};

// Receives every recorded span as it is recorded (live export,
// otlp_exporter.h). offer() runs on the handler's thread: it must not block.
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  virtual void offer(const SpanRecord& span) noexcept = 0;
};

class Tracer {
 public:
  // sample_rate in [0, 1]; 0 disables recording entirely.
  static void configure(double sample_rate, size_t max_spans_per_thread = 1 << 20);
  static double sample_rate();
  static bool sample_root();  // the front's sampling decision (false while paused)
  // Paused: every new root request is unsampled, as with sample_rate 0;
  // resumed: sampled at sample_rate again. Requests already in flight keep
  // the decision they were given. sample_rate() is unchanged by a pause.
  static void set_sampling_paused(bool paused);
  static bool sampling_paused();
  static uint64_t new_id();  // random non-zero 64-bit id
  static void record(const SpanRecord& span);
  // Live export: every recorded span is also offered to `sink` (nullptr: none).
  // Set it before recording starts and clear it after every recording thread
  // has stopped, before the sink is destroyed.
  static void set_sink(SpanSink* sink);
  // All spans recorded so far (call only when no thread is recording).
  static std::vector<SpanRecord> collect();
  // Moves every span recorded so far into `out` (appended) and empties the
  // buffers; safe while other threads record.
  static void drain(std::vector<SpanRecord>* out);
  static int64_t dropped();
  static void clear();
  // Span buffers made so far: one per thread recording at once (an exited
  // thread's buffer is reused), not one per thread ever started.
  static size_t buffers();
  // monotonic → Unix epoch ns, fixed at configure().
  static int64_t to_unix_ns(int64_t monotonic);
};

// The run-time sampling switch of a running service: SIGUSR1 pauses the root
// sampling decision, SIGUSR2 resumes it. A service process blocks both with
// its stop signals and takes them in its wait loop; the supervisor (--all)
// forwards them to every service it runs (only the front decides sampling;
// the others follow the parent's flag), so a caller signals the one pid it
// started.
inline constexpr int kPauseSamplingSignal = SIGUSR1;
inline constexpr int kResumeSamplingSignal = SIGUSR2;
// Applies `sig` if it is one of the two (and says so); any other signal: false.
bool take_sampling_signal(int sig);
// Applies the switch signals already pending (blocked), without waiting: a
// service calls it before it starts serving, so a pause sent while it was
// starting (the supervisor's, to a restarted service) holds from its first
// request, not only from its wait loop on.
void take_pending_sampling_signals();
// A service's wait: wait_for_stop (core/stop_signals.h) on `signals`, which
// holds the two switch signals too, applying each switch signal taken on the
// way; returns the first other signal, or 0 at `deadline_ns` (0: none).
int wait_for_stop_switching_sampling(const sigset_t& signals, int64_t deadline_ns);

// One span per line (NDJSON), every field including the five probe stamps
// (Unix ns): the lossless form that per-process files are merged from.
nlohmann::json span_to_json(const SpanRecord& s);
// The same object as one line of text (span_to_json(s).dump() + '\n', up to
// key order), appended to `out` without building a JSON tree: every span of a
// traced run is formatted so when its service stops (span_spill.h).
void append_span_line(std::string* out, const SpanRecord& s);
// The same, with the monotonic → Unix offset given (a spill block's own,
// which may be another process's: `--decode-spill`).
void append_span_line(std::string* out, const SpanRecord& s, int64_t unix_offset_ns);

// Streams the recorded spans to disk during the run and writes
// `<dir>/<stem>.spans.jsonl` when the service stops: every `period_ns` a
// background thread drains the buffers and appends them, in binary form
// (span_spill.h: a fixed-size record per span, each name once), to a spill
// file beside the target; finish() drains what is left, converts the spill to
// NDJSON lines (append_span_line) in a temporary file and renames it into
// place (fsync first), so merge_span_files never reads half a file. The
// encoding runs at stop, not on the cores the traced service is using.
// Without finish() (an exception) the destructor removes the spill; a killed
// process leaves it as `.<stem>.spans.spill.tmp.XXXXXX`, which
// `tailscope-svc --decode-spill FILE` converts.
class SpanSpiller {
 public:
  SpanSpiller(const std::string& dir, const std::string& stem, int64_t period_ns = 1'000'000'000);
  ~SpanSpiller();
  SpanSpiller(const SpanSpiller&) = delete;
  SpanSpiller& operator=(const SpanSpiller&) = delete;

  struct Summary {
    int64_t spans = 0;              // spilled during the run
    int64_t spans_encoded = 0;      // converted to NDJSON at stop (= spans)
    int64_t encode_at_stop_ns = 0;  // the conversion's wall time, the NDJSON file's fsync included
  };
  // Call after every recording thread has stopped.
  Summary finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Writes `<dir>/<stem>.spans.jsonl` atomically.
void write_span_lines(const std::vector<SpanRecord>& spans, const std::string& dir, const std::string& stem);
// Merges every `*.spans.jsonl` under `dir` into `<out_dir>/traces.jaeger.json`
// and `<out_dir>/traces.otlp.json` (whole traces: spans of every process;
// out_dir "" = dir). A killed service's binary spill found in `dir` is
// converted to its span file first, then removed (span_spill.h). Returns
// {traces, spans, bad_lines, recovered_spills, paths}.
nlohmann::json merge_span_files(const std::string& dir, const std::string& out_dir = "");

}  // namespace tailscope::svc
