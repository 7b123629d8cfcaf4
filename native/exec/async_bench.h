// The tailscope-asyncbench procedure (docs/async-study.md), as a library the
// engine's main() calls after parsing its flags:
//   1. ramp: per model, raise the offered rate step by step until the backlog
//      grows during a step (saturation, confirmed by a repeat); the highest
//      sustained rate is the max (exec/saturation.h);
//   2. measure every mechanism at measure_at_pct of that max (sweep payload);
//   3. sweep the load (sweep_pcts) with the sweep payload to show the tail grow;
//   3b. with several payloads: ramp each other payload too, then measure every
//      payload × mechanism at one common rate, measure_at_pct of the lowest
//      payload max — a rate every payload sustains, so the payload comparison
//      compares delays, not one payload's overload ("series":
//      "payload_common_rate" in the document);
//   4. the same-thread coroutine resume, the coroutine model's floor
//      (baseline/same_thread_resume.cc).
// Each point is one open-loop run (exec/open_loop_driver.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/hlog.h"

namespace tailscope::exec {

// A value type the calls return, by its name in the document.
struct PayloadKind {
  std::string name;  // void, long_long, vector10000, bytes<N>
  int64_t bytes;     // size of the value handed over (0 for void)
};

// The payloads --payloads names, and the std::vector<char> of --payload-bytes.
// Throws std::invalid_argument naming an unknown one.
PayloadKind payload_kind(const std::string& name);
PayloadKind bytes_payload(int64_t bytes);

struct AsyncBenchConfig {
  bool quick = false;
  double scale = 1.0;  // multiplies every step and point duration
  std::vector<std::string> models;
  std::vector<std::string> mechanisms;  // empty = every mechanism a model offers
  std::vector<PayloadKind> payloads;    // the first one ramps and sweeps
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

  // The --quick form: short ramp steps and points.
  void use_quick_form() {
    quick = true;
    step_ms = 120;
    point_ms = 300;
    warmup_ms = 60;
    ramp_refinements = 1;
    resume_batches = 1000;
  }
  int64_t scaled_ms(int64_t ms) const { return std::max<int64_t>(1, std::llround(static_cast<double>(ms) * scale)); }
};

// Runs the whole procedure and fills the result document `doc` (config,
// max_rate_per_s, ramps, measurements, unavailable, warnings); writes one
// tagged interval per measurement to `hlog` (header included). Progress lines
// go to stderr. Throws on a failure that leaves no meaningful document.
void run_async_bench(const AsyncBenchConfig& config, nlohmann::json& doc, HlogWriter& hlog);

}  // namespace tailscope::exec
