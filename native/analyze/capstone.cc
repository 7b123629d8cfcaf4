// The capstone study's critical-path model (after the Mystery Machine):
// children are taken in start-time order and each pair of neighbours on the
// path is classified by how the two spans overlap:
//
//   mutually exclusive   A |----|            both on the path; the gap
//                        B        |----|     between them is the parent's
//   complete overlap     A |-----------|     the longer one only
//                        B    |----|
//   partial overlap      A |-------|         both, from the first start to
//                        B      |-------|    the last end: A until B starts
//                                            (then B is what the parent waits for)
//
// then the model recurses into every child on the path, within the window of
// time that child holds on the path. Children are clipped into their parents
// as Jaeger UI does; producer->consumer children are not waited for.
#include <algorithm>

#include "analyze/clipped_tree.h"
#include "analyze/critical_path.h"

namespace tailscope::analyze {
namespace {

class CapstoneAlgorithm final : public CriticalPathAlgorithm {
 public:
  std::string_view name() const override { return "capstone"; }

  void compute(const SpanTree& tree, CriticalPath& out) override {
    out.clear();
    clipped_.build_jaeger(tree);
    const std::uint32_t root = tree.root();
    stack_.clear();
    stack_.push_back(Window{root, clipped_.start(root), clipped_.end(root)});
    while (!stack_.empty()) {
      const Window w = stack_.back();
      stack_.pop_back();
      choose_children(w);
      std::int64_t cursor = w.start_ns;
      for (const Window& child : chain_) {
        if (child.start_ns > cursor) out.sections.push_back(CriticalPathSection{w.span, cursor, child.start_ns});
        stack_.push_back(child);
        cursor = child.end_ns;
      }
      if (w.end_ns > cursor) out.sections.push_back(CriticalPathSection{w.span, cursor, w.end_ns});
    }
    internal::finish_from_sections(tree, out, exclusive_ns_, on_path_);
  }

 private:
  struct Window {
    std::uint32_t span;
    std::int64_t start_ns;
    std::int64_t end_ns;
  };

  // Fills chain_ with the children of `w.span` on the path inside the window,
  // each with the window it holds; the windows are disjoint and in time order.
  void choose_children(const Window& w) {
    candidates_.clear();
    for (std::uint32_t c : clipped_.children(w.span)) {
      const std::int64_t start = std::max(clipped_.start(c), w.start_ns);
      const std::int64_t end = std::min(clipped_.end(c), w.end_ns);
      if (end > start) candidates_.push_back(Window{c, start, end});  // empty ones add nothing
    }
    // Start order; on equal starts the longer first, so containment is
    // always "the later-listed child inside the earlier one".
    internal::stable_sort_unless_sorted(candidates_.begin(), candidates_.end(), [](const Window& a, const Window& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
    });
    chain_.clear();
    for (const Window& c : candidates_) {
      if (chain_.empty() || c.start_ns >= chain_.back().end_ns) {
        chain_.push_back(c);  // mutually exclusive
      } else if (c.end_ns <= chain_.back().end_ns) {
        continue;  // complete overlap: keep the longer
      } else {
        chain_.back().end_ns = c.start_ns;  // partial overlap: hand over at c's start
        chain_.push_back(c);
      }
    }
  }

  ClippedTree clipped_;
  std::vector<Window> stack_;
  std::vector<Window> candidates_;
  std::vector<Window> chain_;
  std::vector<std::int64_t> exclusive_ns_;
  std::vector<std::uint8_t> on_path_;
};

}  // namespace

std::unique_ptr<CriticalPathAlgorithm> make_capstone_algorithm() { return std::make_unique<CapstoneAlgorithm>(); }

}  // namespace tailscope::analyze
