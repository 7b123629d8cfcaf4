// tailscope-asyncbench: what launching and joining one async call costs, per
// concurrency model, result mechanism and payload (docs/async-study.md).
//
// Procedure, as in the capstone study: a producer thread launches calls at an
// offered rate (open loop: call i is due at t0 + i/rate whatever happened to
// call i-1); a separate consumer thread requests the values in launch order.
// Every call carries the 5-timestamp probe (exec/async_probe.h).
//   1. ramp: per model, raise the offered rate step by step until the backlog
//      grows during a step (saturation, confirmed by a repeat); the highest
//      sustained rate is the max;
//   2. measure every mechanism × payload at --measure-at-pct of that max;
//   3. sweep the load (--sweep) with the sweep payload to show the tail grow.
// Every step is bounded in calls and in time: an offered rate the model cannot
// sustain ends as "saturated", never as a hang.
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <coroutine>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <system_error>
#include <thread>

#include "core/affinity.h"
#include "core/clock.h"
#include "core/hlog.h"
#include "core/latency_summary.h"
#include "core/result_writer.h"
#include "exec/async_models.h"
#include "exec/async_probe.h"
#include "exec/internal/idle_parking.h"

using namespace tailscope;
using namespace tailscope::exec;

namespace {

// Overloaded = the backlog grew during the step: the median lateness of the
// last quarter of the calls exceeds the first quarter's by more than this
// fraction of the step (analyse_backlog).
constexpr double kBacklogGrowthLimit = 0.05;
constexpr int64_t kMaxCallsPerStep = 400'000;  // memory bound: one record per call

struct Config {
  bool quick = false;
  double scale = 1.0;
  std::vector<std::string> models;
  std::vector<std::string> mechanisms;  // empty = every mechanism a model offers
  std::vector<std::string> payloads;
  std::string sweep_payload = "long_long";
  int64_t payload_bytes = 0;
  std::vector<double> sweep_pcts = {25, 50, 75, 90, 100};
  double measure_at_pct = 75;
  double start_rate_per_s = 2000;
  double max_rate_per_s = 4e6;
  int64_t step_ms = 400, point_ms = 1500, warmup_ms = 200;
  int64_t max_in_flight = 4096;
  int ramp_refinements = 2;
  int64_t resume_batches = 2000;
  bool pinned = true;
  int producer_cpu = 0, consumer_cpu = 1;
  std::vector<int> worker_cpus;
  size_t workers = 1;

