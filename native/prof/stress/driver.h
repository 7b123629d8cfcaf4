// tailscope-stress's driver: N instances of one kernel, each pinned to a CPU
// of the list (instance i on cpus[i mod n]), run with a duty cycle for a
// duration, stopped at once by SIGTERM/SIGINT. It reports the pressure it
// achieved, so interference is quantified even without hardware counters.
#pragma once

#include <signal.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "prof/stress/kernel.h"

namespace tailscope::prof::stress {

struct StressConfig {
  std::string kernel;
  int instances = 1;
  std::vector<int> cpus;
  double duty_cycle = 1.0;
  double duration_s = 10.0;
  size_t working_set_bytes = 0;  // per instance; 0 = the kernel's default
  double memcap_max_fraction = 0.5;
};

struct StressOutcome {
  size_t requested_working_set_bytes = 0;  // per instance, after clamping
  nlohmann::json clamped;                  // null, or {requested_bytes, available_bytes, to_bytes}
  std::vector<Pressure> pressure;          // per instance
  std::vector<size_t> working_set_bytes;   // per instance, at the end
  std::vector<double> busy_s;              // per instance
  double ran_s = 0;
  std::string stopped_by;  // "duration", "SIGTERM", "SIGINT"
};

// Runs the configured kernel. `stop_set` holds the signals that stop the run
// (they must already be blocked in every thread); `on_ready` is called once
// every instance has prepared its working set, before the clock starts.
// Throws std::invalid_argument / std::runtime_error for bad input or
// allocation failure (nothing is left running then).
StressOutcome run_stress(const StressConfig& config, const sigset_t& stop_set, const std::function<void()>& on_ready,
                         const std::function<void(const std::string&)>& message);

// The result fields of the interface: kernel, instances, cpus, working_set_bytes, duty_cycle, achieved.
nlohmann::json outcome_json(const StressConfig& config, const StressOutcome& outcome);

}  // namespace tailscope::prof::stress
