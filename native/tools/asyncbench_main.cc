// tailscope-asyncbench: what launching and joining one async call costs, per
// concurrency model, result mechanism and payload (docs/async-study.md).
//
// Procedure, as in the capstone study: a producer thread launches calls at an
// offered rate (open loop: call i is due at t0 + i/rate whatever happened to
// call i-1); a separate consumer thread requests the values in launch order.
// Every call carries the 5-timestamp probe (exec/async_probe.h).
//   1. ramp: per model, raise the offered rate step by step until the achieved
//      rate falls behind (saturation); the highest achieved rate is the max;
//   2. measure every mechanism × payload at --measure-at-pct of that max;
//   3. sweep the load (--sweep) with the sweep payload to show the tail grow.
// Every step is bounded in calls and in time: an offered rate the model cannot
// sustain ends as "saturated", never as a hang.
#include <sys/prctl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <coroutine>
#include <exception>
#include <iostream>
#include <map>
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

constexpr double kSaturationRatio = 0.9;     // achieved below 90 % of offered = saturated
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

struct PointResult {
  double offered_per_s = 0, achieved_per_s = 0;
  bool saturated = false;
  std::vector<std::string> why_saturated;
  int64_t calls = 0, recorded = 0, warmup_calls = 0;
  int64_t launch_failures = 0, call_errors = 0, in_flight_limited = 0, max_in_flight_seen = 0;
  int64_t producer_lag_max_ns = 0;
  bool deadline_hit = false;
  AsyncProbeHistograms delays;
  HdrHistogram total_from_intended = HdrHistogram::for_latency_ns();
  int64_t begin_ns = 0, end_ns = 0;
  std::string launch_error, call_error;  // first of each (producer's, consumer's)
  std::string first_error() const { return !launch_error.empty() ? launch_error : call_error; }
};

void place(bool pin, int cpu) {
  if (pin) pin_current_thread(cpu);
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

  std::thread consumer([&] {
    place(cfg.pinned, cfg.consumer_cpu);
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
  });

  std::thread producer([&] {
    place(pin_producer, cfg.producer_cpu);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // nanosleep wakes on time, not 50 µs late
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
  });
  producer.join();
  consumer.join();

  const double window_s = static_cast<double>(r.end_ns - r.begin_ns) / 1e9;
  r.achieved_per_s = window_s > 0 ? static_cast<double>(r.recorded) / window_s : 0.0;
  if (r.achieved_per_s < kSaturationRatio * rate) r.why_saturated.push_back("achieved rate below 90 % of offered");
  if (r.in_flight_limited > 0) r.why_saturated.push_back("in-flight limit reached");
  if (r.launch_failures > 0) r.why_saturated.push_back("thread creation failed");
  if (r.deadline_hit) r.why_saturated.push_back("step time limit reached");
  r.saturated = !r.why_saturated.empty();
  return r;
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
  auto step = [&](double rate) {
    progress("ramp " + std::string(model.name()) + " @ " + std::to_string(std::llround(rate)) + "/s");
    PointResult p = run_point(model, mechanism, cfg, rate, cfg.ms(cfg.step_ms) * 1'000'000,
                              cfg.ms(cfg.step_ms) * 250'000, payload_bytes);
    // The max is the highest rate the model *sustained*; a saturated step's
    // achieved rate only counts if no step was sustained at all.
    if (!p.saturated) out.max_rate_per_s = std::max(out.max_rate_per_s, p.achieved_per_s);
    else out.best_saturated_per_s = std::max(out.best_saturated_per_s, p.achieved_per_s);
    const HdrHistogram& total = p.delays.of(AsyncDelay::kTotal);
    out.steps.push_back({{"offered_per_s", rate},
                         {"achieved_per_s", p.achieved_per_s},
                         {"mean_total_ns", total.mean()},
                         {"p99_total_ns", total.value_at_percentile(99)},
                         {"samples", p.recorded},
                         {"saturated", p.saturated},
                         {"why_saturated", p.why_saturated}});
    return !p.saturated;
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
                             {"negative_intervals", p.delays.negative()}};
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
                         {"saturation_ratio", kSaturationRatio},
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
