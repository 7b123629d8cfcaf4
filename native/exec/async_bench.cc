#include "exec/async_bench.h"

#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "baseline/reference.h"
#include "core/affinity.h"
#include "core/clock.h"
#include "core/latency_summary.h"
#include "core/result_writer.h"
#include "exec/async_models.h"
#include "exec/open_loop_driver.h"
#include "exec/saturation.h"

namespace tailscope::exec {
namespace {

constexpr std::string_view kEngine = "tailscope-asyncbench";

struct Output {
  nlohmann::json& doc;
  HlogWriter& hlog;
  int64_t t0_ns;
  int64_t planned_points = 1, done_points = 0;

  void progress(const std::string& phase) const {
    emit_progress(kEngine, phase,
                  std::min(0.99, static_cast<double>(done_points) / static_cast<double>(planned_points)));
  }
  // Seconds since the run began, for the hlog's interval start stamps.
  double since_start_s(int64_t ns) const { return static_cast<double>(std::max<int64_t>(0, ns - t0_ns)) / 1e9; }
};

OpenLoopPoint point_settings(const AsyncBenchConfig& cfg, double rate_per_s, int64_t duration_ns, int64_t warmup_ns,
                             int64_t payload_bytes) {
  OpenLoopPoint p;
  p.rate_per_s = rate_per_s;
  p.duration_ns = duration_ns;
  p.warmup_ns = warmup_ns;
  p.max_in_flight = cfg.max_in_flight;
  p.payload_bytes = payload_bytes;
  p.pinned = cfg.pinned;
  p.producer_cpu = cfg.producer_cpu;
  p.consumer_cpu = cfg.consumer_cpu;
  return p;
}

nlohmann::json sched_json(const std::optional<SchedStat>& s) {
  if (!s) return nullptr;
  return {{"threads", s->threads},
          {"run_ns", s->run_ns},
          {"runqueue_wait_ns", s->runqueue_wait_ns},
          {"timeslices", s->timeslices}};
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
  j["sched"] = {{"window_ns", p.sched_window_ns},
                {"workers", sched_json(p.workers_sched)},
                {"producer", sched_json(p.producer_sched)},
                {"consumer", sched_json(p.consumer_sched)}};
  return j;
}

struct ModelRamp {
  RampResult result;
  nlohmann::json steps = nlohmann::json::array();
};

// Ramp steps run step_ms with a quarter of that as warm-up; every attempt is
// recorded in the document.
template <class T>
ModelRamp ramp(AsyncModel<T>& model, ResultMechanism mechanism, const AsyncBenchConfig& cfg, int64_t payload_bytes,
               const Output& out) {
  ModelRamp r;
  RampSearch search;
  search.start_rate_per_s = cfg.start_rate_per_s;
  search.max_rate_per_s = cfg.max_rate_per_s;
  search.refinements = cfg.ramp_refinements;
  r.result = find_max_rate(search, [&](double rate, int attempt) {
    out.progress("ramp " + std::string(model.name()) + " @ " + std::to_string(std::llround(rate)) + "/s");
    const int64_t step_ns = cfg.scaled_ms(cfg.step_ms) * 1'000'000;
    const PointResult p =
        run_open_loop_point(model, mechanism, point_settings(cfg, rate, step_ns, step_ns / 4, payload_bytes));
    const HdrHistogram& total = p.delays.of(AsyncDelay::kTotal);
    r.steps.push_back({{"offered_per_s", rate},
                       {"achieved_per_s", p.achieved_per_s},
                       {"mean_total_ns", total.mean()},
                       {"p99_total_ns", total.value_at_percentile(99)},
                       {"samples", p.recorded},
                       {"attempt", attempt + 1},
                       {"saturated", p.saturated},
                       {"why_saturated", p.why_saturated},
                       {"backlog", backlog_json(p)}});
    return RampStepOutcome{p.saturated, p.achieved_per_s, p.launch_failures == 0};
  });
  return r;
}

std::string what_of(std::string_view delay, bool deferred) {
  if (delay == "scheduling_delay")
    return deferred ? "fn_start − request_val (deferred: the body starts inside the request)"
                    : "fn_start − trigger_async_fn";
  if (delay == "deferral_wait") return "request_val − trigger_async_fn (deferred calls)";
  if (delay == "join_delay") return "val_received − max(fn_end, request_val)";
  if (delay == "total") return "val_received − trigger_async_fn";
  return "val_received − intended launch time (open loop: includes the producer falling behind)";
}

nlohmann::json pinning_json(const AsyncBenchConfig& cfg, const std::string& model) {
  nlohmann::json pinning = {{"policy", cfg.pinned ? "pinned" : "unpinned"}};
  if (cfg.pinned) {
    const bool free_producer = creates_thread_per_call(model);
    pinning["producer_cpu"] = free_producer ? nlohmann::json(nullptr) : nlohmann::json(cfg.producer_cpu);
    pinning["consumer_cpu"] = cfg.consumer_cpu;
    pinning["client_cpu"] = pinning["producer_cpu"];
    pinning["server_cpu"] = cfg.consumer_cpu;
    pinning["worker_cpus"] = cfg.worker_cpus.empty() ? "any" : format_cpu_list(cfg.worker_cpus);
    if (free_producer) pinning["note"] = "producer unpinned: every thread it creates would inherit its CPU";
  }
  return pinning;
}

// One measurement per delay of the point (unavailable, with the reason, when
// no call completed).
// `common_rate`: a point of the payload comparison, offered the rate every
// payload of the model sustains (load_pct is then its own max's share).
void emit_point(Output& out, const AsyncBenchConfig& cfg, const std::string& model, std::string_view mechanism,
                const PayloadKind& payload, double load_pct, bool deferred, const PointResult& p,
                bool common_rate = false) {
  const std::string variant =
      model + "/" + std::string(mechanism) + "/" + payload.name + (common_rate ? "/common-rate" : "");
  const nlohmann::json pinning = pinning_json(cfg, model);
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
          {{"name", name},
           {"variant", variant},
           {"reason", "no call completed after warm-up" + (p.first_error().empty() ? "" : ": " + p.first_error())}});
      continue;
    }
    std::ostringstream tag;
    tag << name << "." << variant;
    if (!common_rate) tag << ".load" << std::llround(load_pct);
    out.hlog.write_interval(out.since_start_s(p.begin_ns),
                            static_cast<double>(std::max<int64_t>(0, p.end_ns - p.begin_ns)) / 1e9, *h, tag.str());
    out.doc["measurements"].push_back({{"name", name},
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
                                       {"hlog_tag", tag.str()}});
    if (common_rate) out.doc["measurements"].back()["series"] = "payload_common_rate";
  }
}

