// The social graph DeathStarBench's scripts load (socfb-Reed98: 962 users,
// 18 812 friendships), generated with its size and a heavy-tailed degree
// distribution because the dataset file is not shipped (docs/stores.md,
// "Preload and id draws"). One definition for everyone who needs it: the
// document store's preload writes it, and a home-timeline fan-out in simulated
// store mode (or without a follower list to hand) takes its follower count
// and ids from it — the same graph, so the simulated form fans out as the real one.
//
// Also the follower list on the wire: a get_followers answer
// (`response: followers`) carries the ids the social-graph service read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tailscope::svc::stores {

// The generated social graph: undirected edges (a < b), deterministic for a seed.
std::vector<std::pair<int, int>> generate_social_graph(int nodes, int edges, uint64_t seed);
inline constexpr int kSocialGraphEdges = 18812;  // socfb-Reed98
inline constexpr uint64_t kSocialGraphSeed = 27;

// The preloaded graph's followers of each user 0 … kStoreUsers−1 (friendship
// is mutual: followers = followees), in the order the preload writes them.
// Built once per process, on first use (a few milliseconds).
const std::vector<std::vector<int64_t>>& social_graph_followers();

// A follower list as a response payload: "followers:" and the ids in decimal,
// comma-separated ("followers:" alone for none).
std::string encode_followers(const std::vector<int64_t>& ids);
// The ids of a payload encode_followers wrote; nullopt for anything else (a
// callee that answered filler — its stores simulated — or a malformed list).
std::optional<std::vector<int64_t>> decode_followers(std::string_view payload);

}  // namespace tailscope::svc::stores
