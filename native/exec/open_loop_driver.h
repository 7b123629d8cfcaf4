// One open-loop point of tailscope-asyncbench: a producer thread launches
// calls at an offered rate (call i is due at t0 + i/rate whatever happened to
// call i-1) and a separate consumer thread requests their values in launch
// order. Every call carries the 5-timestamp probe (exec/async_probe.h); the
// point's backlog and saturation verdict come from exec/saturation.h.
//
// A point is bounded in calls and in time: an offered rate the model cannot
// sustain ends as "saturated", never as a hang.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/hdr_histogram.h"
#include "core/schedstat.h"
#include "exec/async_model.h"
#include "exec/async_probe.h"
#include "exec/saturation.h"

namespace tailscope::exec {

// Memory bound: one CallRecord per call.
inline constexpr int64_t kMaxCallsPerPoint = 400'000;

struct OpenLoopPoint {
  double rate_per_s = 1000;
  int64_t duration_ns = 0;       // recorded part
  int64_t warmup_ns = 0;         // calls due in it run but are not recorded
  int64_t max_in_flight = 4096;  // launched but not yet joined, at most
  int64_t payload_bytes = 0;     // std::vector<char> payloads only
  // Pinned: producer and consumer on their CPUs — except the producer of a
  // model that creates a thread per call, which stays unpinned (every thread
  // it creates would inherit its CPU).
  bool pinned = false;
  int producer_cpu = 0, consumer_cpu = 1;
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
  // alive before and after it), the producer and the consumer. nullopt:
  // schedstat unavailable.
  std::optional<SchedStat> workers_sched, producer_sched, consumer_sched;
  int64_t sched_window_ns = 0;  // between the two readings of workers_sched
  AsyncProbeHistograms delays;
  HdrHistogram total_from_intended = HdrHistogram::for_latency_ns();
  int64_t begin_ns = 0, end_ns = 0;      // first recorded call due → last value received
  std::string launch_error, call_error;  // first of each (producer's, consumer's)
  std::string first_error() const { return !launch_error.empty() ? launch_error : call_error; }
};

// Runs point.rate_per_s calls per second for warm-up + duration through
// `model` with `mechanism`. Defined for the payloads the benchmark measures:
// void, long long, std::vector<int> (10 000 ints), std::vector<char>
// (payload_bytes).
template <class T>
PointResult run_open_loop_point(AsyncModel<T>& model, ResultMechanism mechanism, const OpenLoopPoint& point);

extern template PointResult run_open_loop_point<void>(AsyncModel<void>&, ResultMechanism, const OpenLoopPoint&);
extern template PointResult run_open_loop_point<long long>(AsyncModel<long long>&, ResultMechanism,
                                                           const OpenLoopPoint&);
extern template PointResult run_open_loop_point<std::vector<int>>(AsyncModel<std::vector<int>>&, ResultMechanism,
                                                                  const OpenLoopPoint&);
extern template PointResult run_open_loop_point<std::vector<char>>(AsyncModel<std::vector<char>>&, ResultMechanism,
                                                                   const OpenLoopPoint&);

}  // namespace tailscope::exec
