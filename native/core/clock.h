// Monotonic time in nanoseconds: the single clock every engine timestamps with.
//
// CLOCK_MONOTONIC goes through the vDSO (~20 ns, no syscall) and is comparable
// across threads and processes on one host, which the 5-timestamp probe and the
// load generator's intended-vs-actual send times rely on. We deliberately do
// not use the TSC directly: on VMs its rate and cross-core sync are not
// guaranteed, and a 20 ns read is well below the effects we measure.
#pragma once

#include <cstdint>
#include <ctime>

namespace tailscope {

inline int64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// CPU time the calling thread has run, in ns (CLOCK_THREAD_CPUTIME_ID: a system
// call on x86 Linux, ~0.1-0.2 us; never for timestamps, only for work budgets).
inline int64_t thread_cpu_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Wall clock, only for labelling results (never for intervals).
inline int64_t realtime_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Busy-waits until monotonic_ns() >= deadline_ns. Only for the last few
// microseconds of a wait, where a sleep's wake-up latency would dominate.
inline void spin_until_ns(int64_t deadline_ns) noexcept {
  while (monotonic_ns() < deadline_ns) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

// Sleeps until the absolute monotonic deadline (no drift from loop overhead).
void sleep_until_ns(int64_t deadline_ns) noexcept;

// Sleeps for most of the interval, then spins the last `spin_ns` for precision.
void precise_wait_until_ns(int64_t deadline_ns, int64_t spin_ns = 50'000) noexcept;

}  // namespace tailscope