// Everything for one model and one payload type: the ramp (sweep payload
// only), then every mechanism at the main load and, with the sweep payload,
// at every sweep load.
template <class T>
std::unique_ptr<AsyncModel<T>> build_model(const AsyncBenchConfig& cfg, const std::string& model_name) {
  PoolOptions pool;
  pool.workers = cfg.workers;
  pool.worker_cpus = cfg.pinned ? cfg.worker_cpus : std::vector<int>{};
  return make_async_model<T>(model_name, pool);
}

// The model's mechanisms that --mechanisms selects, future first.
template <class T>
std::vector<ResultMechanism> selected_mechanisms(const AsyncBenchConfig& cfg, const AsyncModel<T>& model) {
  std::vector<ResultMechanism> mechanisms;
  for (ResultMechanism m : model.mechanisms())
    if (cfg.mechanisms.empty() ||
        std::find(cfg.mechanisms.begin(), cfg.mechanisms.end(), mechanism_name(m)) != cfg.mechanisms.end())
      mechanisms.push_back(m);
  return mechanisms;
}

// Calls f.template operator()<T>() with T the payload's value type.
template <class F>
void with_payload_type(const PayloadKind& payload, F&& f) {
  if (payload.name == "void")
    f.template operator()<void>();
  else if (payload.name == "long_long")
    f.template operator()<long long>();
  else if (payload.name == "vector10000")
    f.template operator()<std::vector<int>>();
  else
    f.template operator()<std::vector<char>>();
}

