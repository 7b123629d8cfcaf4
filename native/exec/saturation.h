// Whether an open-loop point was sustained, and the highest rate a model
// sustains: the analysis behind tailscope-asyncbench's ramp
// (docs/async-study.md, "Saturation, achieved rate and backlog").
//
// Everything here is computed after a point from the probe stamps alone, so
// nothing is added to the timed path, and it is pure: the tests feed it
// synthetic calls and synthetic step outcomes.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/hdr_histogram.h"
#include "exec/async_probe.h"

namespace tailscope::exec {

// Overloaded = the backlog grew during the point: the median lateness of the
// last quarter of the calls exceeds the first quarter's by more than this
// fraction of the point.
inline constexpr double kBacklogGrowthLimit = 0.05;
// A gap shorter than this between one body's end and the next start is the
// hand-off itself, not a stall.
inline constexpr int64_t kStallNs = 50'000;

// One call of an open-loop point.
struct CallRecord {
  AsyncProbe probe;
  int64_t intended_ns = 0;  // when the open-loop schedule had it due
  bool launched = false;    // false: the launch failed (no thread) or never happened
};

// The backlog the calls of one point met. This is what tells a hand-off cost
// from queueing, and a sustained point from an overloaded one.
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

// The backlog of a finished point. `records` in launch order; the first
// `warmup_calls` only count as calls ahead of later ones; `window_ns` is the
// recorded part of the point (the growth limit is a fraction of it).
//
// The point grew when the median lateness (val_received − intended start) of
// the last quarter of the recorded calls exceeds that of the first quarter by
// more than kBacklogGrowthLimit of the window, i.e. the model delivers less
// than ~94 % of the offered rate. Medians, so a stall shorter than half a
// quarter moves nothing. Fewer than 8 recorded calls never count as growth.
Backlog analyse_backlog(std::span<const CallRecord> records, int64_t warmup_calls, bool deferred, int64_t window_ns);

// Completions per second over the span of the recorded completions (first to
// last val_received): the throughput the model delivered. Not calls ÷ (last
// val_received − first intended start), which charges the last call's
// latency to the throughput: one millisecond stall at the end of a short
// step made a point "saturated". 0 with fewer than two completions.
double achieved_rate_per_s(std::span<const CallRecord> records, int64_t warmup_calls);

// Why a point counts as saturated (empty: sustained): the backlog grew, the
// in-flight cap was reached, a thread could not be created, the step's time
// limit was hit.
std::vector<std::string> saturation_reasons(const Backlog& backlog, int64_t in_flight_limited, int64_t launch_failures,
                                            bool deadline_hit);

// ---- the ramp ---------------------------------------------------------------

struct RampSearch {
  double start_rate_per_s = 2000;
  double max_rate_per_s = 4e6;  // no step is offered above this
  int refinements = 2;          // geometric bisections after the first saturated step
  int max_doublings = 24;
};

// What one step at an offered rate gave.
struct RampStepOutcome {
  bool saturated = false;
  double achieved_per_s = 0;
  // A saturated step is repeated once unless this is false (thread creation
  // failed: a repeat would fail the same way).
  bool repeatable = true;
};

struct RampResult {
  // The highest rate the model sustained (min of offered and achieved); only
  // when no step was sustained, the best achieved rate of a saturated step.
  double max_rate_per_s = 0;
  double best_saturated_per_s = 0;
  bool saturation_found = false;  // false: the ramp stopped at max_rate_per_s
  int steps = 0;                  // runs of run_step, repeats included
};

// Doubles the offered rate from start_rate_per_s until a step saturates, then
// bisects (geometrically) between the last sustained and the first saturated
// rate. A saturated step is run once more and counts as saturated only if the
// repeat saturates too, so one scheduler stall on a shared machine does not
// end the ramp. run_step(rate, attempt) runs one step; attempt is 0 or 1.
RampResult find_max_rate(const RampSearch& search,
                         const std::function<RampStepOutcome(double rate_per_s, int attempt)>& run_step);

}  // namespace tailscope::exec
