#include "svc/distribution.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include "core/clock.h"

namespace tailscope::svc {
namespace {

std::mt19937_64& rng() {
  thread_local std::mt19937_64 g(std::random_device{}());
  return g;
}

double need_number(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number())
    throw std::invalid_argument(where + ": distribution needs a number '" + key + "'");
  const double v = j[key].get<double>();
  if (!(v >= 0) || !(v <= kMaxStageUs))
    throw std::invalid_argument(where + ": '" + key + "' is " + j[key].dump() + "; it must be in 0 … 60000000 (60 s)");
  return v;
}

// Clipped before the conversion: a double above int64's range is undefined behaviour.
int64_t clip_ns(const LatencyDistribution& d, double v) {
  using Kind = LatencyDistribution::Kind;
  double cap = d.cap_ns > 0 ? d.cap_ns : 20 * std::max(d.a_ns, d.b_ns * (d.kind == Kind::kUniform));
  // An empirical table is bounded by its own last quantile: no default cap.
  if (d.kind == Kind::kEmpirical && d.cap_ns <= 0) cap = static_cast<double>(kMaxStageNs);
  if (d.kind == Kind::kConstant || cap > static_cast<double>(kMaxStageNs)) cap = static_cast<double>(kMaxStageNs);
  return static_cast<int64_t>(std::clamp(v, 0.0, cap));
}

// The empirical quantile at probability u ∈ [0, 1]: linear between the table's
// two entries around u·(N−1).
double table_quantile(const std::vector<double>& q, double u) {
  if (q.empty()) return 0;
  const double pos = std::clamp(u, 0.0, 1.0) * static_cast<double>(q.size() - 1);
  const auto i = static_cast<size_t>(pos);
  if (i + 1 >= q.size()) return q.back();
  return q[i] + (q[i + 1] - q[i]) * (pos - static_cast<double>(i));
}

}  // namespace

int64_t LatencyDistribution::sample_ns() const {
  double v = a_ns;
  switch (kind) {
    case Kind::kConstant:
      break;
    case Kind::kUniform:
      v = std::uniform_real_distribution<double>(a_ns, b_ns)(rng());
      break;
    case Kind::kExponential:
      v = a_ns > 0 ? std::exponential_distribution<double>(1.0 / a_ns)(rng()) : 0;
      break;
    case Kind::kLognormal:
      v = a_ns > 0 ? std::lognormal_distribution<double>(std::log(a_ns), b_ns)(rng()) : 0;
      break;
    case Kind::kEmpirical:
      v = table_quantile(quantiles_ns, std::uniform_real_distribution<double>(0.0, 1.0)(rng()));
      break;
  }
  return clip_ns(*this, v);
}

int64_t LatencyDistribution::sample_ns(const RequestFactor& factor) const {
  if (!factor.known || shared <= 0 || kind == Kind::kConstant) return sample_ns();
  const double own = std::normal_distribution<double>(0.0, 1.0)(rng());
  const double z = shared * factor.z + std::sqrt(1 - shared * shared) * own;
  double v = 0;
  switch (kind) {
    case Kind::kConstant:
      v = a_ns;
      break;
    case Kind::kUniform:
      v = a_ns + (b_ns - a_ns) * normal_cdf(z);
      break;
    case Kind::kExponential:
      if (a_ns <= 0) break;  // 0 × ln(0) would be NaN
      // −mean·ln(1 − Φ(z)), with 1 − Φ(z) written Φ(−z): exact in the upper tail, where 1 − Φ(z) rounds to 0.
      v = -a_ns * std::log(normal_cdf(-z));
      break;
    case Kind::kLognormal:
      v = a_ns * std::exp(b_ns * z);
      break;
    case Kind::kEmpirical:
      v = table_quantile(quantiles_ns, normal_cdf(z));
      break;
  }
  return clip_ns(*this, v);
}

