// One interface, three critical-path models (one file each, side by side):
//
//   capstone.cc  the capstone study's model: children in start order; two
//                children are mutually exclusive (both on the path), one
//                contains the other (the longer only) or overlap partially
//                (both, the earlier one until the later one starts).
//   jaeger.cc    Jaeger UI's: walk back from the root's end, always into the
//                last-finishing child that ended before the current point.
//   crisp.cc     CRISP's (Uber, ATC'22): whole spans; children by end time;
//                a sibling that overlaps by < 1 % of the parent is "before".
//
// Each produces sections that tile the root span exactly (no gaps, no
// overlap, each inside its span) and the exclusive critical-path time of every
// span on the path. docs/critical-path.md explains where they disagree.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "analyze/span_tree.h"

namespace tailscope::analyze {

// [start_ns, end_ns) of the critical path spent in `span` itself.
struct CriticalPathSection {
  std::uint32_t span;
  std::int64_t start_ns;
  std::int64_t end_ns;
};

struct SpanOnPath {
  std::uint32_t span;
  // Time the path spends in the span itself. For capstone and jaeger: the sum
  // of its sections. For crisp: CRISP's figure (duration minus critical-path
  // children's durations, at least 0), which can differ from the sections when
  // children overlap within CRISP's 1 % allowance.
  std::int64_t exclusive_ns;
};

struct CriticalPath {
  std::vector<CriticalPathSection> sections;  // in time order
  std::vector<SpanOnPath> spans;              // root first, parents before children
  void clear() {
    sections.clear();
    spans.clear();
  }
};

class CriticalPathAlgorithm {
 public:
  virtual ~CriticalPathAlgorithm() = default;
  virtual std::string_view name() const = 0;
  // `tree` must have a root. Not const: algorithms keep scratch buffers.
  virtual void compute(const SpanTree& tree, CriticalPath& out) = 0;
};

std::unique_ptr<CriticalPathAlgorithm> make_capstone_algorithm();
std::unique_ptr<CriticalPathAlgorithm> make_jaeger_algorithm();
std::unique_ptr<CriticalPathAlgorithm> make_crisp_algorithm();
// "capstone", "jaeger" or "crisp"; nullptr for anything else.
std::unique_ptr<CriticalPathAlgorithm> make_critical_path_algorithm(std::string_view name);

namespace internal {
// std::stable_sort, without its temporary buffer (a heap allocation on every
// call, even for one element) when the range is already in order: the common
// case for children, which the span tree keeps in start order. Same result.
template <typename It, typename Less>
void stable_sort_unless_sorted(It first, It last, Less less) {
  if (last - first < 2 || std::is_sorted(first, last, less)) return;
  std::stable_sort(first, last, less);
}

// Shared by the algorithms: sorts `path.sections` by time and fills
// `path.spans` with every span that has a section plus its ancestors (an
// ancestor fully covered by its children is on the path with 0 ns), exclusive
// time = sum of the span's sections.
void finish_from_sections(const SpanTree& tree, CriticalPath& path, std::vector<std::int64_t>& scratch_ns,
                          std::vector<std::uint8_t>& scratch_mark);
}  // namespace internal

}  // namespace tailscope::analyze
