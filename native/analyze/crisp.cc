// CRISP's critical path (Uber, USENIX ATC 2022), reproduced for its
// exclusive time per "[service] operation":
//
//   parent |=====================================|
//   A         |--------|
//   B                 |---------|      B overlaps A by < 1 % of the parent and
//   C                               |--------|   nothing else happens there:
//   path: parent, C, B, A              A "happens before" B
//
// Children are sorted by end time, latest first. The last-returning child is
// on the path; walking back, a child joins the path when it happens before the
// last one added: it ended before that one started, or it started earlier and
// overlaps it by less than 1 % of the parent's duration with no other child
// event inside the overlap (allowance for clock skew). Whole spans are on the
// path; a span's exclusive time is its duration minus its critical-path
// children's durations (at least 0). Only CHILD_OF children count; children
// are clipped into their parents, and dropped when outside or overflowing both
// ends (CRISP's sanitizing).
//
// Sections: CRISP has none, so each path span's interval, clipped to its
// parent's window and to the end of its previous path sibling, becomes its
// window; the parts not covered by path children are the span's sections.
#include <algorithm>

#include "analyze/clipped_tree.h"
#include "analyze/critical_path.h"

namespace tailscope::analyze {
namespace {

constexpr double kOverlapAllowanceFraction = 0.01;

class CrispAlgorithm final : public CriticalPathAlgorithm {
 public:
  std::string_view name() const override { return "crisp"; }

  void compute(const SpanTree& tree, CriticalPath& out) override {
    out.clear();
    clipped_.build_crisp(tree);
    const std::size_t n = tree.size();
    on_path_.assign(n, 0);
    path_children_ns_.assign(n, 0);
    const std::uint32_t root = tree.root();
    on_path_[root] = 1;
    stack_.clear();
    stack_.push_back(root);
    while (!stack_.empty()) {
      const std::uint32_t node = stack_.back();
      stack_.pop_back();
      choose_path_children(node);
    }
    out.spans.clear();
    for (std::uint32_t s : tree.preorder()) {
      if (!on_path_[s]) continue;
      out.spans.push_back(SpanOnPath{s, std::max<std::int64_t>(0, clipped_.duration(s) - path_children_ns_[s])});
    }
    build_sections(tree, out);
  }

 private:
  void choose_path_children(std::uint32_t node) {
    const auto kids = clipped_.children(node);
    if (kids.empty()) return;
    by_end_.assign(kids.begin(), kids.end());
    // Python's sorted(key=endTime)[::-1]: latest end first, and among equal
    // ends the later child in input order first.
    std::sort(by_end_.begin(), by_end_.end(), [&](std::uint32_t a, std::uint32_t b) {
      return clipped_.end(a) != clipped_.end(b) ? clipped_.end(a) > clipped_.end(b) : a > b;
    });
    starts_.clear();
    ends_.clear();
    for (std::uint32_t c : by_end_) {
      starts_.push_back(clipped_.start(c));
      ends_.push_back(clipped_.end(c));
    }
    std::sort(starts_.begin(), starts_.end());
    std::sort(ends_.begin(), ends_.end());
    std::uint32_t last = by_end_[0];
    add_to_path(node, last);
    for (std::size_t i = 1; i < by_end_.size(); ++i) {
      if (happens_before(node, by_end_[i], last)) {
        last = by_end_[i];
        add_to_path(node, last);
      }
    }
  }

  void add_to_path(std::uint32_t parent, std::uint32_t child) {
    on_path_[child] = 1;
    path_children_ns_[parent] += clipped_.duration(child);
    stack_.push_back(child);
  }

  static std::ptrdiff_t count_in_range(const std::vector<std::int64_t>& sorted, std::int64_t lo, std::int64_t hi) {
    return std::upper_bound(sorted.begin(), sorted.end(), hi) - std::lower_bound(sorted.begin(), sorted.end(), lo);
  }

  bool happens_before(std::uint32_t parent, std::uint32_t before, std::uint32_t later) const {
    if (clipped_.end(before) < clipped_.start(later)) return true;
    const std::int64_t parent_ns = clipped_.duration(parent);
    if (parent_ns <= 0) return false;
    if (clipped_.end(before) < clipped_.end(later) && clipped_.start(before) < clipped_.start(later) &&
        static_cast<double>(clipped_.end(before) - clipped_.start(later)) / static_cast<double>(parent_ns) <
            kOverlapAllowanceFraction) {
      // Exactly two events (later's start, before's end) in the overlap.
      const std::int64_t lo = clipped_.start(later);
      const std::int64_t hi = clipped_.end(before);
      const auto events = count_in_range(starts_, lo, hi) + count_in_range(ends_, lo, hi);
      return events == 2;
    }
    return false;
  }

  void build_sections(const SpanTree& tree, CriticalPath& out) {
    const std::size_t n = tree.size();
    window_start_.assign(n, 0);
    window_end_.assign(n, 0);
    has_window_.assign(n, 0);
    const std::uint32_t root = tree.root();
    has_window_[root] = 1;
    window_start_[root] = clipped_.start(root);
    window_end_[root] = clipped_.end(root);
    for (const SpanOnPath& p : out.spans) {  // parents before children
      const std::uint32_t s = p.span;
      if (!has_window_[s]) continue;  // squeezed out by an overlapping sibling
      const std::int64_t lo = window_start_[s];
      const std::int64_t hi = window_end_[s];
      by_start_.clear();
      for (std::uint32_t c : clipped_.children(s)) {
        if (on_path_[c]) by_start_.push_back(c);
      }
      internal::stable_sort_unless_sorted(by_start_.begin(), by_start_.end(), [&](std::uint32_t a, std::uint32_t b) {
        return clipped_.start(a) < clipped_.start(b);
      });
      std::int64_t cursor = lo;
      for (std::uint32_t c : by_start_) {
        const std::int64_t c_lo = std::min(std::max(clipped_.start(c), cursor), hi);
        const std::int64_t c_hi = std::min(clipped_.end(c), hi);
        if (c_hi <= c_lo) continue;  // window empty: the span adds no section
        if (c_lo > cursor) out.sections.push_back(CriticalPathSection{s, cursor, c_lo});
        has_window_[c] = 1;
        window_start_[c] = c_lo;
        window_end_[c] = c_hi;
        cursor = c_hi;
      }
      if (hi > cursor) out.sections.push_back(CriticalPathSection{s, cursor, hi});
    }
    std::sort(out.sections.begin(), out.sections.end(),
              [](const CriticalPathSection& a, const CriticalPathSection& b) { return a.start_ns < b.start_ns; });
  }

  ClippedTree clipped_;
  std::vector<std::uint8_t> on_path_;
  std::vector<std::int64_t> path_children_ns_;
  std::vector<std::uint32_t> stack_;
  std::vector<std::uint32_t> by_end_;
  std::vector<std::uint32_t> by_start_;
  std::vector<std::int64_t> starts_;  // of the current node's children, sorted
  std::vector<std::int64_t> ends_;
  std::vector<std::int64_t> window_start_;
  std::vector<std::int64_t> window_end_;
  std::vector<std::uint8_t> has_window_;
};

}  // namespace

std::unique_ptr<CriticalPathAlgorithm> make_crisp_algorithm() { return std::make_unique<CrispAlgorithm>(); }

}  // namespace tailscope::analyze
