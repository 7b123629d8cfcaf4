// tailscope-stress: interference kernels beside a service under test.
//
//   tailscope-stress --kernel l3 --instances 2 --cpus 1 --duty-cycle 1 --duration-s 30 --out stress.json
//   tailscope-stress --probe-counters            (for `tailscope doctor`)
//
// Prints {"event":"ready"} on stdout once every instance holds its working
// set, stops by itself after --duration-s and at once on SIGTERM/SIGINT (and
// when its parent dies: PR_SET_PDEATHSIG), then writes one result document
// with the pressure it achieved (docs/prof.md).
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>

#include "core/affinity.h"
#include "core/result_writer.h"
#include "core/stop_signals.h"
#include "prof/placement.h"
#include "prof/probe.h"
#include "prof/stress/driver.h"

namespace {

using nlohmann::json;
using namespace tailscope;

// Exit codes (docs/prof.md): 0 document written (also when stopped by a
// signal: that is how a study ends a stressor), 1 a failure while running,
// 2 bad input (nothing started, nothing written).
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

}  // namespace

int main(int argc, char** argv) {
  // Die with the parent: a stressor must never outlive the study that started it.
  const pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) return kExitFailure;  // the parent died before prctl took effect

  prof::stress::StressConfig config;
  std::string cpus_text, out_path;
  bool probe = false;
  double working_set = 0;
  CLI::App app{"tailscope-stress: interference kernels (cpu, l1i, l1d, l2, l3, membw, memcap)"};
  app.add_option("--kernel", config.kernel, "cpu | l1i | l1d | l2 | l3 | membw | memcap");
  app.add_option("--instances", config.instances, "Instances, 1 … 64 (instance i runs on CPU i mod |cpus|)")
      ->check(CLI::Range(1, 64));
  app.add_option("--cpus", cpus_text, "CPUs to pin the instances to, e.g. 1 or 0-1,3 (default: every allowed CPU)");
  app.add_option("--duty-cycle", config.duty_cycle, "Busy fraction of each 10 ms period, in (0, 1]");
  app.add_option("--duration-s", config.duration_s, "Stop after this many seconds, in (0, 3600]");
  app.add_option("--working-set-bytes", working_set,
                 "Per-instance working set (default: from the sysfs cache sizes; memcap: a share of free memory)");
  app.add_option("--memcap-max-fraction", config.memcap_max_fraction,
                 "Most of MemAvailable the instances may hold together, in (0, 0.9] (default 0.5)");
  app.add_option("--out", out_path, "Result document (default: stdout, after the ready line)");
  app.add_flag("--probe-counters", probe, "Report which perf events open and count here, then exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "tailscope-stress: error: " << e.what() << "\n";
    return kExitBadInput;
  }
  try {
    if (probe) {
      json doc = new_result_document("tailscope-stress", argc, argv);
      doc["config"] = {{"probe_counters", true}};
      doc["counters_probe"] = prof::probe_counters();
      doc["measurements"] = json::array();
      doc["unavailable"] = json::array();
      write_result(doc, out_path);
      return 0;
    }
    if (config.kernel.empty())
      throw std::invalid_argument("--kernel is required (cpu, l1i, l1d, l2, l3, membw, memcap)");
    prof::stress::make_kernel(config.kernel);  // validates the name
    // CLI11's Range lets NaN through; every number is checked here, with its range.
    if (!std::isfinite(config.duty_cycle) || config.duty_cycle <= 0 || config.duty_cycle > 1)
      throw std::invalid_argument("--duty-cycle: must be in (0, 1]");
    if (!std::isfinite(config.duration_s) || config.duration_s <= 0 || config.duration_s > 3600)
      throw std::invalid_argument("--duration-s: must be in (0, 3600]");
    if (!std::isfinite(config.memcap_max_fraction) || config.memcap_max_fraction <= 0 ||
        config.memcap_max_fraction > 0.9)
      throw std::invalid_argument("--memcap-max-fraction: must be in (0, 0.9]");
    if (!std::isfinite(working_set) || working_set < 0 || working_set > 1e13 || (working_set > 0 && working_set < 128))
      throw std::invalid_argument("--working-set-bytes: must be in [128, 1e13] (or 0 for the default)");
    config.working_set_bytes = static_cast<size_t>(working_set);
    config.cpus = allowed_cpus();
    if (!cpus_text.empty()) {
      try {
        config.cpus = parse_cpu_list(cpus_text);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("--cpus: ") + e.what());
      }
      prof::check_cpus_allowed(config.cpus, allowed_cpus(), "--cpus " + cpus_text);
    }
  } catch (const std::invalid_argument& e) {
    std::cerr << "tailscope-stress: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "tailscope-stress: error: " << e.what() << "\n";
    return kExitFailure;
  }

  // Blocked in every thread (instances inherit the mask); the driver waits for them.
  const sigset_t stop_set = signal_set({SIGINT, SIGTERM, SIGHUP});
  pthread_sigmask(SIG_BLOCK, &stop_set, nullptr);
  try {
    json doc = new_result_document("tailscope-stress", argc, argv);
    const auto outcome = prof::stress::run_stress(
        config, stop_set,
        [] {
          std::cout << json{{"event", "ready"}}.dump() << std::endl;
        },
        [](const std::string& message) { std::cerr << "tailscope-stress: " << message << std::endl; });
    const json fields = prof::stress::outcome_json(config, outcome);
    doc["config"] = {{"kernel", config.kernel},
                     {"instances", config.instances},
                     {"cpus", format_cpu_list(config.cpus)},
                     {"duty_cycle", config.duty_cycle},
                     {"duration_s", config.duration_s},
                     {"working_set_bytes", config.working_set_bytes ? json(config.working_set_bytes) : json(nullptr)},
                     {"memcap_max_fraction", config.memcap_max_fraction}};
    for (const auto& [key, value] : fields.items()) doc[key] = value;
    doc["measurements"] = json::array();
    doc["unavailable"] = json::array();
    if (!outcome.clamped.is_null())
      doc["warnings"] = json::array({"working set clamped to " + std::to_string(outcome.requested_working_set_bytes) +
                                     " bytes per instance (free memory × --memcap-max-fraction)"});
    write_result(doc, out_path);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tailscope-stress: error: " << e.what() << "\n";
    return kExitFailure;
  }
}
