#include "svc/tracer.h"

#include <dirent.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "core/clock.h"
#include "core/result_writer.h"
#include "core/thread_name.h"
#include "trace/trace.h"
#include "trace/trace_writer.h"

namespace tailscope::svc {
namespace {

struct ThreadBuffer {
  std::mutex mu;  // record() vs drain(): held for one push_back or one swap
  std::vector<SpanRecord> spans;
  int64_t dropped = 0;
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;  // every buffer ever made (export reads them all)
  std::vector<std::shared_ptr<ThreadBuffer>> idle;     // buffers of exited threads, reused by new ones
  std::atomic<double> sample_rate{0.0};
  std::atomic<SpanSink*> sink{nullptr};
  size_t max_spans_per_thread = 1 << 20;
  int64_t unix_offset_ns = realtime_ns() - monotonic_ns();
};

Registry& registry() {
  static Registry r;
  return r;
}

std::mt19937_64& id_rng() {
  thread_local std::mt19937_64 g(std::random_device{}() ^ (static_cast<uint64_t>(monotonic_ns()) << 1));
  return g;
}

// A thread's claim on a buffer. Buffers outlive their threads (the spans are
// exported later) but are recycled: a thread that exits hands its buffer back
// and the next new thread appends to it. Without this, std-async — a thread
// per call — registered one more buffer (with its reserved capacity) for every
// traced call, for the whole run: `make soak` saw its RSS climb interval
// after interval.
struct BufferLease {
  std::shared_ptr<ThreadBuffer> buffer;
  BufferLease() {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    if (!r.idle.empty()) {
      buffer = std::move(r.idle.back());
      r.idle.pop_back();
      return;
    }
    buffer = std::make_shared<ThreadBuffer>();
    buffer->spans.reserve(64);
    r.buffers.push_back(buffer);
  }
  ~BufferLease() {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    r.idle.push_back(std::move(buffer));
  }
  BufferLease(const BufferLease&) = delete;
  BufferLease& operator=(const BufferLease&) = delete;
};

ThreadBuffer& my_buffer() {
  thread_local BufferLease lease;
  return *lease.buffer;
}

std::string hex16(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

const char* role_name(SpanRole r) {
  switch (r) {
    case SpanRole::kServer:
      return "server";
    case SpanRole::kClient:
      return "client";
    case SpanRole::kInternal:
      return "internal";
  }
  return "internal";
}

}  // namespace

void Tracer::configure(double sample_rate, size_t max_spans_per_thread) {
  auto& r = registry();
  r.sample_rate = std::clamp(sample_rate, 0.0, 1.0);
  r.max_spans_per_thread = max_spans_per_thread;
  r.unix_offset_ns = realtime_ns() - monotonic_ns();
}
double Tracer::sample_rate() { return registry().sample_rate.load(std::memory_order_relaxed); }
bool Tracer::sample_root() {
  const double rate = sample_rate();
  if (rate <= 0) return false;
  if (rate >= 1) return true;
  return std::uniform_real_distribution<double>(0, 1)(id_rng()) < rate;
}
uint64_t Tracer::new_id() {
  uint64_t v;
  do v = id_rng()();
  while (v == 0);
  return v;
}
void Tracer::set_sink(SpanSink* sink) { registry().sink.store(sink, std::memory_order_release); }
void Tracer::record(const SpanRecord& span) {
  // The live sink sees every span, also those past the file buffer's bound.
  if (SpanSink* sink = registry().sink.load(std::memory_order_acquire)) sink->offer(span);
  ThreadBuffer& b = my_buffer();
  std::lock_guard lock(b.mu);
  if (b.spans.size() >= registry().max_spans_per_thread) {
    ++b.dropped;  // bounded memory between drains: keep the first spans, count the rest
    return;
  }
  b.spans.push_back(span);
}
std::vector<SpanRecord> Tracer::collect() {
  std::lock_guard lock(registry().mu);
  std::vector<SpanRecord> all;
  for (const auto& b : registry().buffers) {
    std::lock_guard buffer_lock(b->mu);
    all.insert(all.end(), b->spans.begin(), b->spans.end());
  }
  return all;
}
void Tracer::drain(std::vector<SpanRecord>* out) {
  std::lock_guard lock(registry().mu);
  std::vector<SpanRecord> taken;
  for (const auto& b : registry().buffers) {
    {
      std::lock_guard buffer_lock(b->mu);
      taken.swap(b->spans);  // the recording thread keeps going on an empty vector
    }
    out->insert(out->end(), taken.begin(), taken.end());
    taken.clear();
  }
}
int64_t Tracer::dropped() {
  std::lock_guard lock(registry().mu);
  int64_t n = 0;
  for (const auto& b : registry().buffers) {
    std::lock_guard buffer_lock(b->mu);
    n += b->dropped;
  }
  return n;
}
size_t Tracer::buffers() {
  std::lock_guard lock(registry().mu);
  return registry().buffers.size();
}
void Tracer::clear() {
  std::lock_guard lock(registry().mu);
  for (const auto& b : registry().buffers) {
    std::lock_guard buffer_lock(b->mu);
    b->spans.clear();
    b->dropped = 0;
  }
}
int64_t Tracer::to_unix_ns(int64_t monotonic) { return monotonic + registry().unix_offset_ns; }

nlohmann::json span_to_json(const SpanRecord& s) {
  nlohmann::json j = {{"trace_id", hex16(s.trace_id_high) + hex16(s.trace_id_low)},
                      {"span_id", hex16(s.span_id)},
                      {"parent_span_id", s.parent_span_id ? hex16(s.parent_span_id) : ""},
                      {"service", s.service ? *s.service : "unknown_service"},
                      {"operation", s.operation ? *s.operation : "unknown"},
                      {"kind", role_name(s.role)},
                      {"error", s.error},
                      {"status", status_name(s.status)},
                      {"start_unix_ns", Tracer::to_unix_ns(s.start_ns)},
                      {"duration_ns", s.end_ns - s.start_ns}};
  if (s.launch) j["launch"] = s.launch;
  if (s.db_system) j["tags"]["db.system"] = s.db_system;
  if (s.store_role) j["tags"]["tailscope.store_role"] = s.store_role;
  if (s.has_probe) {
    const auto& p = s.probe;
    auto u = [](int64_t t) { return t ? Tracer::to_unix_ns(t) : 0; };
    j["probe"] = {{"trigger_async_fn", u(p.trigger_async_fn_ns)},
                  {"fn_start", u(p.fn_start_ns)},
                  {"fn_end", u(p.fn_end_ns)},
                  {"request_val", u(p.request_val_ns)},
                  {"val_received", u(p.val_received_ns)},
                  {"deferred", p.deferred}};
    if (p.complete()) {
      j["scheduling_delay_ns"] = p.scheduling_delay_ns();
      j["join_delay_ns"] = p.join_delay_ns();
    }
  }
  return j;
}

namespace {

void append_json_string(std::string* out, std::string_view text) {
  out->push_back('"');
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out->append(esc);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

void append_int(std::string* out, int64_t v) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, v);
  (void)ec;  // 24 characters hold every int64
  out->append(digits, end);
}

void append_hex16(std::string* out, uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int shift = 60; shift >= 0; shift -= 4) out->push_back(kDigits[(v >> shift) & 0xf]);
}

}  // namespace

