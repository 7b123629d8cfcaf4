// Cheap references timed in batches: one clock read costs ~20 ns, the same
// order as the things timed, so a single call cannot be timed by itself. Each
// sample is the mean of a batch of kBatch calls.
//  - empty_syscall: syscall(SYS_getppid), a real kernel entry and exit (not
//    cached by libc), so it carries the machine's syscall and mitigation cost;
//  - clock_read: monotonic_ns() itself, the cost every timestamp adds.
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "baseline/reference.h"
#include "core/clock.h"

namespace tailscope::baseline {
namespace {

constexpr int kBatch = 100;

template <class F>
ReferenceResult run_batched(const ReferenceConfig& config, F&& op) {
  ReferenceResult result;
  place_client(config.placement);
  for (int64_t i = 0; i < config.warmup_iterations + config.iterations; ++i) {
    const int64_t start_ns = monotonic_ns();
    for (int k = 0; k < kBatch; ++k) op();
    const int64_t per_call_ns = (monotonic_ns() - start_ns + kBatch / 2) / kBatch;
    if (i >= config.warmup_iterations) result.histogram.record(per_call_ns);
  }
  result.observed = {{"calls_per_sample", kBatch}, {"cpu_at_end", sched_getcpu()}};
  return result;
}

ReferenceResult run_syscall(const ReferenceConfig& config) {
  return run_batched(config, [] { (void)syscall(SYS_getppid); });
}

ReferenceResult run_clock(const ReferenceConfig& config) {
  volatile int64_t sink = 0;
  ReferenceResult r = run_batched(config, [&] { sink = monotonic_ns(); });
  (void)sink;
  return r;
}

}  // namespace

Reference empty_syscall_reference() {
  return make_reference("empty_syscall", "syscall(SYS_getppid): kernel entry and return, mean of 100 calls per sample",
                        5000, run_syscall);
}

Reference clock_read_reference() {
  return make_reference("clock_read", "clock_gettime(CLOCK_MONOTONIC) via vDSO, mean of 100 calls per sample", 5000,
                        run_clock);
}

}  // namespace tailscope::baseline
