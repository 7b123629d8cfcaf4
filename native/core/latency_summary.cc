#include "core/latency_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tailscope {

const std::vector<std::pair<std::string, double>>& reported_percentiles() {
  static const std::vector<std::pair<std::string, double>> kPercentiles = {
      {"50", 50.0}, {"90", 90.0}, {"99", 99.0}, {"99.9", 99.9}, {"99.99", 99.99}};
  return kPercentiles;
}

nlohmann::json latency_summary(const HdrHistogram& h) {
  const int64_t count = h.total_count();
  nlohmann::json out = {{"unit", "ns"}, {"count", count}, {"out_of_range", h.out_of_range_count()}};
  if (count == 0) {
    out["unavailable"] = "no samples recorded";
    return out;
  }
  out["min"] = h.min();
  out["mean"] = h.mean();
  out["stddev"] = h.stddev();
  out["max"] = h.max();
  nlohmann::json pct = nlohmann::json::object(), tail = nlohmann::json::object();
  nlohmann::json low = nlohmann::json::array();
  for (const auto& [key, p] : reported_percentiles()) {
    pct[key] = h.value_at_percentile(p);
    const double beyond = static_cast<double>(count) * (100.0 - p) / 100.0;
    tail[key] = beyond;
    if (beyond < kMinTailSamples) low.push_back(key);
  }
  out["percentiles"] = pct;
  out["tail_samples"] = tail;
  out["low_confidence"] = low;
  nlohmann::json ci = nlohmann::json::object(), ci_unavailable = nlohmann::json::object();
  for (const auto& [key, p] : reported_percentiles()) {
    const PercentileInterval interval = percentile_interval(h, p);
    if (interval.unavailable.empty())
      ci[key] = {interval.lo, interval.hi};
    else
      ci_unavailable[key] = interval.unavailable;
  }
  out["percentile_ci"] = ci;
  out["percentile_ci_level"] = kIntervalLevel;
  out["percentile_ci_unavailable"] = ci_unavailable;
  return out;
}

std::optional<OrderStatisticRanks> order_statistic_ranks(int64_t n, double q, double level) {
  if (n < 1 || !(q > 0.0 && q < 1.0) || !(level > 0.0 && level < 1.0)) return std::nullopt;
  const long double tail = (1.0L - level) / 2.0L;
  const long double nd = static_cast<long double>(n), ql = q, odds = ql / (1.0L - ql);
  // Beyond 12 standard deviations of the mean (+30 for the Poisson-like tail of an extreme q
  // at small n) the binomial mass is below 1e-30: summing only this window gives the CDF far
  // more precisely than the 2.5 % it is compared with, in O(sqrt(n)) steps instead of O(n).
  const long double mean = nd * ql, sd = std::sqrt(nd * ql * (1.0L - ql));
  const int64_t k_first = std::max<int64_t>(0, static_cast<int64_t>(std::floor(mean - 12.0L * sd - 30.0L)));
  const int64_t k_last = std::min<int64_t>(n, static_cast<int64_t>(std::ceil(mean + 12.0L * sd + 30.0L)));
  const long double kf = static_cast<long double>(k_first);
  // The first term from log-gamma (long double: lgamma(1e12) ~ 3e13 keeps ~6 digits of the
  // difference), the rest by the ratio pmf(k+1)/pmf(k) = (n-k)/(k+1) * q/(1-q).
  long double pmf = std::exp(std::lgamma(nd + 1.0L) - std::lgamma(kf + 1.0L) - std::lgamma(nd - kf + 1.0L) +
                             kf * std::log(ql) + (nd - kf) * std::log1p(-ql));
  long double cdf_below = 0.0L;  // P(B <= k-1)
  int64_t lower = 0;
  long double cdf_below_lower = 0.0L;
  for (int64_t k = k_first; k <= k_last; ++k) {
    if (k >= 1 && cdf_below <= tail) {  // P(B < k) <= tail still holds: k may be the lower rank
      lower = k;
      cdf_below_lower = cdf_below;
    }
    if (k >= 1 && 1.0L - cdf_below <= tail) {  // the first k with P(B >= k) <= tail: the upper rank
      if (lower == 0) return std::nullopt;
      return OrderStatisticRanks{lower, k, static_cast<double>(cdf_below - cdf_below_lower)};
    }
    cdf_below += pmf;
    pmf *= (nd - static_cast<long double>(k)) / static_cast<long double>(k + 1) * odds;
  }
  return std::nullopt;  // P(B >= n) = q^n > tail: no rank <= n bounds the quantile from above
}