void append_span_line(std::string* out, const SpanRecord& s) {
  out->append("{\"trace_id\":\"");
  append_hex16(out, s.trace_id_high);
  append_hex16(out, s.trace_id_low);
  out->append("\",\"span_id\":\"");
  append_hex16(out, s.span_id);
  out->append("\",\"parent_span_id\":\"");
  if (s.parent_span_id) append_hex16(out, s.parent_span_id);
  out->append("\",\"service\":");
  append_json_string(out, s.service ? *s.service : "unknown_service");
  out->append(",\"operation\":");
  append_json_string(out, s.operation ? *s.operation : "unknown");
  out->append(",\"kind\":\"");
  out->append(role_name(s.role));
  out->append("\",\"error\":");
  out->append(s.error ? "true" : "false");
  out->append(",\"status\":");
  append_json_string(out, status_name(s.status));
  out->append(",\"start_unix_ns\":");
  append_int(out, Tracer::to_unix_ns(s.start_ns));
  out->append(",\"duration_ns\":");
  append_int(out, s.end_ns - s.start_ns);
  if (s.launch) {
    out->append(",\"launch\":");
    append_json_string(out, s.launch);
  }
  if (s.db_system) {
    out->append(",\"tags\":{\"db.system\":");
    append_json_string(out, s.db_system);
    if (s.store_role) {
      out->append(",\"tailscope.store_role\":");
      append_json_string(out, s.store_role);
    }
    out->push_back('}');
  }
  if (s.has_probe) {
    const auto& p = s.probe;
    auto u = [](int64_t t) { return t ? Tracer::to_unix_ns(t) : 0; };
    out->append(",\"probe\":{\"trigger_async_fn\":");
    append_int(out, u(p.trigger_async_fn_ns));
    out->append(",\"fn_start\":");
    append_int(out, u(p.fn_start_ns));
    out->append(",\"fn_end\":");
    append_int(out, u(p.fn_end_ns));
    out->append(",\"request_val\":");
    append_int(out, u(p.request_val_ns));
    out->append(",\"val_received\":");
    append_int(out, u(p.val_received_ns));
    out->append(",\"deferred\":");
    out->append(p.deferred ? "true" : "false");
    out->push_back('}');
    if (p.complete()) {
      out->append(",\"scheduling_delay_ns\":");
      append_int(out, p.scheduling_delay_ns());
      out->append(",\"join_delay_ns\":");
      append_int(out, p.join_delay_ns());
    }
  }
  out->append("}\n");
}

