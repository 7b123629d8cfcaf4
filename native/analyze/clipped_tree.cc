#include "analyze/clipped_tree.h"

namespace tailscope::analyze {

template <typename Rule>
void ClippedTree::build(const SpanTree& tree, Rule rule) {
  const std::size_t n = tree.size();
  alive_.assign(n, 0);
  start_.resize(n);
  end_.resize(n);
  child_begin_.assign(n + 1, 0);
  child_list_.clear();
  if (!tree.has_root()) return;
  for (std::uint32_t s : tree.preorder()) {
    start_[s] = tree.start(s);
    end_[s] = tree.end(s);
    const std::uint32_t p = tree.parent(s);
    if (s == tree.root()) {
      alive_[s] = 1;
    } else if (alive_[p]) {
      alive_[s] = rule(tree, p, s, start_[p], end_[p], start_[s], end_[s]) ? 1 : 0;
    }
  }
  // Alive children keep the tree's order (start time, then input order).
  for (std::uint32_t s = 0; s < n; ++s) {
    child_begin_[s + 1] = child_begin_[s];
    if (!alive_[s]) continue;
    for (std::uint32_t c : tree.children(s)) {
      if (alive_[c]) {
        child_list_.push_back(c);
        ++child_begin_[s + 1];
      }
    }
  }
}

void ClippedTree::build_jaeger(const SpanTree& tree) {
  build(tree, [](const SpanTree& t, std::uint32_t p, std::uint32_t c, std::int64_t ps, std::int64_t pe,
                 std::int64_t& cs, std::int64_t& ce) {
    if (t.span(p).kind == trace::SpanKind::kProducer && t.span(c).kind == trace::SpanKind::kConsumer) {
      return false;  // asynchronous: the producer does not wait for its consumer
    }
    if (cs >= ps) {
      if (cs >= pe) return false;
      if (ce > pe) ce = pe;
      return true;
    }
    if (ce <= ps) return false;
    cs = ps;
    if (ce > pe) ce = pe;
    return true;
  });
}

void ClippedTree::build_crisp(const SpanTree& tree) {
  build(tree, [](const SpanTree& t, std::uint32_t, std::uint32_t c, std::int64_t ps, std::int64_t pe, std::int64_t& cs,
                 std::int64_t& ce) {
    if (t.span(c).parent_ref != trace::RefType::kChildOf) return false;
    if (cs >= ps && ce <= pe) return true;
    if (cs < ps && ce <= pe && ce > ps) {
      cs = ps;
      return true;
    }
    if (cs >= ps && ce > pe && cs < pe) {
      ce = pe;
      return true;
    }
    return false;
  });
}

}  // namespace tailscope::analyze
