// cpu: a dense matrix multiply (C += A·B) on three small matrices that stay
// in L1, so it loads the FMA/vector execution ports and nothing else.
// target_clones builds an FMA version beside the baseline and picks at load time.
#include <array>

#include "prof/stress/kernel.h"

// The clones' ifunc resolver runs while the dynamic loader relocates, before a
// sanitizer runtime is initialised; instrumented, it crashes there (TSan). The
// sanitizer trees test behaviour, not port pressure, so they get one version.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TAILSCOPE_FMA_CLONES
#else
#define TAILSCOPE_FMA_CLONES __attribute__((target_clones("fma", "default")))
#endif

namespace tailscope::prof::stress {
namespace {

constexpr int kN = 32;

class CpuKernel : public StressKernel {
 public:
  size_t prepare(size_t /*working_set_bytes*/) override {
    for (int i = 0; i < kN * kN; ++i) {
      a_[i] = 1.0 + i * 1e-6;
      b_[i] = 1.0 - i * 1e-6;
      c_[i] = 0.0;
    }
    return working_set_bytes();
  }
  void run_chunk(Pressure& pressure) override {
    gemm(a_.data(), b_.data(), c_.data());
    // Damp C so repeated accumulation never overflows into infinities.
    c_[0] *= 1e-3;
    pressure.flops += 2ull * kN * kN * kN;
  }
  size_t working_set_bytes() const override { return 3 * kN * kN * sizeof(double); }

 private:
  TAILSCOPE_FMA_CLONES static void gemm(const double* a, const double* b, double* c) {
    for (int i = 0; i < kN; ++i)
      for (int k = 0; k < kN; ++k) {
        const double aik = a[i * kN + k];
        for (int j = 0; j < kN; ++j) c[i * kN + j] += aik * b[k * kN + j];
      }
  }
  std::array<double, kN * kN> a_{}, b_{}, c_{};
};

}  // namespace

std::unique_ptr<StressKernel> make_cpu_kernel() { return std::make_unique<CpuKernel>(); }

}  // namespace tailscope::prof::stress
