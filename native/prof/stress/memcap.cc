// memcap: random touches over a working set that grows to its target during
// the first half of the run, so memory *capacity* (page cache, other
// services' resident sets) comes under pressure gradually, as in iBench.
// The target is capped by --memcap-max-fraction of MemAvailable (driver.cc).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <random>

#include "prof/stress/kernel.h"

namespace tailscope::prof::stress {
namespace {

class MemcapKernel : public StressKernel {
 public:
  ~MemcapKernel() override {
    if (data_) ::munmap(data_, pages_ * page_bytes_);
  }
  size_t prepare(size_t requested_bytes) override {
    page_bytes_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    pages_ = std::max<size_t>(1, (requested_bytes + page_bytes_ / 2) / page_bytes_);
    // Reserved, not committed: pages become resident as the run touches them.
    void* p = ::mmap(nullptr, pages_ * page_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<char*>(p);
    return pages_ * page_bytes_;
  }
  void set_progress(double fraction) override {
    goal_pages_ = std::min(pages_, static_cast<size_t>(static_cast<double>(pages_) * std::min(1.0, 2.0 * fraction)));
  }
  void run_chunk(Pressure& pressure) override {
    // Grow: first-touch new pages up to the goal, a bounded number per chunk.
    const size_t grow_to = std::min(goal_pages_, touched_pages_ + kGrowPagesPerChunk);
    for (; touched_pages_ < grow_to; ++touched_pages_) {
      data_[touched_pages_ * page_bytes_] = 1;
      ++pressure.accesses;
      pressure.bytes += 64;
    }
    if (touched_pages_ == 0) return;
    // Keep the grown set resident: random lines of random touched pages.
    std::uniform_int_distribution<size_t> page(0, touched_pages_ - 1);
    std::uniform_int_distribution<size_t> line(0, page_bytes_ / 64 - 1);
    for (int i = 0; i < kTouchesPerChunk; ++i) ++data_[page(rng_) * page_bytes_ + line(rng_) * 64];
    pressure.accesses += kTouchesPerChunk;
    pressure.bytes += kTouchesPerChunk * 64;
  }
  size_t working_set_bytes() const override { return touched_pages_ * page_bytes_; }

 private:
  static constexpr size_t kGrowPagesPerChunk = 256;
  static constexpr int kTouchesPerChunk = 1024;
  char* data_ = nullptr;
  size_t page_bytes_ = 4096;
  size_t pages_ = 0;
  size_t goal_pages_ = 0;
  size_t touched_pages_ = 0;
  std::mt19937_64 rng_{0x3e3ca9};
};

}  // namespace

std::unique_ptr<StressKernel> make_memcap_kernel() { return std::make_unique<MemcapKernel>(); }

}  // namespace tailscope::prof::stress
