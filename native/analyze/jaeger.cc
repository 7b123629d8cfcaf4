// Jaeger UI's critical path (TracePage/CriticalPath), reproduced section for
// section:
//
//   root  |==================================|
//   A        |------|
//   B                 |-----------|
//   path  |rr|AAAAAA|r|BBBBBBBBBBB|rrrrrrrrrr|
//
// From the end of a span, take the child that finished last among those that
// ended before the current point, give the gap after it to the span, descend
// into the child; when no child is left, the span owns everything back to its
// start and the walk returns to the parent at the span's start. Sections are
// walked backwards and returned in time order here.
//
// Intentional difference: Jaeger UI tests `returningChildStartTime` for
// truthiness, so a child starting at time 0 is handled as if no child had
// returned; real timestamps are never 0 and we treat 0 like any other time.
#include <algorithm>

#include "analyze/clipped_tree.h"
#include "analyze/critical_path.h"

namespace tailscope::analyze {
namespace {

class JaegerAlgorithm final : public CriticalPathAlgorithm {
 public:
  std::string_view name() const override { return "jaeger"; }

  void compute(const SpanTree& tree, CriticalPath& out) override {
    out.clear();
    clipped_.build_jaeger(tree);
    sort_children_by_end(tree.size());

    std::uint32_t current = tree.root();
    bool returning = false;  // came back from a child that started at `returning_at`
    std::int64_t returning_at = 0;
    for (;;) {
      const std::int64_t section_end = returning ? returning_at : clipped_.end(current);
      const std::uint32_t child = last_finishing_child(current, returning, returning_at);
      if (child != kNoSpan) {
        emit(out, current, clipped_.end(child), section_end);
        current = child;
        returning = false;
        continue;
      }
      emit(out, current, clipped_.start(current), section_end);
      if (current == tree.root()) break;
      returning = true;
      returning_at = clipped_.start(current);
      current = tree.parent(current);
    }
    internal::finish_from_sections(tree, out, exclusive_ns_, on_path_);
  }

 private:
  static void emit(CriticalPath& out, std::uint32_t span, std::int64_t start, std::int64_t end) {
    if (start != end) out.sections.push_back(CriticalPathSection{span, start, end});
  }

  // Children of every span by end time, latest first; among equal ends the
  // earlier child in Jaeger's order (start time) wins, as its strict '>' does.
  void sort_children_by_end(std::size_t n) {
    by_end_begin_.assign(n + 1, 0);
    by_end_.clear();
    for (std::uint32_t s = 0; s < n; ++s) {
      const auto kids = clipped_.children(s);
      by_end_.insert(by_end_.end(), kids.begin(), kids.end());
      by_end_begin_[s + 1] = static_cast<std::uint32_t>(by_end_.size());
      internal::stable_sort_unless_sorted(
          by_end_.begin() + by_end_begin_[s], by_end_.end(),
          [&](std::uint32_t a, std::uint32_t b) { return clipped_.end(a) > clipped_.end(b); });
    }
    cursor_.assign(by_end_begin_.begin(), by_end_begin_.end() - 1);
  }

  // The returning point only moves back in time, so each span's candidates
  // are consumed in end order through a cursor: O(children) per span overall.
  std::uint32_t last_finishing_child(std::uint32_t span, bool returning, std::int64_t returning_at) {
    const std::uint32_t begin = by_end_begin_[span];
    const std::uint32_t end = by_end_begin_[span + 1];
    if (!returning) return begin < end ? by_end_[begin] : kNoSpan;
    std::uint32_t& at = cursor_[span];
    while (at < end && clipped_.end(by_end_[at]) >= returning_at) ++at;
    return at < end ? by_end_[at] : kNoSpan;
  }

  ClippedTree clipped_;
  std::vector<std::uint32_t> by_end_begin_;
  std::vector<std::uint32_t> by_end_;
  std::vector<std::uint32_t> cursor_;
  std::vector<std::int64_t> exclusive_ns_;
  std::vector<std::uint8_t> on_path_;
};

}  // namespace

std::unique_ptr<CriticalPathAlgorithm> make_jaeger_algorithm() { return std::make_unique<JaegerAlgorithm>(); }

}  // namespace tailscope::analyze
