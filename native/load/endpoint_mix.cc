#include "load/endpoint_mix.h"

#include <cmath>
#include <fstream>
#include <set>
#include <stdexcept>

#include "core/latency_summary.h"
#include "load/config.h"
#include "net/http.h"

namespace tailscope::load {
namespace {

void check_path(std::string_view where, std::string_view path) {
  if (path.empty() || path[0] != '/')
    throw std::invalid_argument(std::string(where) + ": the path must start with '/'");
  if (path.size() > kMaxMixPathBytes)
    throw std::invalid_argument(std::string(where) + ": the path is longer than " + std::to_string(kMaxMixPathBytes) +
                                " bytes");
  for (const char c : path) {
    // Printable ASCII without ',' : the path goes on the request line and into an .hlog tag.
    if (c <= ' ' || c > '~' || c == ',')
      throw std::invalid_argument(std::string(where) +
                                  ": the path may hold only printable ASCII without spaces or ','");
  }
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace

EndpointMix EndpointMix::parse(std::string_view option, const std::vector<std::string>& specs) {
  if (specs.empty()) throw std::invalid_argument(std::string(option) + ": at least one PATH=WEIGHT is needed");
  if (specs.size() > kMaxMixEndpoints)
    throw std::invalid_argument(std::string(option) + ": " + std::to_string(specs.size()) + " endpoints, at most " +
                                std::to_string(kMaxMixEndpoints));
  EndpointMix mix;
  std::set<std::string> seen;
  for (const std::string& spec : specs) {
    const std::string where = std::string(option) + " '" + spec + "'";
    const size_t eq = spec.rfind('=');
    if (eq == std::string::npos) throw std::invalid_argument(where + ": expected PATH=WEIGHT");
    MixEndpoint e{spec.substr(0, eq), 0};
    check_path(where, e.path);
    e.weight = parse_number_in(where + ": weight", spec.substr(eq + 1), 0, kMaxMixWeight);
    if (!(e.weight > 0)) throw std::invalid_argument(where + ": the weight must be > 0");
    if (!seen.insert(e.path).second) throw std::invalid_argument(where + ": the path appears twice");
    mix.total_weight_ += e.weight;
    mix.cumulative_.push_back(mix.total_weight_);
    mix.endpoints_.push_back(std::move(e));
  }
  return mix;
}

std::vector<std::string> EndpointMix::read_specs_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--mix-file " + path + ": cannot open");
  std::vector<std::string> specs;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t hash = line.find('#');
    std::string text = trim(std::string_view(line).substr(0, hash));
    if (text.empty()) continue;
    // "PATH WEIGHT" is read as PATH=WEIGHT.
    const size_t space = text.find_first_of(" \t");
    if (space != std::string::npos) {
      const std::string rest = trim(std::string_view(text).substr(space));
      if (rest.find_first_of(" \t") != std::string::npos)
        throw std::invalid_argument("--mix-file " + path + ":" + std::to_string(number) +
                                    ": expected PATH=WEIGHT or PATH WEIGHT");
      text = text.substr(0, space) + "=" + rest;
    }
    specs.push_back(text);
    if (specs.size() > kMaxMixEndpoints)
      throw std::invalid_argument("--mix-file " + path + ":" + std::to_string(number) + ": more than " +
                                  std::to_string(kMaxMixEndpoints) + " endpoints");
  }
  if (specs.empty()) throw std::invalid_argument("--mix-file " + path + ": no PATH=WEIGHT line");
  return specs;
}

void EndpointLatencies::merge(const EndpointLatencies& other) {
  intended.merge(other.intended);
  actual.merge(other.actual);
  sent_in_window += other.sent_in_window;
  completed_in_window += other.completed_in_window;
  if (intervals.size() < other.intervals.size()) intervals.resize(other.intervals.size());
  for (size_t k = 0; k < other.intervals.size(); ++k) {
    if (!other.intervals[k]) continue;
    if (!intervals[k]) intervals[k] = std::make_unique<Interval>();
    intervals[k]->intended.merge(other.intervals[k]->intended);
    intervals[k]->actual.merge(other.intervals[k]->actual);
  }
}

uint64_t EndpointMixRecorder::worker_seed(uint64_t seed, int worker) {
  // Apart from the pacing RNG's stream (seed × 1000003 + worker), so adding
  // a mix does not change the arrival times of a run with the same seed.
  return (seed ^ 0x6d69785f73656564ull) * 1'000'033 + static_cast<uint64_t>(worker);
}

EndpointMixRecorder::EndpointMixRecorder(const EndpointMix& mix, std::string_view host, uint64_t seed, int worker,
                                         std::vector<EndpointLatencies>& latencies)
    : mix_(mix), rng_(worker_seed(seed, worker)), latencies_(latencies) {
  for (const MixEndpoint& e : mix.endpoints()) requests_.push_back(net::http_get_request(host, e.path));
  latencies_.clear();
  latencies_.resize(mix.size());
}

uint32_t EndpointMixRecorder::append_request(std::string& out) {
  const uint32_t endpoint = mix_.pick(rng_);
  out += requests_[endpoint];
  return endpoint;
}

void EndpointMixRecorder::on_response(uint32_t endpoint, int64_t intended_latency_ns, int64_t actual_latency_ns,
                                      int64_t interval) {
  EndpointLatencies& l = latencies_[endpoint];
  l.intended.record(intended_latency_ns);
  l.actual.record(actual_latency_ns);
  ++l.completed_in_window;
  if (interval < 0 || interval > 100'000) return;
  if (static_cast<int64_t>(l.intervals.size()) <= interval) l.intervals.resize(static_cast<size_t>(interval) + 1);
  auto& slot = l.intervals[static_cast<size_t>(interval)];
  if (!slot) slot = std::make_unique<EndpointLatencies::Interval>();
  slot->intended.record(intended_latency_ns);
  slot->actual.record(actual_latency_ns);
}

void merge_endpoint_latencies(std::vector<EndpointLatencies>& into, const std::vector<EndpointLatencies>& from) {
  if (into.size() < from.size()) into.resize(from.size());
  for (size_t i = 0; i < from.size(); ++i) into[i].merge(from[i]);
}

std::string endpoint_hlog_tag(std::string_view kind, const MixEndpoint& endpoint) {
  return std::string(kind) + "@" + endpoint.path;
}

nlohmann::json endpoints_document(const EndpointMix& mix, const std::vector<EndpointLatencies>& merged,
                                  double measured_s, uint64_t seed, int workers) {
  int64_t sent_total = 0;
  for (const EndpointLatencies& l : merged) sent_total += l.sent_in_window;
  nlohmann::json seeds = nlohmann::json::array();
  for (int w = 0; w < workers; ++w) seeds.push_back(EndpointMixRecorder::worker_seed(seed, w));
  nlohmann::json out = {{"rng",
                         "mt19937_64 per load thread, one uniform draw per request against the cumulative "
                         "weights"},
                        {"seed", seed},
                        {"worker_seeds", seeds},
                        {"endpoints", nlohmann::json::array()}};
  for (size_t i = 0; i < mix.size(); ++i) {
    const MixEndpoint& e = mix.endpoints()[i];
    static const EndpointLatencies kEmpty;
    const EndpointLatencies& l = i < merged.size() ? merged[i] : kEmpty;
    nlohmann::json row = {
        {"path", e.path},
        {"weight", e.weight},
        {"share_intended", mix.share(i)},
        {"requests_sent", l.sent_in_window},
        {"requests_completed", l.completed_in_window},
        {"share_sent", sent_total > 0
                           ? nlohmann::json(static_cast<double>(l.sent_in_window) / static_cast<double>(sent_total))
                           : nlohmann::json(nullptr)},
        {"achieved_per_s", measured_s > 0 ? static_cast<double>(l.completed_in_window) / measured_s : 0.0},
        {"hlog_tags", {endpoint_hlog_tag("latency_intended", e), endpoint_hlog_tag("latency_actual", e)}},
    };
    if (sent_total == 0) row["share_sent_unavailable"] = "no request was sent in the measured window";
    if (l.intended.total_count() == 0) {
      row["latency_intended"] = nullptr;
      row["latency_actual"] = nullptr;
      row["unavailable"] = "no request to this endpoint completed in the measured window";
    } else {
      row["latency_intended"] = {{"latency", latency_summary(l.intended)}, {"cdf", latency_cdf(l.intended)}};
      row["latency_actual"] = {{"latency", latency_summary(l.actual)}, {"cdf", latency_cdf(l.actual)}};
    }
    out["endpoints"].push_back(std::move(row));
  }
  return out;
}

}  // namespace tailscope::load
