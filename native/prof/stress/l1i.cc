// l1i: calls through a jump table into many distinct generated functions
// (gen_l1i.cmake, aligned to cache lines), in a shuffled order, so the code
// footprint exceeds the L1I and every call fetches new instruction lines.
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "prof/stress/kernel.h"

namespace tailscope::prof::stress {
namespace l1i {
using Fn = uint64_t (*)(uint64_t);
extern const Fn kFunctions[];
extern const size_t kFunctionCount;
}  // namespace l1i

namespace {

// The bytes each generated function occupies: the median distance between
// neighbouring functions' addresses (functions are 64-byte aligned).
size_t function_stride_bytes() {
  std::vector<uintptr_t> at(l1i::kFunctionCount);
  for (size_t i = 0; i < at.size(); ++i) at[i] = reinterpret_cast<uintptr_t>(l1i::kFunctions[i]);
  std::sort(at.begin(), at.end());
  std::vector<uintptr_t> gaps;
  for (size_t i = 1; i < at.size(); ++i) gaps.push_back(at[i] - at[i - 1]);
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
  return std::max<size_t>(64, gaps[gaps.size() / 2]);
}

class L1iKernel : public StressKernel {
 public:
  size_t prepare(size_t requested_bytes) override {
    stride_ = function_stride_bytes();
    // More code than was generated cannot be reached: the driver reports the
    // difference between requested and held bytes.
    const size_t n = std::clamp<size_t>((requested_bytes + stride_ / 2) / stride_, 1, l1i::kFunctionCount);
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), 0);
    std::shuffle(order_.begin(), order_.end(), std::mt19937_64(0x11c0de));
    return this->working_set_bytes();
  }
  void run_chunk(Pressure& pressure) override {
    constexpr size_t kCalls = 2048;
    uint64_t x = sink_;
    for (size_t i = 0; i < kCalls; ++i) {
      x = l1i::kFunctions[order_[at_]](x);
      if (++at_ == order_.size()) at_ = 0;
    }
    sink_ = x;
    pressure.accesses += kCalls;
    pressure.bytes += kCalls * stride_;
  }
  size_t working_set_bytes() const override { return order_.size() * stride_; }

 private:
  std::vector<uint32_t> order_;
  size_t stride_ = 64;
  size_t at_ = 0;
  uint64_t sink_ = 1;
};

}  // namespace

std::unique_ptr<StressKernel> make_l1i_kernel() { return std::make_unique<L1iKernel>(); }

}  // namespace tailscope::prof::stress
