// A random pointer chase over one cycle through every cache line of a buffer:
// each load depends on the previous one, so neither out-of-order execution nor
// the prefetchers hide a miss. l1d, l2 and l3 differ only in the size.
#pragma once

#include <memory>
#include <vector>

#include "prof/stress/kernel.h"

namespace tailscope::prof::stress {

class PointerChaseKernel : public StressKernel {
 public:
  size_t prepare(size_t working_set_bytes) override;
  void run_chunk(Pressure& pressure) override;
  size_t working_set_bytes() const override { return lines_.size() * sizeof(Line); }

 private:
  struct alignas(64) Line {
    Line* next;
  };
  std::vector<Line> lines_;
  Line* at_ = nullptr;
};

}  // namespace tailscope::prof::stress