void write_span_lines(const std::vector<SpanRecord>& spans, const std::string& dir, const std::string& stem) {
  ensure_directory(dir);
  std::string text;
  for (const auto& s : spans) {
    text += span_to_json(s).dump();
    text += '\n';
  }
  write_file_atomic(dir + "/" + stem + ".spans.jsonl", text);
}

struct SpanSpiller::State {
  AtomicFileWriter file;
  int64_t period_ns;
  int64_t written = 0;
  std::mutex mu;  // stop flag + the file (the thread and finish() both write)
  std::condition_variable wake;
  bool stop = false;
  std::vector<SpanRecord> batch;
  std::thread thread;

  State(const std::string& path, int64_t period) : file(path), period_ns(period) {}

  // Caller holds mu.
  void spill() {
    batch.clear();
    Tracer::drain(&batch);
    std::string text;
    text.reserve(batch.size() * 320);
    for (const auto& s : batch) append_span_line(&text, s);
    file.append(text);
    file.flush();  // a second's spans at a time: nothing accumulates in memory
    written += static_cast<int64_t>(batch.size());
  }
};

SpanSpiller::SpanSpiller(const std::string& dir, const std::string& stem, int64_t period_ns) {
  if (period_ns <= 0) throw std::invalid_argument("SpanSpiller: the period must be positive");
  ensure_directory(dir);
  state_ = std::make_unique<State>(dir + "/" + stem + ".spans.jsonl", period_ns);
  State* st = state_.get();
  st->thread = std::thread([st] {
    name_this_thread("svc-spill");
    std::unique_lock lock(st->mu);
    while (!st->wake.wait_for(lock, std::chrono::nanoseconds(st->period_ns), [st] { return st->stop; })) {
      try {
        st->spill();
      } catch (const std::exception& e) {
        // A full disk: stop spilling; finish() retries once and reports the error.
        std::fprintf(stderr, "tailscope-svc: writing spans failed: %s\n", e.what());
        return;
      }
    }
  });
}

SpanSpiller::~SpanSpiller() {
  if (!state_) return;
  {
    std::lock_guard lock(state_->mu);
    state_->stop = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  // Without finish() the AtomicFileWriter removes its temporary file.
}

int64_t SpanSpiller::finish() {
  {
    std::lock_guard lock(state_->mu);
    state_->stop = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  std::lock_guard lock(state_->mu);
  state_->spill();
  state_->file.commit();
  return state_->written;
}

nlohmann::json merge_span_files(const std::string& dir, const std::string& out_dir_arg) {
  const std::string out_dir = out_dir_arg.empty() ? dir : out_dir_arg;
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 12 && name.ends_with(".spans.jsonl")) files.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  trace::NameTable names;
  std::map<std::string, trace::Trace> traces;  // by trace id
  int64_t span_count = 0, bad_lines = 0;
  for (const auto& path : files) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("trace_id")) {
        ++bad_lines;
        continue;
      }
      trace::Trace& t = traces[j["trace_id"].get<std::string>()];
      t.trace_id = j["trace_id"];
      trace::Span sp;
      sp.span_id = t.store(j.value("span_id", ""));
      const std::string parent = j.value("parent_span_id", "");
      if (!parent.empty()) {
        sp.parent_span_id = t.store(parent);
        sp.parent_ref = trace::RefType::kChildOf;
      }
      sp.kind = trace::parse_span_kind(j.value("kind", ""));
      sp.error = j.value("error", false);
      sp.service = names.intern(j.value("service", "unknown_service"));
      sp.operation = names.intern(j.value("operation", "unknown"));
      sp.start_ns = j.value("start_unix_ns", int64_t{0});
      sp.duration_ns = j.value("duration_ns", int64_t{0});
      if (j.contains("scheduling_delay_ns")) sp.probe_scheduling_delay_ns = j["scheduling_delay_ns"];
      if (j.contains("join_delay_ns")) sp.probe_join_delay_ns = j["join_delay_ns"];
      t.spans.push_back(sp);
      ++span_count;
    }
  }
  std::vector<trace::Trace> ordered;
  ordered.reserve(traces.size());
  for (auto& [_, t] : traces) ordered.push_back(std::move(t));
  // Spans in start order, so a reader sees the root first.
  for (auto& t : ordered)
    std::stable_sort(t.spans.begin(), t.spans.end(),
                     [](const trace::Span& a, const trace::Span& b) { return a.start_ns < b.start_ns; });
  write_file_atomic(out_dir + "/traces.jaeger.json", trace::jaeger_json_document(ordered, names));
  write_file_atomic(out_dir + "/traces.otlp.json", trace::otlp_json_document(ordered, names));
  return {{"traces", ordered.size()},
          {"spans", span_count},
          {"bad_lines", bad_lines},
          {"jaeger", out_dir + "/traces.jaeger.json"},
          {"otlp", out_dir + "/traces.otlp.json"}};
}

}  // namespace tailscope::svc
