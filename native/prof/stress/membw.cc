// membw: streaming read-modify-write over a buffer far larger than the LLC,
// so every line comes from and goes back to DRAM: memory bandwidth pressure.
#include <sys/mman.h>

#include <cstring>
#include <new>

#include "prof/stress/kernel.h"

namespace tailscope::prof::stress {
namespace {

class MembwKernel : public StressKernel {
 public:
  ~MembwKernel() override {
    if (data_) ::munmap(data_, count_ * sizeof(uint64_t));
  }
  size_t prepare(size_t requested_bytes) override {
    count_ = std::max<size_t>(64, requested_bytes / sizeof(uint64_t));
    void* p = ::mmap(nullptr, count_ * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<uint64_t*>(p);
    std::memset(data_, 1, count_ * sizeof(uint64_t));  // first touch by the pinned instance: local pages
    return this->working_set_bytes();
  }
  void run_chunk(Pressure& pressure) override {
    const size_t n = std::min(kChunkWords, count_ - at_);
    uint64_t* p = data_ + at_;
    for (size_t i = 0; i < n; ++i) p[i] += 1;  // one read and one write stream
    at_ = (at_ + n) % count_;
    pressure.accesses += 2 * n;
    pressure.bytes += 2 * n * sizeof(uint64_t);
  }
  size_t working_set_bytes() const override { return count_ * sizeof(uint64_t); }

 private:
  static constexpr size_t kChunkWords = 32 * 1024;  // 256 KiB per chunk
  uint64_t* data_ = nullptr;
  size_t count_ = 0;
  size_t at_ = 0;
};

}  // namespace

std::unique_ptr<StressKernel> make_membw_kernel() { return std::make_unique<MembwKernel>(); }

}  // namespace tailscope::prof::stress
