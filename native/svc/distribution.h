// Latency distributions for simulated work: CPU busy time and the response
// time of simulated stores and caches (docs/microservices.md lists the ones
// the socialnet topology uses and why).
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svc/request_factor.h"

namespace tailscope::svc {

// The largest value any distribution parameter (us, min_us, max_us, mean_us,
// median_us, cap_us) may take, and the longest draw: 60 s. A stage is work
// inside one request; a larger figure is a unit slip (ns written as µs) that
// would hold a thread past every call timeout, and 1e18 µs would overflow the
// float → int64 conversion of a draw (docs/microservices.md).
inline constexpr double kMaxStageUs = 60e6;
inline constexpr int64_t kMaxStageNs = 60'000'000'000;
// The largest loading `shared` on the request's common factor: above it a
// stage would have almost no draw of its own (request_factor.h).
inline constexpr double kMaxShared = 0.95;
// An empirical distribution is a table of quantiles at equally spaced
// probabilities 0, 1/(N−1), …, 1: 2 … kMaxQuantiles of them (the twin's
// inference writes 201, a quantile every 0.5 %: docs/twin.md).
inline constexpr size_t kMaxQuantiles = 1001;

struct LatencyDistribution {
  enum class Kind { kConstant, kUniform, kExponential, kLognormal, kEmpirical };
  Kind kind = Kind::kConstant;
  double a_ns = 0;    // constant: value; uniform: min; exponential: mean; lognormal: median
  double b_ns = 0;    // uniform: max; lognormal: sigma (dimensionless)
  double cap_ns = 0;  // samples are clipped here (0 = 20 × the median/mean), so one draw cannot stall a run
  // empirical: the quantiles (ns) at probabilities i/(N−1), non-decreasing;
  // a draw interpolates linearly between the two around its probability, so
  // the distribution is the observed one, tail included (no cap by default).
  std::vector<double> quantiles_ns;
  // The loading λ on the request's common factor (0 … kMaxShared; 0 = an
  // independent draw): corr of two stages' normal draws in one request = λ₁λ₂.
  double shared = 0;

  // Draws one value in [0, kMaxStageNs] (thread-safe: per-thread generator),
  // independent of every other draw: for callers with no request.
  int64_t sample_ns() const;
  // The draw for a stage of the request with this factor: its normal is
  // λ·Z + √(1−λ²)·ε mapped through the distribution's inverse CDF, so the
  // marginal is sample_ns()'s. No factor, or λ = 0: sample_ns().
  int64_t sample_ns(const RequestFactor& factor) const;
  double mean_ns() const;
  nlohmann::json to_json() const;
};

// Parses {"kind":"lognormal","median_us":200,"sigma":0.5} and friends, each
// with an optional "cap_us" and "shared" (the loading, 0 … 0.95); an
// empirical one is {"kind":"empirical","quantiles_us":[q0, …, q(N−1)]}.
// Throws std::invalid_argument naming `where` and the problem.
LatencyDistribution parse_distribution(const nlohmann::json& j, const std::string& where);

// Busy-loops on the calling thread until it has run `ns` of CPU time, so
// simulated work costs the same CPU whatever the scheduler does, as real code
// would: a burn preempted halfway takes longer in wall time instead of ending
// on a wall-clock deadline with half its work undone (which made a model with
// many runnable threads look cheaper per request than it is). Returns early
// once `stop` is set (a service shutting down must not wait out a long stage:
// ServiceRuntime::stopping()) or after kMaxStageNs of wall time.
void burn_cpu_ns(int64_t ns, const std::atomic<bool>& stop);

}  // namespace tailscope::svc
