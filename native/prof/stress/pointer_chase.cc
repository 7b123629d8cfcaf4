#include "prof/stress/pointer_chase.h"

#include <numeric>
#include <random>

namespace tailscope::prof::stress {

size_t PointerChaseKernel::prepare(size_t requested_bytes) {
  const size_t n = std::max<size_t>(2, (requested_bytes + sizeof(Line) / 2) / sizeof(Line));
  lines_.assign(n, Line{nullptr});
  // Sattolo's shuffle makes a single cycle: every line is visited once per lap.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(0x5eed + n);
  for (size_t i = n - 1; i > 0; --i) {
    std::uniform_int_distribution<size_t> pick(0, i - 1);
    std::swap(order[i], order[pick(rng)]);
  }
  for (size_t i = 0; i < n; ++i) lines_[i].next = &lines_[order[i]];
  at_ = &lines_[0];
  return this->working_set_bytes();
}

void PointerChaseKernel::run_chunk(Pressure& pressure) {
  constexpr int kLoads = 4096;
  Line* p = at_;
  for (int i = 0; i < kLoads; ++i) p = p->next;
  // Keep the chain's end live so the loop is not optimised away.
  at_ = p;
  pressure.accesses += kLoads;
  pressure.bytes += kLoads * sizeof(Line);
}

}  // namespace tailscope::prof::stress
