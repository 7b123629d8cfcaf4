#include "svc/tracer.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "core/clock.h"
#include "core/decimal.h"
#include "core/result_writer.h"
#include "core/stop_signals.h"
#include "core/thread_name.h"
#include "svc/span_spill.h"
#include "trace/trace.h"
#include "trace/trace_writer.h"

namespace tailscope::svc {
namespace {

// record() vs drain(): held for one push_back or one swap, so it is almost
// never contended. A spin lock's release is a plain store, where a mutex's
// unlock is a second atomic read-modify-write on every span.
class SpinLock {
 public:
  void lock() noexcept {
    while (held_.exchange(true, std::memory_order_acquire))
      while (held_.load(std::memory_order_relaxed)) std::this_thread::yield();  // the other side is mid-swap
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

struct ThreadBuffer {
  SpinLock mu;
  std::vector<SpanRecord> spans;
  // drain() swaps `spans` with this emptied vector, which kept its capacity:
  // the recording thread gets storage back instead of regrowing from zero
  // (log2 of a period's spans allocations and copies per drain).
  std::vector<SpanRecord> spare;
  int64_t dropped = 0;
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;  // every buffer ever made (export reads them all)
  std::vector<std::shared_ptr<ThreadBuffer>> idle;     // buffers of exited threads, reused by new ones
  std::atomic<SpanSink*> sink{nullptr};
  size_t max_spans_per_thread = 1 << 20;
  int64_t unix_offset_ns = realtime_ns() - monotonic_ns();
};

Registry& registry() {
  static Registry r;
  return r;
}

// xoshiro256** (Blackman & Vigna): ids need to be distinct, not secret, and
// this is a handful of instructions per id where mt19937_64 regenerates its
// 312-word state every 312 draws (73 instructions per id, the sampling
// decision through uniform_real_distribution 96: tracer_benchmark).
class IdGenerator {
 public:
  // Seeded on first use, not in a constructor: a thread_local with a trivial
  // type is one TLS load per access, with no per-access initialisation guard.
  uint64_t operator()() noexcept {
    if (!seeded_) [[unlikely]]
      seed();
    const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }

 private:
  static uint64_t splitmix64(uint64_t* x) noexcept {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  void seed() {
    uint64_t x = (uint64_t{std::random_device{}()} << 32) ^ static_cast<uint64_t>(monotonic_ns()) ^
                 reinterpret_cast<uintptr_t>(this);
    for (auto& word : s_) word = splitmix64(&x);
    seeded_ = true;
  }
  uint64_t s_[4];
  bool seeded_;
};

IdGenerator& id_rng() {
  thread_local IdGenerator g;  // zero-initialised: seeded on its first draw
  return g;
}

// Outside the Registry (a function-local static, guarded on every access):
// read on every request's sampling decision.
constinit std::atomic<double> g_sample_rate{0.0};
// Set by a signal (take_sampling_signal) from the service's main thread, read
// by every root request: relaxed, as a request that races a flip may go
// either way.
constinit std::atomic<bool> g_sampling_paused{false};

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
  g_sample_rate.store(std::clamp(sample_rate, 0.0, 1.0), std::memory_order_relaxed);
  r.max_spans_per_thread = max_spans_per_thread;
  r.unix_offset_ns = realtime_ns() - monotonic_ns();
}
double Tracer::sample_rate() { return g_sample_rate.load(std::memory_order_relaxed); }
void Tracer::set_sampling_paused(bool paused) { g_sampling_paused.store(paused, std::memory_order_relaxed); }
bool Tracer::sampling_paused() { return g_sampling_paused.load(std::memory_order_relaxed); }
bool take_sampling_signal(int sig) {
  if (sig != kPauseSamplingSignal && sig != kResumeSamplingSignal) return false;
  Tracer::set_sampling_paused(sig == kPauseSamplingSignal);
  return true;
}
void take_pending_sampling_signals() {
  const sigset_t switches = signal_set({kPauseSamplingSignal, kResumeSamplingSignal});
  const timespec now{0, 0};
  int sig;
  while ((sig = sigtimedwait(&switches, nullptr, &now)) > 0) take_sampling_signal(sig);
}
int wait_for_stop_switching_sampling(const sigset_t& signals, int64_t deadline_ns) {
  for (;;) {
    const int sig = wait_for_stop(signals, deadline_ns);
    if (!take_sampling_signal(sig)) return sig;
  }
}
bool Tracer::sample_root() {
  if (g_sampling_paused.load(std::memory_order_relaxed)) return false;
  const double rate = sample_rate();
  if (rate <= 0) return false;
  if (rate >= 1) return true;
  return static_cast<double>(id_rng()() >> 11) * 0x1.0p-53 < rate;  // uniform in [0, 1), 53 bits
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
  if (b.spans.size() >= registry().max_spans_per_thread) [[unlikely]] {
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
  for (const auto& b : registry().buffers) {
    {
      std::lock_guard buffer_lock(b->mu);
      b->spans.swap(b->spare);  // the recording thread keeps going on the emptied spare
    }
    // Only drain() (under the registry mutex) touches the spare outside the lock.
    out->insert(out->end(), b->spare.begin(), b->spare.end());
    b->spare.clear();
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
  if (s.followers >= 0) j["tags"]["tailscope.followers"] = s.followers;
  if (s.cache != trace::CacheResult::kNone) j["tags"][trace::kCacheTag] = trace::cache_result_name(s.cache);
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

// The line is written through a pointer into space reserved for its longest
// form, then trimmed: one size check per span instead of one per character
// and per field (the push_back/append form cost ~7 000 instructions a span,
// more than the whole handler path: tracer_benchmark's encode part). The
// spiller runs on the same cores as the handlers, so its cost is the
// service's too.
class LineWriter {
 public:
  LineWriter(std::string* out, size_t max_bytes) : out_(out), old_size_(out->size()) {
    out->resize(old_size_ + max_bytes);
    p_ = out->data() + old_size_;
  }
  ~LineWriter() { out_->resize(static_cast<size_t>(p_ - out_->data())); }
  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

  template <size_t N>
  void literal(const char (&text)[N]) {
    std::memcpy(p_, text, N - 1);
    p_ += N - 1;
  }
  void text(std::string_view t) {
    std::memcpy(p_, t.data(), t.size());
    p_ += t.size();
  }
  void json_string(std::string_view t) {
    *p_++ = '"';
    for (size_t at = 0; at < t.size();) {
      // Names rarely need an escape: copy each clean run at once.
      const size_t clean = static_cast<size_t>(
          std::find_if(t.begin() + static_cast<std::ptrdiff_t>(at), t.end(), needs_escape) - t.begin());
      text(t.substr(at, clean - at));
      if (clean == t.size()) break;
      const char c = t[clean];
      if (c == '"' || c == '\\') {
        *p_++ = '\\';
        *p_++ = c;
      } else {
        literal("\\u00");
        hex_byte(static_cast<unsigned char>(c));
      }
      at = clean + 1;
    }
    *p_++ = '"';
  }
  // Digit pairs, eight digits per division (core/decimal.h): std::to_chars
  // took ~235 instructions for a 19-digit Unix ns stamp, and a line holds up
  // to seven of them.
  void integer(int64_t v) { p_ = write_signed_decimal(p_, v); }
  void hex16(uint64_t v) {
    for (int i = 7; i >= 0; --i, v >>= 8) std::memcpy(p_ + 2 * i, &kHexPairs[2 * (v & 0xff)], 2);
    p_ += 16;
  }
  static size_t max_json_string(std::string_view t) { return 2 + 6 * t.size(); }  // every byte as \u00XX

 private:
  static bool needs_escape(char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; }
  void hex_byte(unsigned char b) {
    std::memcpy(p_, &kHexPairs[2 * b], 2);
    p_ += 2;
  }
  static constexpr auto kHexPairs = [] {
    constexpr char kDigits[] = "0123456789abcdef";
    std::array<char, 512> t{};
    for (int i = 0; i < 256; ++i) t[2 * i] = kDigits[i >> 4], t[2 * i + 1] = kDigits[i & 0xf];
    return t;
  }();

  std::string* out_;
  size_t old_size_;
  char* p_;
};

// Every fixed part of a line at its longest — the literals (280 bytes), four
// ids (64), the kind (8), two booleans (10) and nine integers (180) — with
// room to spare; the strings are added per span.
constexpr size_t kMaxFixedLineBytes = 640;

}  // namespace

void append_span_line(std::string* out, const SpanRecord& s) { append_span_line(out, s, registry().unix_offset_ns); }

void append_span_line(std::string* out, const SpanRecord& s, int64_t unix_offset_ns) {
  const std::string_view service = s.service ? std::string_view(*s.service) : "unknown_service";
  const std::string_view operation = s.operation ? std::string_view(*s.operation) : "unknown";
  const std::string_view status = status_name(s.status);
  const std::string_view launch = s.launch ? std::string_view(s.launch) : std::string_view();
  const std::string_view db_system = s.db_system ? std::string_view(s.db_system) : std::string_view();
  const std::string_view store_role = s.store_role ? std::string_view(s.store_role) : std::string_view();
  // A store span's tags: their literals (48 bytes), a fan-out's follower
  // count (its literal, 24 bytes, and an integer, ≤ 20), a cache read's answer
  // ("tailscope.cache":"miss" and its comma, 26 bytes), and the two names.
  constexpr size_t kTagLiteralBytes = 138;
  LineWriter w(out, kMaxFixedLineBytes + LineWriter::max_json_string(service) + LineWriter::max_json_string(operation) +
                        LineWriter::max_json_string(status) + LineWriter::max_json_string(launch) + kTagLiteralBytes +
                        LineWriter::max_json_string(db_system) + LineWriter::max_json_string(store_role));
  w.literal("{\"trace_id\":\"");
  w.hex16(s.trace_id_high);
  w.hex16(s.trace_id_low);
  w.literal("\",\"span_id\":\"");
  w.hex16(s.span_id);
  w.literal("\",\"parent_span_id\":\"");
  if (s.parent_span_id) w.hex16(s.parent_span_id);
  w.literal("\",\"service\":");
  w.json_string(service);
  w.literal(",\"operation\":");
  w.json_string(operation);
  w.literal(",\"kind\":\"");
  w.text(role_name(s.role));
  w.literal("\",\"error\":");
  w.text(s.error ? "true" : "false");
  w.literal(",\"status\":");
  w.json_string(status);
  w.literal(",\"start_unix_ns\":");
  w.integer(s.start_ns + unix_offset_ns);
  w.literal(",\"duration_ns\":");
  w.integer(s.end_ns - s.start_ns);
  if (s.launch) {
    w.literal(",\"launch\":");
    w.json_string(launch);
  }
  if (s.db_system || s.followers >= 0 || s.cache != trace::CacheResult::kNone) {
    // The tags object's members in span_to_json's order, each after a comma but the first.
    w.literal(",\"tags\":{");
    if (s.db_system) {
      w.literal("\"db.system\":");
      w.json_string(db_system);
      if (s.store_role) {
        w.literal(",\"tailscope.store_role\":");
        w.json_string(store_role);
      }
    }
    if (s.followers >= 0) {
      if (s.db_system) w.literal(",");
      w.literal("\"tailscope.followers\":");
      w.integer(s.followers);
    }
    if (s.cache != trace::CacheResult::kNone) {
      if (s.db_system || s.followers >= 0) w.literal(",");
      w.literal("\"tailscope.cache\":\"");
      w.text(trace::cache_result_name(s.cache));
      w.literal("\"");
    }
    w.literal("}");
  }
  if (s.has_probe) {
    const auto& p = s.probe;
    auto u = [unix_offset_ns](int64_t t) { return t ? t + unix_offset_ns : 0; };
    w.literal(",\"probe\":{\"trigger_async_fn\":");
    w.integer(u(p.trigger_async_fn_ns));
    w.literal(",\"fn_start\":");
    w.integer(u(p.fn_start_ns));
    w.literal(",\"fn_end\":");
    w.integer(u(p.fn_end_ns));
    w.literal(",\"request_val\":");
    w.integer(u(p.request_val_ns));
    w.literal(",\"val_received\":");
    w.integer(u(p.val_received_ns));
    w.literal(",\"deferred\":");
    w.text(p.deferred ? "true" : "false");
    w.literal("}");
    if (p.complete()) {
      w.literal(",\"scheduling_delay_ns\":");
      w.integer(p.scheduling_delay_ns());
      w.literal(",\"join_delay_ns\":");
      w.integer(p.join_delay_ns());
    }
  }
  w.literal("}\n");
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
  // The binary spill (span_spill.h): never committed, so its destructor
  // removes it; a killed service leaves it for `tailscope-svc --decode-spill`.
  AtomicFileWriter spill;
  std::string target;  // <dir>/<stem>.spans.jsonl
  int64_t period_ns;
  int64_t written = 0;
  std::mutex mu;  // stop flag + the file (the thread and finish() both write)
  std::condition_variable wake;
  bool stop = false;
  std::vector<SpanRecord> batch;
  std::string bytes;  // reused: a period's spill block, one allocation for the run
  SpillEncoder encoder;
  std::thread thread;

  State(const std::string& dir, const std::string& stem, int64_t period)
      : spill(dir + "/" + stem + ".spans.spill"), target(dir + "/" + stem + ".spans.jsonl"), period_ns(period) {
    SpillEncoder::append_header(&bytes, stem);
    spill.append(bytes);  // goes out with the first block (flush())
  }

  // Caller holds mu.
  void spill_now() {
    batch.clear();
    Tracer::drain(&batch);
    if (batch.empty()) return;
    bytes.clear();
    encoder.begin_block(&bytes, registry().unix_offset_ns);
    for (const auto& s : batch) encoder.append(&bytes, s);
    encoder.end_block(&bytes);
    spill.append(bytes);
    spill.flush();  // a second's spans at a time: nothing accumulates in memory
    written += static_cast<int64_t>(batch.size());
  }
};

SpanSpiller::SpanSpiller(const std::string& dir, const std::string& stem, int64_t period_ns) {
  if (period_ns <= 0) throw std::invalid_argument("SpanSpiller: the period must be positive");
  ensure_directory(dir);
  state_ = std::make_unique<State>(dir, stem, period_ns);
  State* st = state_.get();
  st->thread = std::thread([st] {
    name_this_thread("svc-spill");
    std::unique_lock lock(st->mu);
    while (!st->wake.wait_for(lock, std::chrono::nanoseconds(st->period_ns), [st] { return st->stop; })) {
      try {
        st->spill_now();
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
  // Without finish() the AtomicFileWriter removes the spill.
}

SpanSpiller::Summary SpanSpiller::finish() {
  {
    std::lock_guard lock(state_->mu);
    state_->stop = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  std::lock_guard lock(state_->mu);
  state_->spill_now();
  state_->spill.flush();  // the header, if no span was ever spilled
  const int64_t started_ns = monotonic_ns();
  AtomicFileWriter lines(state_->target);
  // The whole file is written now, at stop: start its writeback block by
  // block, so that commit()'s fsync waits for the last blocks only.
  lines.write_back_as_written();
  const SpillConversion converted = convert_span_spill(state_->spill.temp_path(), &lines);
  lines.commit();
  // Now, not in the destructor: a process killed in between would leave the
  // spill beside its converted file, and the merge would convert it again.
  ::unlink(state_->spill.temp_path());
  return {.spans = state_->written, .spans_encoded = converted.spans, .encode_at_stop_ns = monotonic_ns() - started_ns};
}

nlohmann::json merge_span_files(const std::string& dir, const std::string& out_dir_arg) {
  const std::string out_dir = out_dir_arg.empty() ? dir : out_dir_arg;
  // A service killed before its stop (the supervisor's SIGKILL after the
  // grace period, a crash) left its spans as a binary spill: convert them
  // first, so they are merged like any finished service's, then remove the
  // spill (a second merge must not convert it again).
  nlohmann::json recovered = nlohmann::json::array();
  std::vector<std::string> spills;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (is_left_spill(e->d_name)) spills.push_back(dir + "/" + e->d_name);
    closedir(d);
  }
  std::sort(spills.begin(), spills.end());
  for (const auto& spill : spills) {
    try {
      recovered.push_back(decode_span_spill_file(spill));
      std::remove(spill.c_str());
    } catch (const std::exception& e) {
      recovered.push_back({{"spill", spill}, {"error", e.what()}});  // kept: the user can look at it
    }
  }
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
      if (const auto tags = j.find("tags"); tags != j.end() && tags->is_object()) {
        const auto cache = tags->find(trace::kCacheTag);
        if (cache != tags->end() && cache->is_string()) sp.cache = trace::parse_cache_result(cache->get<std::string>());
      }
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
          {"recovered_spills", recovered},
          {"jaeger", out_dir + "/traces.jaeger.json"},
          {"otlp", out_dir + "/traces.otlp.json"}};
}

}  // namespace tailscope::svc