double LatencyDistribution::mean_ns() const {
  switch (kind) {
    case Kind::kConstant:
      return a_ns;
    case Kind::kUniform:
      return (a_ns + b_ns) / 2;
    case Kind::kExponential:
      return a_ns;
    case Kind::kLognormal:
      return a_ns * std::exp(b_ns * b_ns / 2);
    case Kind::kEmpirical: {
      // The mean of the piecewise-linear quantile function: each segment's midpoint, equally weighted.
      if (quantiles_ns.size() < 2) return quantiles_ns.empty() ? 0 : quantiles_ns.front();
      double sum = 0;
      for (size_t i = 0; i + 1 < quantiles_ns.size(); ++i) sum += (quantiles_ns[i] + quantiles_ns[i + 1]) / 2;
      return sum / static_cast<double>(quantiles_ns.size() - 1);
    }
  }
  return a_ns;
}

nlohmann::json LatencyDistribution::to_json() const {
  nlohmann::json j;
  switch (kind) {
    case Kind::kConstant:
      j = {{"kind", "constant"}, {"us", a_ns / 1e3}};
      break;
    case Kind::kUniform:
      j = {{"kind", "uniform"}, {"min_us", a_ns / 1e3}, {"max_us", b_ns / 1e3}};
      break;
    case Kind::kExponential:
      j = {{"kind", "exponential"}, {"mean_us", a_ns / 1e3}};
      break;
    case Kind::kLognormal:
      j = {{"kind", "lognormal"}, {"median_us", a_ns / 1e3}, {"sigma", b_ns}};
      break;
    case Kind::kEmpirical: {
      nlohmann::json q = nlohmann::json::array();
      for (const double v : quantiles_ns) q.push_back(v / 1e3);
      j = {{"kind", "empirical"}, {"quantiles_us", q}};
      break;
    }
  }
  if (cap_ns > 0 && kind == Kind::kEmpirical) j["cap_us"] = cap_ns / 1e3;
  if (shared > 0) j["shared"] = shared;
  return j;
}

