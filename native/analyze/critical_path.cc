#include "analyze/critical_path.h"

#include <algorithm>

namespace tailscope::analyze {

std::unique_ptr<CriticalPathAlgorithm> make_critical_path_algorithm(std::string_view name) {
  if (name == "capstone") return make_capstone_algorithm();
  if (name == "jaeger") return make_jaeger_algorithm();
  if (name == "crisp") return make_crisp_algorithm();
  return nullptr;
}

namespace internal {

void finish_from_sections(const SpanTree& tree, CriticalPath& path, std::vector<std::int64_t>& exclusive_ns,
                          std::vector<std::uint8_t>& on_path) {
  std::sort(path.sections.begin(), path.sections.end(),
            [](const CriticalPathSection& a, const CriticalPathSection& b) { return a.start_ns < b.start_ns; });
  const std::size_t n = tree.size();
  exclusive_ns.assign(n, 0);
  on_path.assign(n, 0);
  for (const CriticalPathSection& s : path.sections) {
    exclusive_ns[s.span] += s.end_ns - s.start_ns;
    // Mark the span and its ancestors; stop at the first already marked.
    for (std::uint32_t at = s.span; at != kNoSpan && !on_path[at]; at = tree.parent(at)) on_path[at] = 1;
  }
  on_path[tree.root()] = 1;
  path.spans.clear();
  for (std::uint32_t s : tree.preorder()) {
    if (on_path[s]) path.spans.push_back(SpanOnPath{s, exclusive_ns[s]});
  }
}

}  // namespace internal
}  // namespace tailscope::analyze
