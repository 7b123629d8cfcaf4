#include "core/latency_summary.h"

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