// Payload comparison, step 1: the max rate of a payload other than the sweep
// payload, by its own ramp (a large value may saturate a model well below the
// sweep payload's max). 0 when none was found or the model has no mechanism.
template <class T>
double ramp_payload(Output& out, const AsyncBenchConfig& cfg, const std::string& model_name,
                    const PayloadKind& payload) {
  auto model = build_model<T>(cfg, model_name);
  const std::vector<ResultMechanism> mechanisms = selected_mechanisms(cfg, *model);
  if (mechanisms.empty()) return 0.0;
  const ModelRamp r = ramp<T>(*model, mechanisms.front(), cfg, payload.bytes, out);
  ++out.done_points;
  model->shutdown(ShutdownMode::kDrain);
  out.doc["payload_ramps"][model_name][payload.name] = {{"mechanism", mechanism_name(mechanisms.front())},
                                                        {"max_rate_per_s", r.result.max_rate_per_s},
                                                        {"saturation_found", r.result.saturation_found},
                                                        {"steps", r.steps}};
  return r.result.max_rate_per_s;
}

// Payload comparison, step 2: every mechanism with this payload at `rate`,
// the rate every payload of the model sustains.
template <class T>
void measure_at_common_rate(Output& out, const AsyncBenchConfig& cfg, const std::string& model_name,
                            const PayloadKind& payload, double rate, double own_max_rate) {
  auto model = build_model<T>(cfg, model_name);
  for (ResultMechanism m : selected_mechanisms(cfg, *model)) {
    out.progress(model_name + "/" + std::string(mechanism_name(m)) + "/" + payload.name + " @ common " +
                 std::to_string(std::llround(rate)) + "/s");
    const PointResult p = run_open_loop_point(*model, m,
                                              point_settings(cfg, rate, cfg.scaled_ms(cfg.point_ms) * 1'000'000,
                                                             cfg.scaled_ms(cfg.warmup_ms) * 1'000'000, payload.bytes));
    ++out.done_points;
    emit_point(out, cfg, model_name, mechanism_name(m), payload, 100.0 * rate / own_max_rate, model->deferred(), p,
               true);
  }
  model->shutdown(ShutdownMode::kDrain);
}

template <class T>
void run_model_payload(Output& out, const AsyncBenchConfig& cfg, const std::string& model_name,
                       const PayloadKind& payload, bool is_sweep_payload, std::map<std::string, double>& max_rates) {
  auto model = build_model<T>(cfg, model_name);
  const std::vector<ResultMechanism> mechanisms = selected_mechanisms(cfg, *model);
  if (mechanisms.empty()) return;

  if (is_sweep_payload) {
    const ModelRamp r = ramp<T>(*model, mechanisms.front(), cfg, payload.bytes, out);
    ++out.done_points;
    max_rates[model_name] = r.result.max_rate_per_s;
    out.doc["max_rate_per_s"][model_name] = r.result.max_rate_per_s;
    out.doc["ramps"][model_name] = {{"mechanism", mechanism_name(mechanisms.front())},
                                    {"payload", payload.name},
                                    {"saturation_found", r.result.saturation_found},
                                    {"steps", r.steps}};
    if (!r.result.saturation_found)
      out.doc["warnings"].push_back(model_name +
                                    ": no saturation up to the --max-rate cap; 'max' is the cap's achieved rate");
  }
  const double max_rate = max_rates.count(model_name) ? max_rates[model_name] : 0.0;
  if (max_rate <= 0) {
    out.doc["unavailable"].push_back(
        {{"name", "(model)"}, {"variant", model_name}, {"reason", "ramp found no sustainable rate"}});
    return;
  }
  std::vector<double> loads = {cfg.measure_at_pct};
  if (is_sweep_payload)
    for (double pct : cfg.sweep_pcts)
      if (std::abs(pct - cfg.measure_at_pct) > 1e-9) loads.push_back(pct);
  for (ResultMechanism m : mechanisms) {
    for (double pct : loads) {
      const double rate = std::max(1.0, max_rate * pct / 100.0);
      out.progress(model_name + "/" + std::string(mechanism_name(m)) + "/" + payload.name + " @ " +
                   std::to_string(std::llround(pct)) + "%");
      const PointResult p =
          run_open_loop_point(*model, m,
                              point_settings(cfg, rate, cfg.scaled_ms(cfg.point_ms) * 1'000'000,
                                             cfg.scaled_ms(cfg.warmup_ms) * 1'000'000, payload.bytes));
      ++out.done_points;
      emit_point(out, cfg, model_name, mechanism_name(m), payload, pct, model->deferred(), p);
    }
  }
  model->shutdown(ShutdownMode::kDrain);
}