int64_t min_samples_for_interval(double q, double level) {
  if (!(q > 0.0 && q < 1.0) || !(level > 0.0 && level < 1.0)) return 0;
  const double tail = (1.0 - level) / 2.0, m = std::max(q, 1.0 - q);
  auto n = static_cast<int64_t>(std::ceil(std::log(tail) / std::log(m)));
  // The logarithms can land one off at an exact power: settle on the definition.
  while (n > 1 && std::pow(m, static_cast<double>(n - 1)) <= tail) --n;
  while (std::pow(m, static_cast<double>(n)) > tail) ++n;
  return n;
}

PercentileInterval percentile_interval(const HdrHistogram& h, double percentile, double level) {
  PercentileInterval out;
  const int64_t n = h.total_count();
  const double q = percentile / 100.0;
  if (n == 0) {
    out.unavailable = "no samples recorded";
    return out;
  }
  if (!(q > 0.0 && q < 1.0) || !(level > 0.0 && level < 1.0)) {
    out.unavailable = "percentile outside (0, 100) or level outside (0, 1)";
    return out;
  }
  out.ranks = order_statistic_ranks(n, q, level);
  if (!out.ranks) {
    out.unavailable = "fewer than " + std::to_string(min_samples_for_interval(q, level)) + " samples";
    return out;
  }
  // Widen to the buckets' bounds: the true order statistics lie inside them.
  out.lo = h.lowest_equivalent_value(h.value_at_rank(out.ranks->lower_rank));
  out.hi = h.highest_equivalent_value(h.value_at_rank(out.ranks->upper_rank));
  return out;
}

std::string percentile_interval_text(const nlohmann::json& summary, const std::vector<std::string>& keys,
                                     double value_unit_scale, const std::string& unit) {
  std::string out;
  const auto scaled = [&](const nlohmann::json& v) { return v.get<double>() / value_unit_scale; };
  for (const std::string& key : keys) {
    const nlohmann::json& pct = summary.value("percentiles", nlohmann::json::object());
    if (!pct.contains(key)) continue;
    char line[256];
    std::snprintf(line, sizeof line, "  p%-6s %12.3f %s  ", key.c_str(), scaled(pct[key]), unit.c_str());
    out += line;
    const nlohmann::json& ci = summary.value("percentile_ci", nlohmann::json::object());
    const nlohmann::json& missing = summary.value("percentile_ci_unavailable", nlohmann::json::object());
    const int level_pct = static_cast<int>(std::lround(summary.value("percentile_ci_level", kIntervalLevel) * 100));
    if (ci.contains(key)) {
      std::snprintf(line, sizeof line, "%d %% CI [%.3f – %.3f] %s", level_pct, scaled(ci[key][0]), scaled(ci[key][1]),
                    unit.c_str());
      out += line;
    } else {
      out += std::to_string(level_pct) + " % CI unavailable: " +
             (missing.contains(key) ? missing[key].get<std::string>() : std::string("not computed"));
    }
    const nlohmann::json& tail = summary.value("tail_samples", nlohmann::json::object());
    if (tail.contains(key)) {
      const double beyond = tail[key].get<double>();
      std::snprintf(line, sizeof line, "  %.1f samples beyond", beyond);
      out += line;
      if (beyond < kMinTailSamples) out += ": low confidence (fewer than 10)";
    }
    out += "\n";
  }
  return out;
}

}  // namespace tailscope

namespace tailscope {
nlohmann::json latency_cdf(const HdrHistogram& histogram, int ticks_per_half_distance) {
  nlohmann::json points = nlohmann::json::array();
  if (histogram.total_count() == 0) return points;
  for (const PercentileStep& step : histogram.percentiles(ticks_per_half_distance))
    points.push_back({step.value, step.percentile});
  return points;
}
}  // namespace tailscope
