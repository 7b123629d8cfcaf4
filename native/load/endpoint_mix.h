// A weighted mix of HTTP endpoints (--mix PATH=WEIGHT): which request each
// send carries, and one latency histogram per endpoint beside the total.
//
// DeathStarBench's workloads are mixes (hotel reservation: search 60 %,
// recommend 39 %, login 0.5 %, reserve 0.5 %); a single-path load cannot
// show that a rare endpoint has its own tail. Each send picks its endpoint
// independently by weight from the worker's own RNG (seeded from --seed and
// the worker index, so a run is reproducible and workers never share
// state), so the proportions are binomial around the weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/hdr_histogram.h"

namespace tailscope::load {

struct MixEndpoint {
  std::string path;
  double weight = 0;
};

inline constexpr size_t kMaxMixEndpoints = 64;
inline constexpr double kMaxMixWeight = 1e6;
inline constexpr size_t kMaxMixPathBytes = 1024;

class EndpointMix {
 public:
  EndpointMix() = default;
  // Each spec is "PATH=WEIGHT" (the last '=' splits, so a query string may
  // hold '='). Throws std::invalid_argument naming the option and the spec:
  // a path must start with '/', be printable ASCII without ',' or spaces (it
  // becomes an .hlog tag), at most kMaxMixPathBytes, and appear once; a
  // weight is a number in (0, kMaxMixWeight]; 1 … kMaxMixEndpoints specs.
  static EndpointMix parse(std::string_view option, const std::vector<std::string>& specs);
  // A mix file: one PATH=WEIGHT (or "PATH WEIGHT") per line; '#' starts a
  // comment; blank lines are skipped. Errors name the file and the line.
  static std::vector<std::string> read_specs_file(const std::string& path);

  bool empty() const { return endpoints_.empty(); }
  size_t size() const { return endpoints_.size(); }
  const std::vector<MixEndpoint>& endpoints() const { return endpoints_; }
  // The weight's share of the total weight (the intended proportion).
  double share(size_t endpoint) const { return endpoints_[endpoint].weight / total_weight_; }

  // The endpoint of the next request: one uniform draw against the
  // cumulative weights (a handful of endpoints: a binary search is cheap).
  template <class Rng>
  uint32_t pick(Rng& rng) const {
    const double u = std::uniform_real_distribution<double>(0.0, total_weight_)(rng);
    size_t lo = 0, hi = cumulative_.size() - 1;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (u < cumulative_[mid])
        hi = mid;
      else
        lo = mid + 1;
    }
    return static_cast<uint32_t>(lo);
  }

 private:
  std::vector<MixEndpoint> endpoints_;
  std::vector<double> cumulative_;
  double total_weight_ = 0;
};

// What one endpoint measured (in a worker, then merged).
struct EndpointLatencies {
  HdrHistogram intended = HdrHistogram::for_latency_ns();
  HdrHistogram actual = HdrHistogram::for_latency_ns();
  int64_t sent_in_window = 0;
  int64_t completed_in_window = 0;
  struct Interval {
    HdrHistogram intended = HdrHistogram::for_latency_ns();
    HdrHistogram actual = HdrHistogram::for_latency_ns();
  };
  std::vector<std::unique_ptr<Interval>> intervals;  // --hlog only
  void merge(const EndpointLatencies& other);
};

// The per-worker side: picks each request's endpoint with the worker's own
// RNG, appends its prebuilt HTTP request, records its latencies.
class EndpointMixRecorder {
 public:
  // seed: --seed; worker: the worker's index (each worker its own stream);
  // latencies: where this worker's per-endpoint figures go (resized to the mix).
  EndpointMixRecorder(const EndpointMix& mix, std::string_view host, uint64_t seed, int worker,
                      std::vector<EndpointLatencies>& latencies);
  // Appends the chosen endpoint's request to out; returns the endpoint.
  uint32_t append_request(std::string& out);
  // Picks the next request's endpoint by weight (its bytes: append_endpoint).
  uint32_t pick() { return mix_.pick(rng_); }
  // Appends `endpoint`'s request again (a request resent on a new connection).
  void append_endpoint(uint32_t endpoint, std::string& out) const { out += requests_[endpoint]; }
  // A request of `endpoint` intended in the window was sent.
  void on_sent(uint32_t endpoint) { ++latencies_[endpoint].sent_in_window; }
  // A correct response to a request of `endpoint` intended in the window;
  // interval < 0: not recorded per interval.
  void on_response(uint32_t endpoint, int64_t intended_latency_ns, int64_t actual_latency_ns, int64_t interval);

  // The RNG seed of worker `worker` (recorded in the result document).
  static uint64_t worker_seed(uint64_t seed, int worker);

 private:
  const EndpointMix& mix_;
  std::vector<std::string> requests_;
  std::mt19937_64 rng_;
  std::vector<EndpointLatencies>& latencies_;
};

// Merges each worker's per-endpoint figures into `into` (resized as needed).
void merge_endpoint_latencies(std::vector<EndpointLatencies>& into, const std::vector<EndpointLatencies>& from);

// The result document's `endpoints` section: per endpoint its weight, the
// intended and achieved shares, counts and the latency summary + CDF of
// latency_intended and latency_actual (`unavailable` with the reason when no
// request of it completed); `mix` in the config records the seed rule.
nlohmann::json endpoints_document(const EndpointMix& mix, const std::vector<EndpointLatencies>& merged,
                                  double measured_s, uint64_t seed, int workers);

// The .hlog tag of an endpoint's histogram: "<kind>@<path>", e.g.
// latency_intended@/hotels (paths were checked to be valid tags).
std::string endpoint_hlog_tag(std::string_view kind, const MixEndpoint& endpoint);

}  // namespace tailscope::load