// The coroutine model's floor: a coroutine resumed by the thread that
// suspended it, on the consumer's CPU.
void measure_same_thread_resume(Output& out, const AsyncBenchConfig& cfg) {
  out.progress("coroutine same-thread resume");
  const baseline::Reference reference = baseline::same_thread_resume_reference();
  baseline::ReferenceConfig rc;
  rc.iterations = std::max<int64_t>(10, std::llround(static_cast<double>(cfg.resume_batches) * cfg.scale));
  rc.warmup_iterations = rc.iterations / 10;
  rc.placement = {cfg.pinned, cfg.consumer_cpu, cfg.consumer_cpu};
  const int64_t begin = monotonic_ns();
  const baseline::ReferenceResult r = reference.run(rc);
  const int64_t end = monotonic_ns();
  if (cfg.pinned) unpin_current_thread();
  const std::string tag = "same_thread_resume.coroutine/resume/void";
  out.hlog.write_interval(out.since_start_s(begin), static_cast<double>(end - begin) / 1e9, r.histogram, tag);
  out.doc["measurements"].push_back(
      {{"name", reference.name},
       {"variant", "coroutine/resume/void"},
       {"what", reference.what},
       {"model", "coroutine"},
       {"mechanism", "resume"},
       {"payload", "void"},
       {"pinning", {{"policy", cfg.pinned ? "pinned" : "unpinned"}, {"consumer_cpu", cfg.consumer_cpu}}},
       {"iterations", r.histogram.total_count()},
       {"warmup_iterations", rc.warmup_iterations},
       {"wall_time_s", static_cast<double>(end - begin) / 1e9},
       {"observed", r.observed},
       {"latency", latency_summary(r.histogram)},
       {"cdf", latency_cdf(r.histogram)},
       {"hlog_tag", tag}});
}

nlohmann::json config_json(const AsyncBenchConfig& cfg) {
  std::vector<std::string> payload_names;
  for (const PayloadKind& p : cfg.payloads) payload_names.push_back(p.name);
  return {{"form", cfg.quick ? "quick" : "full"},
          {"scale", cfg.scale},
          {"models", cfg.models},
          {"payloads", payload_names},
          {"sweep_payload", cfg.payloads.front().name},
          {"measure_at_pct", cfg.measure_at_pct},
          {"sweep_pcts", cfg.sweep_pcts},
          {"ramp_step_ms", cfg.scaled_ms(cfg.step_ms)},
          {"point_ms", cfg.scaled_ms(cfg.point_ms)},
          {"warmup_ms", cfg.scaled_ms(cfg.warmup_ms)},
          {"start_rate_per_s", cfg.start_rate_per_s},
          {"max_rate_cap_per_s", cfg.max_rate_per_s},
          {"backlog_growth_limit", kBacklogGrowthLimit},
          {"max_in_flight", cfg.max_in_flight},
          {"workers", cfg.workers},
          {"placement", cfg.pinned ? "pinned" : "unpinned"},
          {"producer_cpu", cfg.producer_cpu},
          {"consumer_cpu", cfg.consumer_cpu},
          {"worker_cpus", cfg.worker_cpus.empty() ? "any" : format_cpu_list(cfg.worker_cpus)}};
}

}  // namespace