  int64_t ms(int64_t v) const { return std::max<int64_t>(1, std::llround(static_cast<double>(v) * scale)); }
};

// ---- payloads ---------------------------------------------------------------

struct PayloadKind {
  std::string name;
  int64_t bytes;  // size of the value handed over (0 for void)
};

template <class T>
struct PayloadMaker;
template <>
struct PayloadMaker<void> {
  static void make(int64_t) {}
};
template <>
struct PayloadMaker<long long> {
  static long long make(int64_t) { return 42; }
};
template <>
struct PayloadMaker<std::vector<int>> {
  static std::vector<int> make(int64_t) { return std::vector<int>(10'000, 1); }
};
template <>
struct PayloadMaker<std::vector<char>> {
  static std::vector<char> make(int64_t n) { return std::vector<char>(static_cast<size_t>(n), 'x'); }
};

// ---- one open-loop point ----------------------------------------------------

struct CallRecord {
  AsyncProbe probe;
  int64_t intended_ns = 0;
  bool launched = false;
};

// The backlog the calls of one point met, computed after the run from the
// probe stamps alone (nothing is added to the timed path). This is what tells
// a hand-off cost from queueing, and a sustained point from an overloaded one.
struct Backlog {
  int64_t calls = 0;  // recorded calls it is computed over
  // Queue joined: calls launched earlier that had not started when this call
  // was launched (pools: items queued or being picked up; per-call models:
  // threads created and not yet running). Not defined for deferred calls.
  bool has_queue = true;
  double queue_mean = 0;
  int64_t queue_p50 = 0, queue_max = 0;
  double queue_empty_fraction = 0;  // launched into an empty queue
  // In flight: calls launched earlier whose value the consumer did not yet have.
  double in_flight_mean = 0;
  int64_t in_flight_max = 0;
  // Medians over the first and the last quarter of the recorded calls: a
  // point whose backlog grows between them is overloaded, whatever its mean.
  int64_t in_flight_first_quarter = 0, in_flight_last_quarter = 0;
  int64_t lateness_first_quarter_ns = 0, lateness_last_quarter_ns = 0;  // val_received − intended
  int64_t lateness_growth_limit_ns = 0;
  bool grew = false;
  int64_t producer_lag_p50_ns = 0;  // trigger − intended
  // Scheduling delay of the calls that were launched into an empty queue:
  // the hand-off alone, without queueing.
  HdrHistogram empty_queue_scheduling = HdrHistogram::for_latency_ns();
  // Gaps in which a launched call waited and no body started (after the
  // previous body ended), over kStallNs each: the workers were not running
  // (descheduled, waking up) while work was queued.
  int64_t stall_ns = 0, stall_max_ns = 0, stalls = 0, starts_span_ns = 0;
};

// /proc/<tid>/schedstat: time on a CPU, time runnable but waiting for one
// (on a run queue), timeslices.
struct SchedStat {
  int64_t run_ns = 0, wait_ns = 0, slices = 0;
  int threads = 0;
  SchedStat operator-(const SchedStat& o) const { return {run_ns - o.run_ns, wait_ns - o.wait_ns, slices - o.slices, threads}; }
};

struct PointResult {
  double offered_per_s = 0, achieved_per_s = 0;
  bool saturated = false;
  std::vector<std::string> why_saturated;
  int64_t calls = 0, recorded = 0, warmup_calls = 0;
  int64_t launch_failures = 0, call_errors = 0, in_flight_limited = 0, max_in_flight_seen = 0;
  int64_t producer_lag_max_ns = 0;
  bool deadline_hit = false;
  Backlog backlog;
  std::optional<ExecutorCounters> pool;  // the pool's idle path during the whole point
  int64_t consumer_parks = 0, consumer_wake_syscalls = 0;
  // CPU time and run-queue wait during the point: the pool's workers (threads
  // alive before and after it), the producer and the consumer.
  std::optional<SchedStat> workers_sched, producer_sched, consumer_sched;
  int64_t sched_window_ns = 0;  // between the two snapshots of workers_sched
  AsyncProbeHistograms delays;
  HdrHistogram total_from_intended = HdrHistogram::for_latency_ns();
  int64_t begin_ns = 0, end_ns = 0;
  std::string launch_error, call_error;  // first of each (producer's, consumer's)
  std::string first_error() const { return !launch_error.empty() ? launch_error : call_error; }
};

void place(bool pin, int cpu) {
  if (pin) pin_current_thread(cpu);
}

std::string fmt_ms(int64_t ns) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(ns < 10'000'000 ? 2 : 1);
  o << static_cast<double>(ns) / 1e6 << " ms";
  return o.str();
}

constexpr int64_t kStallNs = 50'000;

bool read_schedstat(const std::string& path, SchedStat& out) {
  std::ifstream f(path);
  SchedStat s;
  if (!(f >> s.run_ns >> s.wait_ns >> s.slices)) return false;
  s.threads = 1;
  out = s;
  return true;
}
std::optional<SchedStat> own_schedstat() {
  SchedStat s;
  if (!read_schedstat("/proc/thread-self/schedstat", s)) return std::nullopt;
  return s;
}
// Every thread of this process but the caller, by tid.
std::map<std::string, SchedStat> other_threads_schedstat() {
  std::map<std::string, SchedStat> out;
  const std::string self = std::to_string(static_cast<long>(gettid()));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const std::string tid = entry.path().filename().string();
    SchedStat s;
    if (tid != self && read_schedstat(entry.path().string() + "/schedstat", s)) out[tid] = s;
  }
  return out;
}
// Sum over the threads present in both snapshots (a pool's workers).
std::optional<SchedStat> long_lived_delta(const std::map<std::string, SchedStat>& before,
                                          const std::map<std::string, SchedStat>& after) {
  SchedStat sum;
  for (const auto& [tid, a] : after) {
    auto it = before.find(tid);
    if (it == before.end()) continue;
    const SchedStat d = a - it->second;
    sum.run_ns += d.run_ns, sum.wait_ns += d.wait_ns, sum.slices += d.slices, ++sum.threads;
  }
  if (sum.threads == 0) return std::nullopt;
  return sum;
}

int64_t median_of(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Fills r.backlog and r.achieved_per_s from the stamps of a finished point.
//  * achieved rate = completions per second over the span of the recorded
//    completions (first to last val_received): the throughput the model
//    delivered. (Not calls ÷ (last val_received − first intended start),
//    which charges the last call's latency to the throughput: a single
//    millisecond stall at the end of a short step made a point "saturated".)
//  * the point is overloaded when its backlog grows: the median lateness
//    (val_received − intended start) of the last quarter of the recorded calls
//    exceeds that of the first quarter by more than 5 % of the window, i.e.
//    the model delivers less than ~94 % of the offered rate. Medians, so a
//    stall shorter than half a quarter moves nothing.
template <class Records>
void analyse_backlog(const Records& records, int64_t warmup_calls, bool deferred, int64_t window_ns, PointResult& r) {
  Backlog& b = r.backlog;
  b.has_queue = !deferred;
  const int64_t n = static_cast<int64_t>(records.size());
  std::vector<int64_t> starts, receipts;
  std::vector<int64_t> launched_before(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    const auto& rec = records[static_cast<size_t>(i)];
    launched_before[static_cast<size_t>(i) + 1] = launched_before[static_cast<size_t>(i)] + (rec.launched ? 1 : 0);
    if (!rec.launched) continue;
    if (rec.probe.fn_start_ns) starts.push_back(rec.probe.fn_start_ns);
    if (rec.probe.val_received_ns) receipts.push_back(rec.probe.val_received_ns);
  }
  std::sort(starts.begin(), starts.end());
  std::sort(receipts.begin(), receipts.end());
  if (!deferred) {
    // Bodies in start order: a gap from the end of one body to the next
    // start, during which the next call was already waiting, is a stall.
    std::vector<std::array<int64_t, 3>> bodies;  // fn_start, fn_end, trigger
    for (const auto& rec : records)
      if (rec.launched && rec.probe.fn_start_ns && rec.probe.fn_end_ns)
        bodies.push_back({rec.probe.fn_start_ns, rec.probe.fn_end_ns, rec.probe.trigger_async_fn_ns});
    std::sort(bodies.begin(), bodies.end());
    int64_t busy_until = 0;
    for (size_t k = 0; k < bodies.size(); ++k) {
      if (k > 0) {
        const int64_t gap = bodies[k][0] - std::max(busy_until, bodies[k][2]);
        if (gap > kStallNs) b.stall_ns += gap, b.stall_max_ns = std::max(b.stall_max_ns, gap), ++b.stalls;
      }
      busy_until = std::max(busy_until, bodies[k][1]);
    }
    if (bodies.size() >= 2) b.starts_span_ns = bodies.back()[0] - bodies.front()[0];
  }
  auto before = [](const std::vector<int64_t>& sorted, int64_t t) {
    return static_cast<int64_t>(std::lower_bound(sorted.begin(), sorted.end(), t) - sorted.begin());
  };
  std::vector<int64_t> queue, in_flight, lateness, lag;
  int64_t first_received = 0, last_received = 0, empty = 0;
  for (int64_t i = warmup_calls; i < n; ++i) {
    const auto& rec = records[static_cast<size_t>(i)];
    if (!rec.launched || !rec.probe.complete()) continue;
    const int64_t t = rec.probe.trigger_async_fn_ns;
    const int64_t earlier = launched_before[static_cast<size_t>(i)];
    // Calls j > i start and complete after t, so "before t" counts earlier calls only.
    const int64_t q = std::max<int64_t>(0, earlier - before(starts, t));
    queue.push_back(q);
    in_flight.push_back(std::max<int64_t>(0, earlier - before(receipts, t)));
    lateness.push_back(rec.probe.val_received_ns - rec.intended_ns);
    lag.push_back(t - rec.intended_ns);
    if (q == 0) {
      ++empty;
      if (!deferred) b.empty_queue_scheduling.record(std::max<int64_t>(0, rec.probe.scheduling_delay_ns()));
    }
    first_received = first_received ? std::min(first_received, rec.probe.val_received_ns) : rec.probe.val_received_ns;
    last_received = std::max(last_received, rec.probe.val_received_ns);
  }
  b.calls = static_cast<int64_t>(queue.size());
  if (b.calls == 0) return;
  auto mean = [](const std::vector<int64_t>& v) {
    double s = 0;
    for (int64_t x : v) s += static_cast<double>(x);
    return s / static_cast<double>(v.size());
  };
  b.queue_mean = mean(queue);
  b.queue_max = *std::max_element(queue.begin(), queue.end());
  b.queue_p50 = median_of(queue);
  b.queue_empty_fraction = static_cast<double>(empty) / static_cast<double>(b.calls);
  b.in_flight_mean = mean(in_flight);
  b.in_flight_max = *std::max_element(in_flight.begin(), in_flight.end());
  b.producer_lag_p50_ns = median_of(lag);
  const size_t quarter = std::max<size_t>(1, queue.size() / 4);
  auto first_q = [&](const std::vector<int64_t>& v) { return median_of({v.begin(), v.begin() + static_cast<std::ptrdiff_t>(quarter)}); };
  auto last_q = [&](const std::vector<int64_t>& v) { return median_of({v.end() - static_cast<std::ptrdiff_t>(quarter), v.end()}); };
  b.in_flight_first_quarter = first_q(in_flight);
  b.in_flight_last_quarter = last_q(in_flight);
  b.lateness_first_quarter_ns = first_q(lateness);
  b.lateness_last_quarter_ns = last_q(lateness);
  b.lateness_growth_limit_ns = std::llround(kBacklogGrowthLimit * static_cast<double>(window_ns));
  b.grew = b.calls >= 8 && b.lateness_last_quarter_ns - b.lateness_first_quarter_ns > b.lateness_growth_limit_ns;
  r.achieved_per_s = b.calls >= 2 && last_received > first_received
                         ? static_cast<double>(b.calls - 1) * 1e9 / static_cast<double>(last_received - first_received)
                         : 0.0;
}


// Runs `rate` calls per second for warmup + duration. Only calls due after
// the warm-up are recorded.
template <class T>
PointResult run_point(AsyncModel<T>& model, ResultMechanism mechanism, const Config& cfg, double rate,
                      int64_t duration_ns, int64_t warmup_ns, int64_t payload_bytes) {
  PointResult r;
  r.offered_per_s = rate;
  const double period_ns = 1e9 / rate;
  int64_t n = std::llround(static_cast<double>(warmup_ns + duration_ns) / period_ns);
  n = std::clamp<int64_t>(n, 2, kMaxCallsPerStep);
  const int64_t warmup_calls = std::min<int64_t>(n - 1, std::llround(static_cast<double>(warmup_ns) / period_ns));
  r.calls = n;
  r.warmup_calls = warmup_calls;
  // Production stops at this deadline even if the model cannot keep up.
  const int64_t planned_ns = std::llround(static_cast<double>(n) * period_ns);
  const int64_t max_ns = 3 * planned_ns + 2'000'000'000;

  std::vector<CallRecord> records(static_cast<size_t>(n));
  std::vector<std::unique_ptr<PendingCall<T>>> pending(static_cast<size_t>(n));
  std::atomic<uint32_t> launched{0};  // published count: records[0..launched) are ready for the consumer
  std::atomic<int64_t> consumed{0};
  std::atomic<bool> producer_done{false};
  internal::IdleParking consumer_parking;
  const bool pin_producer = cfg.pinned && !creates_thread_per_call(model.name());
  const bool deferred = model.deferred();
  const std::optional<ExecutorCounters> pool_before = model.pool_counters();
  const auto threads_before = other_threads_schedstat();
  const int64_t sched_from = monotonic_ns();

  std::thread consumer([&] {
    place(cfg.pinned, cfg.consumer_cpu);
    const auto sched_begin = own_schedstat();
    int64_t last_received = 0;
    for (uint32_t i = 0;; ++i) {
      // Spin briefly, then sleep until the producer publishes call i or ends.
      for (int spins = 0; launched.load(std::memory_order_acquire) <= i; ++spins) {
        if (producer_done.load() && launched.load() <= i) goto done;
        if (spins < 200) internal::cpu_relax();
        else consumer_parking.park_unless([&] { return launched.load() > i || producer_done.load(); });
      }
      {
        CallRecord& rec = records[i];
        if (rec.launched) {
          rec.probe.stamp_request();
          try {
            pending[i]->join([&rec](ValueOf<T> v) {
              rec.probe.stamp_received();
              (void)v;
            });
            if (static_cast<int64_t>(i) >= warmup_calls) {
              r.delays.record(rec.probe);
              r.total_from_intended.record(rec.probe.val_received_ns - rec.intended_ns);
              ++r.recorded;
              last_received = std::max(last_received, rec.probe.val_received_ns);
            }
          } catch (const std::exception& e) {
            if (r.call_errors++ == 0) r.call_error = e.what();
          }
          pending[i].reset();
        }
        consumed.fetch_add(1, std::memory_order_release);
      }
    }
  done:
    r.end_ns = last_received;
    if (const auto sched_end = own_schedstat(); sched_begin && sched_end) r.consumer_sched = *sched_end - *sched_begin;
  });

  std::thread producer([&] {
    place(pin_producer, cfg.producer_cpu);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // nanosleep wakes on time, not 50 µs late
    const auto sched_begin = own_schedstat();
    const int64_t t0 = monotonic_ns() + 1'000'000;
    r.begin_ns = t0 + warmup_ns;
    for (int64_t i = 0; i < n; ++i) {
      CallRecord& rec = records[static_cast<size_t>(i)];
      rec.intended_ns = t0 + std::llround(static_cast<double>(i) * period_ns);
      if (monotonic_ns() < rec.intended_ns) precise_wait_until_ns(rec.intended_ns, 10'000);
      // Bound what is outstanding: waiting here makes the producer late,
      // which the achieved rate then shows.
      for (bool limited = false;;) {
        const int64_t in_flight = i - consumed.load(std::memory_order_acquire);
        r.max_in_flight_seen = std::max(r.max_in_flight_seen, in_flight);
        if (in_flight < cfg.max_in_flight) break;
        if (!limited) ++r.in_flight_limited, limited = true;
        if (monotonic_ns() - t0 > max_ns) break;
        std::this_thread::yield();
      }
      const int64_t now = monotonic_ns();
      if (now - t0 > max_ns) {
        r.deadline_hit = true;
        break;
      }
      r.producer_lag_max_ns = std::max(r.producer_lag_max_ns, now - rec.intended_ns);
      rec.probe.deferred = deferred;
      rec.probe.stamp_trigger();
      try {
        pending[static_cast<size_t>(i)] = model.launch(mechanism, [&rec, payload_bytes]() {
          rec.probe.stamp_fn_start();
          if constexpr (std::is_void_v<T>) {
            rec.probe.stamp_fn_end();
          } else {
            T value = PayloadMaker<T>::make(payload_bytes);
            rec.probe.stamp_fn_end();
            return value;
          }
        });
        rec.launched = true;
      } catch (const std::system_error& e) {  // EAGAIN: no thread for this call
        if (r.launch_failures++ == 0) r.launch_error = e.what();
      }
      launched.store(static_cast<uint32_t>(i + 1));  // seq_cst: pairs with the consumer's parking
      consumer_parking.wake_one();
    }
    producer_done.store(true);
    consumer_parking.wake_one();
    if (const auto sched_end = own_schedstat(); sched_begin && sched_end) r.producer_sched = *sched_end - *sched_begin;
  });
  producer.join();
  consumer.join();
  r.workers_sched = long_lived_delta(threads_before, other_threads_schedstat());
  r.sched_window_ns = monotonic_ns() - sched_from;
  if (const auto after = model.pool_counters(); after && pool_before)
    r.pool = ExecutorCounters{after->parks - pool_before->parks,
                              after->wake_syscalls < 0 ? -1 : after->wake_syscalls - pool_before->wake_syscalls};
  r.consumer_parks = consumer_parking.parks();
  r.consumer_wake_syscalls = consumer_parking.wake_syscalls();

  analyse_backlog(records, warmup_calls, deferred, duration_ns, r);
  if (r.backlog.grew) {
    std::ostringstream why;
    why << "backlog grew during the step (median lateness " << fmt_ms(r.backlog.lateness_first_quarter_ns) << " → "
        << fmt_ms(r.backlog.lateness_last_quarter_ns) << " from the first to the last quarter)";
    r.why_saturated.push_back(why.str());
  }
  if (r.in_flight_limited > 0) r.why_saturated.push_back("in-flight limit reached");
  if (r.launch_failures > 0) r.why_saturated.push_back("thread creation failed");
  if (r.deadline_hit) r.why_saturated.push_back("step time limit reached");
  r.saturated = !r.why_saturated.empty();
  return r;
}

// What the calls of a point met: queue, in-flight calls, backlog trend, and
// what the pool's and the consumer's idle paths did, per call.
nlohmann::json backlog_json(const PointResult& p) {
  const Backlog& b = p.backlog;
  const double calls = static_cast<double>(std::max<int64_t>(1, p.calls));
  nlohmann::json j = {{"calls", b.calls},
                      {"in_flight_mean", b.in_flight_mean},
                      {"in_flight_max", b.in_flight_max},
                      {"in_flight_first_quarter_p50", b.in_flight_first_quarter},
                      {"in_flight_last_quarter_p50", b.in_flight_last_quarter},
                      {"lateness_first_quarter_p50_ns", b.lateness_first_quarter_ns},
                      {"lateness_last_quarter_p50_ns", b.lateness_last_quarter_ns},
                      {"lateness_growth_limit_ns", b.lateness_growth_limit_ns},
                      {"grew", b.grew},
                      {"producer_lag_p50_ns", b.producer_lag_p50_ns},
                      {"consumer_parks_per_call", static_cast<double>(p.consumer_parks) / calls},
                      {"consumer_wake_syscalls_per_call", static_cast<double>(p.consumer_wake_syscalls) / calls}};
  if (b.has_queue) {
    j["queue_mean"] = b.queue_mean;
    j["queue_p50"] = b.queue_p50;
    j["queue_max"] = b.queue_max;
    j["queue_empty_fraction"] = b.queue_empty_fraction;
    if (b.empty_queue_scheduling.total_count() > 0) {
      j["empty_queue_scheduling_p50_ns"] = b.empty_queue_scheduling.value_at_percentile(50);
      j["empty_queue_calls"] = b.empty_queue_scheduling.total_count();
    }
  }
  if (p.pool) {
    j["worker_parks_per_call"] = static_cast<double>(p.pool->parks) / calls;
    if (p.pool->wake_syscalls >= 0) j["wake_syscalls_per_call"] = static_cast<double>(p.pool->wake_syscalls) / calls;
  }
  if (b.has_queue && b.starts_span_ns > 0) {
    j["stall_fraction"] = static_cast<double>(b.stall_ns) / static_cast<double>(b.starts_span_ns);
    j["stall_max_ns"] = b.stall_max_ns;
    j["stalls"] = b.stalls;
  }
  auto sched = [](const std::optional<SchedStat>& st) {
    if (!st) return nlohmann::json(nullptr);
    return nlohmann::json{{"threads", st->threads}, {"run_ns", st->run_ns}, {"runqueue_wait_ns", st->wait_ns},
                          {"timeslices", st->slices}};
  };
  j["sched"] = {{"window_ns", p.sched_window_ns},
                {"workers", sched(p.workers_sched)}, {"producer", sched(p.producer_sched)},
                {"consumer", sched(p.consumer_sched)}};
  return j;
}

// ---- ramp -------------------------------------------------------------------

struct RampResult {
  double max_rate_per_s = 0;
  double best_saturated_per_s = 0;
  bool saturation_found = false;
  nlohmann::json steps = nlohmann::json::array();
};

template <class T>
RampResult ramp(AsyncModel<T>& model, ResultMechanism mechanism, const Config& cfg, int64_t payload_bytes,
                const std::function<void(const std::string&)>& progress) {
  RampResult out;
  // One step; a saturated step is run once more and counts as saturated only
  // if the repeat saturates too, so one scheduler stall on a shared machine
  // does not end the ramp (thread-creation failures are not retried).
  auto step = [&](double rate) {
    for (int attempt = 0;; ++attempt) {
      progress("ramp " + std::string(model.name()) + " @ " + std::to_string(std::llround(rate)) + "/s");
      PointResult p = run_point(model, mechanism, cfg, rate, cfg.ms(cfg.step_ms) * 1'000'000,
                                cfg.ms(cfg.step_ms) * 250'000, payload_bytes);
      const HdrHistogram& total = p.delays.of(AsyncDelay::kTotal);
      out.steps.push_back({{"offered_per_s", rate},
                           {"achieved_per_s", p.achieved_per_s},
                           {"mean_total_ns", total.mean()},
                           {"p99_total_ns", total.value_at_percentile(99)},
                           {"samples", p.recorded},
                           {"attempt", attempt + 1},
                           {"saturated", p.saturated},
                           {"why_saturated", p.why_saturated},
                           {"backlog", backlog_json(p)}});
      // The max is the highest rate the model *sustained* (never above what
      // was offered); a saturated step's achieved rate only counts if no step
      // was sustained at all.
      if (!p.saturated) {
        out.max_rate_per_s = std::max(out.max_rate_per_s, std::min(rate, p.achieved_per_s));
        return true;
      }
      out.best_saturated_per_s = std::max(out.best_saturated_per_s, p.achieved_per_s);
      if (attempt >= 1 || p.launch_failures > 0) return false;
    }
  };
  double good = 0, rate = cfg.start_rate_per_s, bad = 0;
  for (int i = 0; i < 24 && rate <= cfg.max_rate_per_s; ++i, rate *= 2) {
    if (!step(rate)) {
      bad = rate;
      break;
    }
    good = rate;
  }
  if (bad > 0) {
    out.saturation_found = true;
    for (int k = 0; k < cfg.ramp_refinements && good > 0; ++k) {
      const double mid = std::sqrt(good * bad);
      if (step(mid)) good = mid;
      else bad = mid;
    }
  }
  if (out.max_rate_per_s <= 0) out.max_rate_per_s = out.best_saturated_per_s;
  return out;
}

// ---- output -----------------------------------------------------------------

struct Output {
  nlohmann::json doc;
  HlogWriter* hlog;
  int64_t t0_ns;
  int64_t planned_points = 1, done_points = 0;
};

std::string what_of(std::string_view delay, bool deferred) {
  if (delay == "scheduling_delay")
    return deferred ? "fn_start − request_val (deferred: the body starts inside the request)"
                    : "fn_start − trigger_async_fn";
  if (delay == "deferral_wait") return "request_val − trigger_async_fn (deferred calls)";
  if (delay == "join_delay") return "val_received − max(fn_end, request_val)";
  if (delay == "total") return "val_received − trigger_async_fn";
  return "val_received − intended launch time (open loop: includes the producer falling behind)";
}

void emit_point(Output& out, const Config& cfg, const std::string& model, std::string_view mechanism,
                const PayloadKind& payload, double load_pct, bool deferred, const PointResult& p) {
  const std::string variant = model + "/" + std::string(mechanism) + "/" + payload.name;
  nlohmann::json pinning = {{"policy", cfg.pinned ? "pinned" : "unpinned"}};
  if (cfg.pinned) {
    const bool free_producer = creates_thread_per_call(model);
    pinning["producer_cpu"] = free_producer ? nlohmann::json(nullptr) : nlohmann::json(cfg.producer_cpu);
    pinning["consumer_cpu"] = cfg.consumer_cpu;
    pinning["client_cpu"] = pinning["producer_cpu"];
    pinning["server_cpu"] = cfg.consumer_cpu;
    pinning["worker_cpus"] = cfg.worker_cpus.empty() ? "any" : format_cpu_list(cfg.worker_cpus);
    if (free_producer)
      pinning["note"] = "producer unpinned: every thread it creates would inherit its CPU";
  }
  nlohmann::json observed = {{"load_pct", load_pct},
                             {"offered_per_s", p.offered_per_s},
                             {"achieved_per_s", p.achieved_per_s},
                             {"saturated", p.saturated},
                             {"why_saturated", p.why_saturated},
                             {"launch_failures", p.launch_failures},
                             {"call_errors", p.call_errors},
                             {"in_flight_limited", p.in_flight_limited},
                             {"max_in_flight", p.max_in_flight_seen},
                             {"producer_lag_max_ns", p.producer_lag_max_ns},
                             {"negative_intervals", p.delays.negative()},
                             {"backlog", backlog_json(p)}};
  if (!p.first_error().empty()) observed["first_error"] = p.first_error();
  std::vector<std::pair<std::string, const HdrHistogram*>> delays;
  for (AsyncDelay d : kAsyncDelays) {
    if (d == AsyncDelay::kDeferralWait && !deferred) continue;
    delays.emplace_back(std::string(delay_name(d)), &p.delays.of(d));
  }
  delays.emplace_back("total_from_intended", &p.total_from_intended);
  for (const auto& [name, h] : delays) {
    if (h->total_count() == 0) {
      out.doc["unavailable"].push_back(
          {{"name", name}, {"variant", variant}, {"reason", "no call completed after warm-up" +
                                                                (p.first_error().empty() ? "" : ": " + p.first_error())}});
      continue;
    }
    std::ostringstream tag;
    tag << name << "." << variant << ".load" << std::llround(load_pct);
    nlohmann::json m = {{"name", name},
                        {"variant", variant},
                        {"what", what_of(name, deferred)},
                        {"model", model},
                        {"mechanism", mechanism},
                        {"payload", payload.name},
                        {"payload_bytes", payload.bytes},
                        {"load_pct", load_pct},
                        {"offered_per_s", p.offered_per_s},
                        {"achieved_per_s", p.achieved_per_s},
                        {"saturated", p.saturated},
                        {"pinning", pinning},
                        {"iterations", h->total_count()},
                        {"warmup_iterations", p.warmup_calls},
                        {"wall_time_s", static_cast<double>(p.end_ns - p.begin_ns) / 1e9},
                        {"observed", observed},
                        {"latency", latency_summary(*h)},
                        {"cdf", latency_cdf(*h)},
                        {"hlog_tag", tag.str()}};
    out.hlog->write_interval(static_cast<double>(std::max<int64_t>(0, p.begin_ns - out.t0_ns)) / 1e9,
                             static_cast<double>(std::max<int64_t>(0, p.end_ns - p.begin_ns)) / 1e9, *h, tag.str());
    out.doc["measurements"].push_back(std::move(m));
  }
}

void progress(Output& out, const std::string& phase) {
  emit_progress("tailscope-asyncbench", phase,
                std::min(0.99, static_cast<double>(out.done_points) / static_cast<double>(out.planned_points)));
}

// Everything for one model and one payload type.
template <class T>
void run_model_payload(Output& out, const Config& cfg, const std::string& model_name, const PayloadKind& payload,
                       bool is_sweep_payload, std::map<std::string, double>& max_rates) {
  PoolOptions pool;
  pool.workers = cfg.workers;
  pool.worker_cpus = cfg.pinned ? cfg.worker_cpus : std::vector<int>{};
  auto model = make_async_model<T>(model_name, pool);
  std::vector<ResultMechanism> mechanisms;
  for (ResultMechanism m : model->mechanisms())
    if (cfg.mechanisms.empty() ||
        std::find(cfg.mechanisms.begin(), cfg.mechanisms.end(), mechanism_name(m)) != cfg.mechanisms.end())
      mechanisms.push_back(m);
  if (mechanisms.empty()) return;

  if (is_sweep_payload) {
    RampResult rr = ramp<T>(*model, mechanisms.front(), cfg, payload.bytes,
                            [&](const std::string& phase) { progress(out, phase); });
    ++out.done_points;
    max_rates[model_name] = rr.max_rate_per_s;
    out.doc["max_rate_per_s"][model_name] = rr.max_rate_per_s;
    out.doc["ramps"][model_name] = {{"mechanism", mechanism_name(mechanisms.front())},
                                    {"payload", payload.name},
                                    {"saturation_found", rr.saturation_found},
                                    {"steps", rr.steps}};
    if (!rr.saturation_found)
      out.doc["warnings"].push_back(model_name + ": no saturation up to the --max-rate cap; 'max' is the cap's achieved rate");
  }
  const double max_rate = max_rates.count(model_name) ? max_rates[model_name] : 0.0;
  if (max_rate <= 0) {
    out.doc["unavailable"].push_back({{"name", "(model)"}, {"variant", model_name}, {"reason", "ramp found no sustainable rate"}});
    return;
  }
  std::vector<double> loads = {cfg.measure_at_pct};
  if (is_sweep_payload)
    for (double pct : cfg.sweep_pcts)
      if (std::abs(pct - cfg.measure_at_pct) > 1e-9) loads.push_back(pct);
  for (ResultMechanism m : mechanisms) {
    for (double pct : loads) {
      const double rate = std::max(1.0, max_rate * pct / 100.0);
      progress(out, model_name + "/" + std::string(mechanism_name(m)) + "/" + payload.name + " @ " +
                        std::to_string(std::llround(pct)) + "%");
      PointResult p = run_point(*model, m, cfg, rate, cfg.ms(cfg.point_ms) * 1'000'000,
                                cfg.ms(cfg.warmup_ms) * 1'000'000, payload.bytes);
      ++out.done_points;
      emit_point(out, cfg, model_name, mechanism_name(m), payload, pct, model->deferred(), p);
    }
  }
  model->shutdown(ShutdownMode::kDrain);
}

// A coroutine resumed by the thread that suspended it: the floor of the
// coroutine model. Each sample is the mean of 1000 resume→suspend round
// trips (one clock read per 1000 resumes, so the clock's cost drops out).
struct ResumeLoop {
  struct promise_type {
    ResumeLoop get_return_object() { return {std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  std::coroutine_handle<promise_type> h;
};
ResumeLoop resume_loop(volatile int64_t* counter) {
  for (;;) {
    *counter = *counter + 1;
    co_await std::suspend_always{};
  }
}

void measure_same_thread_resume(Output& out, const Config& cfg) {
  constexpr int kPerSample = 1000;
  progress(out, "coroutine same-thread resume");
  place(cfg.pinned, cfg.consumer_cpu);
  volatile int64_t counter = 0;
  ResumeLoop loop = resume_loop(&counter);
  HdrHistogram h = HdrHistogram::for_latency_ns();
  const int64_t batches = std::max<int64_t>(10, std::llround(static_cast<double>(cfg.resume_batches) * cfg.scale));
  const int64_t warmup = batches / 10;
  const int64_t begin = monotonic_ns();
  for (int64_t b = 0; b < warmup + batches; ++b) {
    const int64_t t0 = monotonic_ns();
    for (int i = 0; i < kPerSample; ++i) loop.h.resume();
    const int64_t t1 = monotonic_ns();
    if (b >= warmup) h.record(std::max<int64_t>(1, std::llround(static_cast<double>(t1 - t0) / kPerSample)));
  }
  const int64_t end = monotonic_ns();
  loop.h.destroy();
  if (cfg.pinned) unpin_current_thread();
  const std::string tag = "same_thread_resume.coroutine/resume/void";
  out.hlog->write_interval(static_cast<double>(begin - out.t0_ns) / 1e9, static_cast<double>(end - begin) / 1e9, h, tag);
  out.doc["measurements"].push_back(
      {{"name", "same_thread_resume"},
       {"variant", "coroutine/resume/void"},
       {"what", "handle.resume() → the coroutine runs one step and suspends again, on the same thread; mean of 1000 per sample"},
       {"model", "coroutine"},
       {"mechanism", "resume"},
       {"payload", "void"},
       {"pinning", {{"policy", cfg.pinned ? "pinned" : "unpinned"}, {"consumer_cpu", cfg.consumer_cpu}}},
       {"iterations", h.total_count()},
       {"warmup_iterations", warmup},
       {"wall_time_s", static_cast<double>(end - begin) / 1e9},
       {"observed", {{"resumes_per_sample", kPerSample}}},
       {"latency", latency_summary(h)},
       {"cdf", latency_cdf(h)},
       {"hlog_tag", tag}});
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tailscope-asyncbench: scheduling and join delay of async calls per concurrency model "
               "(deferred, std::async, std::thread, pools, coroutines), ramp to saturation, load sweep"};
  Config cfg;
  std::string out_path, artifacts_dir, models_text, mechanisms_text, payloads_text = "long_long,void,vector10000",
                                                                    cpus_text, placement = "pinned", sweep_text;
  int64_t workers = 0;
  app.add_option("--out", out_path, "Result document path (default: stdout)");
  app.add_option("--artifacts", artifacts_dir, "Folder for asyncbench.hlog (one tagged interval per measurement)");
  app.add_flag("--quick", cfg.quick, "Quick form: short ramp steps and points (well under 2 minutes for all models)");
  app.add_option("--scale", cfg.scale, "Multiply every step and point duration (e.g. 0.2 for a smoke run)")
      ->check(CLI::Range(0.01, 100.0));
  app.add_option("--models", models_text, "Comma-separated models (default: all): deferred, std-async, std-thread, "
                                          "fixed-pool, spin-pool, work-stealing, coroutine");
  app.add_option("--mechanisms", mechanisms_text, "Comma-separated result mechanisms to keep: future, continuation, "
                                                  "join, resume (default: every one a model offers)");
  app.add_option("--payloads", payloads_text, "Comma-separated payloads: void, long_long, vector10000");
  app.add_option("--payload-bytes", cfg.payload_bytes, "Also measure a payload of N bytes (std::vector<char>)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--sweep-payload", cfg.sweep_payload, "Payload used for the ramp and the load sweep");
  app.add_option("--measure-at-pct", cfg.measure_at_pct, "Load of the main point, % of the model's max rate")
      ->check(CLI::Range(1.0, 200.0));
  app.add_option("--sweep", sweep_text, "Comma-separated loads in % of max (default 25,50,75,90,100; 'none' to skip)");
  app.add_option("--start-rate", cfg.start_rate_per_s, "First ramp step, calls/s")->check(CLI::Range(1.0, 1e8));
  app.add_option("--max-rate", cfg.max_rate_per_s, "Ramp ceiling, calls/s")->check(CLI::Range(1.0, 1e8));
  app.add_option("--max-in-flight", cfg.max_in_flight, "Calls launched but not yet joined, at most")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  app.add_option("--workers", workers, "Pool workers (default: allowed CPUs − 1, at least 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{256}));
  app.add_option("--cpus", cpus_text, "PRODUCER,CONSUMER[,WORKER...] CPUs when pinned (default: first and last allowed "
                                      "CPU; workers unpinned)");
  app.add_option("--placement", placement, "pinned or unpinned");
  CLI11_PARSE(app, argc, argv);

  try {
    if (placement != "pinned" && placement != "unpinned")
      throw std::invalid_argument("--placement: '" + placement + "' is neither pinned nor unpinned");
    cfg.pinned = placement == "pinned";
    if (cfg.quick) {
      cfg.step_ms = 120;
      cfg.point_ms = 300;
      cfg.warmup_ms = 60;
      cfg.ramp_refinements = 1;
      cfg.resume_batches = 1000;
    }
    const std::vector<int> allowed = allowed_cpus();
    CpuPair pair = default_cpu_pair();
    cfg.producer_cpu = pair.client_cpu;
    cfg.consumer_cpu = pair.server_cpu;
    if (!cpus_text.empty()) {
      std::vector<int> cpus;
      for (const std::string& item : split_list(cpus_text)) {
        std::vector<int> one;
        try {
          one = parse_cpu_list(item);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(std::string("--cpus: ") + e.what());
        }
        if (one.size() != 1) throw std::invalid_argument("--cpus: '" + item + "' must be one CPU");
        if (std::find(allowed.begin(), allowed.end(), one[0]) == allowed.end())
          throw std::invalid_argument("--cpus: CPU " + item + " is not available to this process (allowed " +
                                      format_cpu_list(allowed) + ")");
        cpus.push_back(one[0]);
      }
      if (cpus.size() < 2) throw std::invalid_argument("--cpus wants PRODUCER,CONSUMER[,WORKER...] (e.g. 0,1)");
      cfg.producer_cpu = cpus[0];
      cfg.consumer_cpu = cpus[1];
      cfg.worker_cpus.assign(cpus.begin() + 2, cpus.end());
    }
    cfg.workers = workers > 0 ? static_cast<size_t>(workers) : std::max<size_t>(1, allowed.size() - 1);

    cfg.models = models_text.empty() ? async_model_names() : split_list(models_text);
    for (const std::string& m : cfg.models)
      if (std::find(async_model_names().begin(), async_model_names().end(), m) == async_model_names().end())
        throw std::invalid_argument("--models: unknown model '" + m + "'");
    if (cfg.models.empty()) throw std::invalid_argument("--models is empty");
    cfg.mechanisms = split_list(mechanisms_text);
    for (const std::string& m : cfg.mechanisms)
      if (m != "future" && m != "continuation" && m != "join" && m != "resume")
        throw std::invalid_argument("--mechanisms: unknown result mechanism '" + m + "'");
    std::vector<PayloadKind> payloads;
    for (const std::string& p : split_list(payloads_text)) {
      if (p == "void") payloads.push_back({p, 0});
      else if (p == "long_long") payloads.push_back({p, static_cast<int64_t>(sizeof(long long))});
      else if (p == "vector10000") payloads.push_back({p, static_cast<int64_t>(10'000 * sizeof(int))});
      else throw std::invalid_argument("--payloads: unknown payload '" + p + "' (void, long_long, vector10000)");
    }
    if (cfg.payload_bytes > 0) payloads.push_back({"bytes" + std::to_string(cfg.payload_bytes), cfg.payload_bytes});
    if (payloads.empty()) throw std::invalid_argument("--payloads is empty");
    auto sweep_it = std::find_if(payloads.begin(), payloads.end(), [&](auto& p) { return p.name == cfg.sweep_payload; });
    if (sweep_it == payloads.end()) sweep_it = payloads.begin();
    std::rotate(payloads.begin(), sweep_it, sweep_it + 1);  // the ramp runs first
    if (sweep_text == "none") cfg.sweep_pcts.clear();
    else if (!sweep_text.empty()) {
      cfg.sweep_pcts.clear();
      for (const std::string& s : split_list(sweep_text)) {
        size_t used = 0;
        double v = 0;
        try {
          v = std::stod(s, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != s.size() || v <= 0 || v > 200) throw std::invalid_argument("--sweep: '" + s + "' is not a load in (0, 200] %");
        cfg.sweep_pcts.push_back(v);
      }
    }

    Output out;
    out.doc = new_result_document("tailscope-asyncbench", argc, argv);
    out.doc["config"] = {{"form", cfg.quick ? "quick" : "full"},
                         {"scale", cfg.scale},
                         {"models", cfg.models},
                         {"payloads", [&] {
                            std::vector<std::string> names;
                            for (auto& p : payloads) names.push_back(p.name);
                            return names;
                          }()},
                         {"sweep_payload", payloads.front().name},
                         {"measure_at_pct", cfg.measure_at_pct},
                         {"sweep_pcts", cfg.sweep_pcts},
                         {"ramp_step_ms", cfg.ms(cfg.step_ms)},
                         {"point_ms", cfg.ms(cfg.point_ms)},
                         {"warmup_ms", cfg.ms(cfg.warmup_ms)},
                         {"start_rate_per_s", cfg.start_rate_per_s},
                         {"max_rate_cap_per_s", cfg.max_rate_per_s},
                         {"backlog_growth_limit", kBacklogGrowthLimit},
                         {"max_in_flight", cfg.max_in_flight},
                         {"workers", cfg.workers},
                         {"placement", placement},
                         {"producer_cpu", cfg.producer_cpu},
                         {"consumer_cpu", cfg.consumer_cpu},
                         {"worker_cpus", cfg.worker_cpus.empty() ? "any" : format_cpu_list(cfg.worker_cpus)}};
    out.doc["max_rate_per_s"] = nlohmann::json::object();
    out.doc["ramps"] = nlohmann::json::object();
    if (cfg.pinned && cfg.producer_cpu == cfg.consumer_cpu)
      out.doc["warnings"].push_back("producer and consumer share one CPU");

    std::ostringstream hlog_text;
    HlogWriter hlog(hlog_text);
    hlog.write_header(static_cast<double>(realtime_ns()) / 1e9, "tailscope-asyncbench async probe delays");
    out.hlog = &hlog;
    out.t0_ns = monotonic_ns();
    const int64_t sweep_extra = static_cast<int64_t>(cfg.sweep_pcts.size());
    out.planned_points = 1;
    for (size_t k = 0; k < cfg.models.size(); ++k) out.planned_points += 1 + 2 * (int64_t(payloads.size()) + sweep_extra);

    std::map<std::string, double> max_rates;
    for (const std::string& model : cfg.models) {
      for (size_t k = 0; k < payloads.size(); ++k) {
        const PayloadKind& p = payloads[k];
        const bool sweep = k == 0;
        if (p.name == "void") run_model_payload<void>(out, cfg, model, p, sweep, max_rates);
        else if (p.name == "long_long") run_model_payload<long long>(out, cfg, model, p, sweep, max_rates);
        else if (p.name == "vector10000") run_model_payload<std::vector<int>>(out, cfg, model, p, sweep, max_rates);
        else run_model_payload<std::vector<char>>(out, cfg, model, p, sweep, max_rates);
      }
    }
    if (std::find(cfg.models.begin(), cfg.models.end(), "coroutine") != cfg.models.end())
      measure_same_thread_resume(out, cfg);
    out.doc["wall_time_s"] = static_cast<double>(monotonic_ns() - out.t0_ns) / 1e9;
    emit_progress("tailscope-asyncbench", "done", 1.0);
    if (!artifacts_dir.empty()) {
      ensure_directory(artifacts_dir);
      write_file_atomic(artifacts_dir + "/asyncbench.hlog", hlog_text.str());
      out.doc["artifacts"] = {{"hlog", "asyncbench.hlog"}};
    }
    if (!out.doc.contains("measurements")) out.doc["measurements"] = nlohmann::json::array();
    if (!out.doc.contains("unavailable")) out.doc["unavailable"] = nlohmann::json::array();
    write_result(out.doc, out_path);
  } catch (const std::exception& e) {
    std::cerr << "tailscope-asyncbench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
