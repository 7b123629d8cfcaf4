#include "svc/stores/social_graph.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>

#include "svc/topology.h"

namespace tailscope::svc::stores {
namespace {

constexpr std::string_view kFollowersPrefix = "followers:";

}  // namespace

std::vector<std::pair<int, int>> generate_social_graph(int nodes, int edges, uint64_t seed) {
  // Chung–Lu: node i's expected degree ∝ (i + 1)^(−1/(γ−1)) with γ = 2.5 (a power
  // law, as Facebook friendship graphs have); endpoints drawn by weight until
  // `edges` distinct undirected edges exist. Uses only the engine's raw bits, so
  // the graph is the same on every standard library.
  std::vector<double> cdf(nodes);
  double total = 0;
  for (int i = 0; i < nodes; ++i) cdf[i] = total += std::pow(i + 1.0, -1.0 / 1.5);
  std::mt19937_64 g(seed);
  auto draw = [&] {
    const double u = static_cast<double>(g() >> 11) * 0x1.0p-53 * total;
    return static_cast<int>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
  };
  const int64_t max_edges = static_cast<int64_t>(nodes) * (nodes - 1) / 2;
  if (edges > max_edges) throw std::invalid_argument("more edges than node pairs");
  std::set<std::pair<int, int>> seen;
  std::vector<std::pair<int, int>> out;
  while (static_cast<int>(out.size()) < edges) {
    int a = std::min(draw(), nodes - 1), b = std::min(draw(), nodes - 1);
    if (a == b) continue;
    if (a > b) std::swap(a, b);
    if (seen.insert({a, b}).second) out.emplace_back(a, b);
  }
  return out;
}

const std::vector<std::vector<int64_t>>& social_graph_followers() {
  static const std::vector<std::vector<int64_t>> followers = [] {
    std::vector<std::vector<int64_t>> adjacency(kStoreUsers);
    for (auto [a, b] : generate_social_graph(kStoreUsers, kSocialGraphEdges, kSocialGraphSeed)) {
      adjacency[static_cast<size_t>(a)].push_back(b);
      adjacency[static_cast<size_t>(b)].push_back(a);
    }
    return adjacency;
  }();
  return followers;
}

std::string encode_followers(const std::vector<int64_t>& ids) {
  std::string out(kFollowersPrefix);
  out.reserve(kFollowersPrefix.size() + ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out.push_back(',');
    out += std::to_string(ids[i]);
  }
  return out;
}

std::optional<std::vector<int64_t>> decode_followers(std::string_view payload) {
  if (payload.substr(0, kFollowersPrefix.size()) != kFollowersPrefix) return std::nullopt;
  payload.remove_prefix(kFollowersPrefix.size());
  std::vector<int64_t> ids;
  while (!payload.empty()) {
    int64_t id = 0;
    const auto [end, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), id);
    if (ec != std::errc() || id < 0) return std::nullopt;
    ids.push_back(id);
    payload.remove_prefix(static_cast<size_t>(end - payload.data()));
    if (payload.empty()) break;
    if (payload.front() != ',' || payload.size() == 1) return std::nullopt;
    payload.remove_prefix(1);
  }
  return ids;
}

}  // namespace tailscope::svc::stores