PayloadKind payload_kind(const std::string& name) {
  if (name == "void") return {name, 0};
  if (name == "long_long") return {name, static_cast<int64_t>(sizeof(long long))};
  if (name == "vector10000") return {name, static_cast<int64_t>(10'000 * sizeof(int))};
  throw std::invalid_argument("unknown payload '" + name + "' (void, long_long, vector10000)");
}

PayloadKind bytes_payload(int64_t bytes) { return {"bytes" + std::to_string(bytes), bytes}; }

void run_async_bench(const AsyncBenchConfig& cfg, nlohmann::json& doc, HlogWriter& hlog) {
  if (cfg.models.empty()) throw std::invalid_argument("no models to measure");
  if (cfg.payloads.empty()) throw std::invalid_argument("no payloads to measure");
  doc["config"] = config_json(cfg);
  doc["max_rate_per_s"] = nlohmann::json::object();
  doc["ramps"] = nlohmann::json::object();
  doc["payload_ramps"] = nlohmann::json::object();
  doc["payload_common_rate_per_s"] = nlohmann::json::object();
  doc["measurements"] = nlohmann::json::array();
  doc["unavailable"] = nlohmann::json::array();
  if (cfg.pinned && cfg.producer_cpu == cfg.consumer_cpu)
    doc["warnings"].push_back("producer and consumer share one CPU");

  hlog.write_header(static_cast<double>(realtime_ns()) / 1e9, "tailscope-asyncbench async probe delays");
  Output out{doc, hlog, monotonic_ns()};
  // Per model: its ramp, and a point per payload and mechanism (at most two
  // mechanisms), plus the sweep; then the same-thread resume.
  // With several payloads, each is also ramped and all are measured at one
  // rate every payload sustains (the payload comparison, docs/async-study.md).
  const int64_t sweep_extra = static_cast<int64_t>(cfg.sweep_pcts.size());
  const auto payload_count = static_cast<int64_t>(cfg.payloads.size());
  const int64_t compare_extra = payload_count > 1 ? (payload_count - 1) + 2 * payload_count : 0;
  for (size_t k = 0; k < cfg.models.size(); ++k) out.planned_points += 1 + 2 * (1 + sweep_extra) + compare_extra;

  std::map<std::string, double> max_rates;
  for (const std::string& model : cfg.models) {
    with_payload_type(cfg.payloads.front(),
                      [&]<class T>() { run_model_payload<T>(out, cfg, model, cfg.payloads.front(), true, max_rates); });
    if (cfg.payloads.size() < 2 || max_rates[model] <= 0) continue;
    std::map<std::string, double> payload_max = {{cfg.payloads.front().name, max_rates[model]}};
    double lowest = max_rates[model];
    for (size_t k = 1; k < cfg.payloads.size(); ++k) {
      const PayloadKind& p = cfg.payloads[k];
      with_payload_type(p, [&]<class T>() { payload_max[p.name] = ramp_payload<T>(out, cfg, model, p); });
      lowest = std::min(lowest, payload_max[p.name]);
    }
    if (lowest <= 0) {
      out.doc["unavailable"].push_back({{"name", "(payload comparison)"},
                                        {"variant", model},
                                        {"reason", "a payload's ramp found no sustainable rate"}});
      continue;
    }
    const double common = std::max(1.0, lowest * cfg.measure_at_pct / 100.0);
    out.doc["payload_common_rate_per_s"][model] = common;
    for (const PayloadKind& p : cfg.payloads)
      with_payload_type(p,
                        [&]<class T>() { measure_at_common_rate<T>(out, cfg, model, p, common, payload_max[p.name]); });
  }
  if (std::find(cfg.models.begin(), cfg.models.end(), "coroutine") != cfg.models.end())
    measure_same_thread_resume(out, cfg);
  doc["wall_time_s"] = static_cast<double>(monotonic_ns() - out.t0_ns) / 1e9;
  emit_progress(kEngine, "done", 1.0);
}

}  // namespace tailscope::exec
