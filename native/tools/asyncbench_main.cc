// tailscope-asyncbench: what launching and joining one async call costs, per
// concurrency model, result mechanism and payload (docs/async-study.md).
//
// This file parses the flags; the procedure (ramp to saturation, points,
// load sweep, same-thread resume) is exec/async_bench.h, one open-loop point
// is exec/open_loop_driver.h, and saturation and the ramp search are
// exec/saturation.h.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "core/affinity.h"
#include "core/hlog.h"
#include "core/result_writer.h"
#include "core/split.h"
#include "exec/async_bench.h"
#include "exec/async_models.h"

using namespace tailscope;
using namespace tailscope::exec;

namespace {

// --cpus PRODUCER,CONSUMER[,WORKER...]: every CPU one this process may use.
void apply_cpus(const std::string& text, AsyncBenchConfig& cfg) {
  const std::vector<int> allowed = allowed_cpus();
  std::vector<int> cpus;
  for (const std::string& item : split_list(text)) {
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

// --payloads and --payload-bytes; the sweep payload (else the first) first,
// because the ramp runs with it.
std::vector<PayloadKind> parse_payloads(const std::string& text, int64_t payload_bytes,
                                        const std::string& sweep_payload) {
  std::vector<PayloadKind> payloads;
  for (const std::string& name : split_list(text)) {
    try {
      payloads.push_back(payload_kind(name));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--payloads: ") + e.what());
    }
  }
  if (payload_bytes > 0) payloads.push_back(bytes_payload(payload_bytes));
  if (payloads.empty()) throw std::invalid_argument("--payloads is empty");
  auto sweep = std::find_if(payloads.begin(), payloads.end(), [&](auto& p) { return p.name == sweep_payload; });
  if (sweep == payloads.end()) sweep = payloads.begin();
  std::rotate(payloads.begin(), sweep, sweep + 1);
  return payloads;
}

// --sweep: loads in % of max, or "none".
std::vector<double> parse_sweep(const std::string& text, const std::vector<double>& default_pcts) {
  if (text == "none") return {};
  if (text.empty()) return default_pcts;
  std::vector<double> pcts;
  for (const std::string& s : split_list(text)) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || v <= 0 || v > 200)
      throw std::invalid_argument("--sweep: '" + s + "' is not a load in (0, 200] %");
    pcts.push_back(v);
  }
  return pcts;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tailscope-asyncbench: scheduling and join delay of async calls per concurrency model "
      "(deferred, std::async, std::thread, pools, coroutines), ramp to saturation, load sweep"};
  AsyncBenchConfig cfg;
  bool quick = false;
  int64_t payload_bytes = 0, workers = 0;
  std::string out_path, artifacts_dir, models_text, mechanisms_text, payloads_text = "long_long,void,vector10000",
                                                                     cpus_text, placement = "pinned", sweep_text,
                                                                     sweep_payload = "long_long";
  app.add_option("--out", out_path, "Result document path (default: stdout)");
  app.add_option("--artifacts", artifacts_dir, "Folder for asyncbench.hlog (one tagged interval per measurement)");
  app.add_flag("--quick", quick, "Quick form: short ramp steps and points (well under 2 minutes for all models)");
  app.add_option("--scale", cfg.scale, "Multiply every step and point duration (e.g. 0.2 for a smoke run)")
      ->check(CLI::Range(0.01, 100.0));
  app.add_option("--models", models_text,
                 "Comma-separated models (default: all): deferred, std-async, std-thread, "
                 "fixed-pool, spin-pool, work-stealing, coroutine");
  app.add_option("--mechanisms", mechanisms_text,
                 "Comma-separated result mechanisms to keep: future, continuation, "
                 "join, resume (default: every one a model offers)");
  app.add_option("--payloads", payloads_text, "Comma-separated payloads: void, long_long, vector10000");
  app.add_option("--payload-bytes", payload_bytes, "Also measure a payload of N bytes (std::vector<char>)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--sweep-payload", sweep_payload, "Payload used for the ramp and the load sweep");
  app.add_option("--measure-at-pct", cfg.measure_at_pct, "Load of the main point, % of the model's max rate")
      ->check(CLI::Range(1.0, 200.0));
  app.add_option("--sweep", sweep_text, "Comma-separated loads in % of max (default 25,50,75,90,100; 'none' to skip)");
  app.add_option("--start-rate", cfg.start_rate_per_s, "First ramp step, calls/s")->check(CLI::Range(1.0, 1e8));
  app.add_option("--max-rate", cfg.max_rate_per_s, "Ramp ceiling, calls/s")->check(CLI::Range(1.0, 1e8));
  app.add_option("--max-in-flight", cfg.max_in_flight, "Calls launched but not yet joined, at most")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  app.add_option("--workers", workers, "Pool workers (default: allowed CPUs − 1, at least 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{256}));
  app.add_option("--cpus", cpus_text,
                 "PRODUCER,CONSUMER[,WORKER...] CPUs when pinned (default: first and last allowed "
                 "CPU; workers unpinned)");
  app.add_option("--placement", placement, "pinned or unpinned");
  CLI11_PARSE(app, argc, argv);

  try {
    if (placement != "pinned" && placement != "unpinned")
      throw std::invalid_argument("--placement: '" + placement + "' is neither pinned nor unpinned");
    cfg.pinned = placement == "pinned";
    if (quick) cfg.use_quick_form();
    const CpuPair pair = default_cpu_pair();
    cfg.producer_cpu = pair.client_cpu;
    cfg.consumer_cpu = pair.server_cpu;
    if (!cpus_text.empty()) apply_cpus(cpus_text, cfg);
    cfg.workers = workers > 0 ? static_cast<size_t>(workers) : std::max<size_t>(1, allowed_cpus().size() - 1);

    cfg.models = models_text.empty() ? async_model_names() : split_list(models_text);
    for (const std::string& m : cfg.models)
      if (std::find(async_model_names().begin(), async_model_names().end(), m) == async_model_names().end())
        throw std::invalid_argument("--models: unknown model '" + m + "'");
    if (cfg.models.empty()) throw std::invalid_argument("--models is empty");
    cfg.mechanisms = split_list(mechanisms_text);
    for (const std::string& m : cfg.mechanisms)
      if (m != "future" && m != "continuation" && m != "join" && m != "resume")
        throw std::invalid_argument("--mechanisms: unknown result mechanism '" + m + "'");
    cfg.payloads = parse_payloads(payloads_text, payload_bytes, sweep_payload);
    cfg.sweep_pcts = parse_sweep(sweep_text, cfg.sweep_pcts);

    nlohmann::json doc = new_result_document("tailscope-asyncbench", argc, argv);
    std::ostringstream hlog_text;
    HlogWriter hlog(hlog_text);
    run_async_bench(cfg, doc, hlog);
    if (!artifacts_dir.empty()) {
      ensure_directory(artifacts_dir);
      write_file_atomic(artifacts_dir + "/asyncbench.hlog", hlog_text.str());
      doc["artifacts"] = {{"hlog", "asyncbench.hlog"}};
    }
    write_result(doc, out_path);
  } catch (const std::exception& e) {
    std::cerr << "tailscope-asyncbench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