LatencyDistribution parse_distribution(const nlohmann::json& j, const std::string& where) {
  LatencyDistribution d;
  if (j.is_number()) {  // shorthand: a constant in microseconds
    d.a_ns = need_number(nlohmann::json{{"us", j}}, "us", where) * 1e3;
    return d;
  }
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string())
    throw std::invalid_argument(where + ": a distribution is a number (µs) or an object with a 'kind'");
  const std::string kind = j["kind"];
  // A misspelt parameter ("median_ms") must not silently fall back to a default.
  const std::map<std::string, std::set<std::string>> keys = {{"constant", {"us"}},
                                                             {"uniform", {"min_us", "max_us"}},
                                                             {"exponential", {"mean_us"}},
                                                             {"lognormal", {"median_us", "sigma"}},
                                                             {"empirical", {"quantiles_us"}}};
  if (auto k = keys.find(kind); k != keys.end()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "kind" && it.key() != "cap_us" && it.key() != "shared" && !k->second.count(it.key()))
        throw std::invalid_argument(where + ": unknown key '" + it.key() + "' in a " + kind + " distribution");
  }
  if (kind == "constant") {
    d.a_ns = need_number(j, "us", where) * 1e3;
  } else if (kind == "uniform") {
    d.kind = LatencyDistribution::Kind::kUniform;
    d.a_ns = need_number(j, "min_us", where) * 1e3;
    d.b_ns = need_number(j, "max_us", where) * 1e3;
    if (d.b_ns < d.a_ns) throw std::invalid_argument(where + ": uniform max_us < min_us");
  } else if (kind == "exponential") {
    d.kind = LatencyDistribution::Kind::kExponential;
    d.a_ns = need_number(j, "mean_us", where) * 1e3;
  } else if (kind == "lognormal") {
    d.kind = LatencyDistribution::Kind::kLognormal;
    d.a_ns = need_number(j, "median_us", where) * 1e3;
    if (!j.contains("sigma") || !j["sigma"].is_number())
      throw std::invalid_argument(where + ": distribution needs a number 'sigma'");
    d.b_ns = j["sigma"].get<double>();
    if (!(d.b_ns >= 0) || !(d.b_ns <= 3))
      throw std::invalid_argument(where + ": lognormal 'sigma' is " + j["sigma"].dump() +
                                  "; it must be in 0 … 3 (above 3 is not a latency distribution)");
  } else if (kind == "empirical") {
    d.kind = LatencyDistribution::Kind::kEmpirical;
    if (!j.contains("quantiles_us") || !j["quantiles_us"].is_array())
      throw std::invalid_argument(where + ": an empirical distribution needs an array 'quantiles_us'");
    const auto& q = j["quantiles_us"];
    if (q.size() < 2 || q.size() > kMaxQuantiles)
      throw std::invalid_argument(where + ": 'quantiles_us' has " + std::to_string(q.size()) +
                                  " entries; it needs 2 … " + std::to_string(kMaxQuantiles) +
                                  " (quantiles at equally spaced probabilities 0 … 1)");
    d.quantiles_ns.reserve(q.size());
    for (size_t i = 0; i < q.size(); ++i) {
      const std::string at = where + ": quantiles_us[" + std::to_string(i) + "]";
      if (!q[i].is_number()) throw std::invalid_argument(at + " is " + q[i].dump() + ", not a number (µs)");
      const double us = q[i].get<double>();
      if (!(us >= 0) || !(us <= kMaxStageUs))
        throw std::invalid_argument(at + " is " + q[i].dump() + "; it must be in 0 … 60000000 (60 s)");
      const double v = us * 1e3;
      if (!d.quantiles_ns.empty() && v < d.quantiles_ns.back())
        throw std::invalid_argument(at + " is below the one before it: quantiles never decrease");
      d.quantiles_ns.push_back(v);
    }
  } else {
    throw std::invalid_argument(where + ": unknown distribution kind '" + kind +
                                "' (constant, uniform, exponential, lognormal, empirical)");
  }
  if (j.contains("cap_us")) d.cap_ns = need_number(j, "cap_us", where) * 1e3;
  if (j.contains("shared")) {
    if (!j["shared"].is_number() || !(j["shared"].get<double>() >= 0) || !(j["shared"].get<double>() <= kMaxShared))
      throw std::invalid_argument(where + ": 'shared' is " + j["shared"].dump() +
                                  "; it must be a number in 0 … 0.95 (the stage's loading on the request's common "
                                  "factor; 0 = an independent draw)");
    d.shared = j["shared"].get<double>();
  }
  return d;
}

void burn_cpu_ns(int64_t ns, const std::atomic<bool>& stop) {
  if (ns <= 0) return;
  const int64_t budget_ns = std::min(ns, kMaxStageNs);
  const int64_t cpu_start = thread_cpu_ns();
  // A thread starved of a core for longer than any stage may last stops anyway.
  const int64_t wall_end = monotonic_ns() + kMaxStageNs;
  volatile uint64_t sink = 0;
  // Spin what is left of the budget on the cheap wall clock (vDSO), then ask the
  // thread's CPU clock (a system call) how much of that time the thread really
  // ran: unpreempted, once; preempted, again for the time it lost. So a burn
  // costs one or two system calls, not one per loop turn.
  for (int64_t left_ns = budget_ns; left_ns > 0 && !stop.load(std::memory_order_relaxed);
       left_ns = budget_ns - (thread_cpu_ns() - cpu_start)) {
    const int64_t until = std::min(monotonic_ns() + left_ns, wall_end);
    while (monotonic_ns() < until && !stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 64; ++i) sink = sink * 6364136223846793005ULL + 1442695040888963407ULL;
    }
    if (until == wall_end) break;
  }
}

}  // namespace tailscope::svc
