// Turning a histogram into the numbers a result document reports.
//
// Every percentile carries how many samples lie beyond it, and is marked
// low-confidence when fewer than kMinTailSamples do: a p99.9 from 500 samples
// is one sample's worth of tail, and the report says so instead of hiding it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/hdr_histogram.h"

namespace tailscope {

inline constexpr double kMinTailSamples = 10.0;

// {"unit":"ns","count":N,"min":..,"mean":..,"stddev":..,"max":..,
//  "percentiles":{"50":..,"90":..,"99":..,"99.9":..,"99.99":..},
//  "tail_samples":{"99.9": 1.2, ...}, "low_confidence":["99.9","99.99"],
//  "out_of_range": n}
nlohmann::json latency_summary(const HdrHistogram& histogram);

// The percentile keys used everywhere (report, store): "50","90","99","99.9","99.99".
const std::vector<std::pair<std::string, double>>& reported_percentiles();

}  // namespace tailscope

namespace tailscope {
// The percentile spectrum as [[value_ns, percentile], ...] (HdrHistogram
// percentile iteration, ~10 points per halving of the tail): what the
// report's latency CDFs are drawn from.
nlohmann::json latency_cdf(const HdrHistogram& histogram, int ticks_per_half_distance = 5);
}  // namespace tailscope
