// Sleeping and waking without lost wake-ups, on raw futexes.
//
// We do not use std::atomic::wait/notify: libstdc++ 12's implementation can
// lose a wake-up (its notify skips the syscall when its own waiter count,
// read without ordering against the waiter, looks zero), which hung the
// benchmark's consumer in testing. A futex wait re-checks the word in the
// kernel, so these primitives only need the classic Dekker ordering (all
// seq_cst) between "publish, then look for sleepers" and "announce sleeping,
// then re-check".
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace tailscope::exec::internal {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word must be a plain 32-bit integer");

// Sleeps while *word == expected (returns at once otherwise, or spuriously).
inline void futex_wait(const std::atomic<uint32_t>* word, uint32_t expected) noexcept {
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
inline void futex_wake(const std::atomic<uint32_t>* word, int count) noexcept {
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// An event count: sleep until "something changed", where the something is
// checked by the caller.
//   waiter:   park_unless(has_work)  — sleeps only if has_work() is false
//             after it announced itself;
//   notifier: publish the work, then wake_one()/wake_all() — a syscall only
//             when somebody is (about to be) asleep.
//
// Counters (relaxed, bumped only on the paths that make a syscall anyway):
// how often a waiter really went to sleep, and how many wake syscalls the
// notifiers made — the benchmark reports them per call, which tells a spin
// hand-off from a futex wake-up.
class IdleParking {
 public:
  template <class HasWork>
  void park_unless(HasWork&& has_work) {
    sleepers_.fetch_add(1);
    const uint32_t e = epoch_.load();
    if (!has_work()) {
      parks_.fetch_add(1, std::memory_order_relaxed);
      futex_wait(&epoch_, e);
    }
    sleepers_.fetch_sub(1);
  }
  void wake_one() { wake(1); }
  void wake_all() { wake(INT_MAX); }

  int64_t parks() const noexcept { return parks_.load(std::memory_order_relaxed); }
  int64_t wake_syscalls() const noexcept { return wake_syscalls_.load(std::memory_order_relaxed); }

 private:
  // Note: a woken waiter stays counted in sleepers_ until it runs again, so
  // every wake_one in that window makes another syscall (the benchmark
  // reports wake_syscalls against parks per call). Suppressing those needs a
  // claim protocol; a plain "wake already sent" flag can lose a wake-up.
  void wake(int count) {
    if (sleepers_.load() > 0) {
      epoch_.fetch_add(1);
      wake_syscalls_.fetch_add(1, std::memory_order_relaxed);
      futex_wake(&epoch_, count);
    }
  }
  std::atomic<uint32_t> epoch_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<int64_t> parks_{0};
  std::atomic<int64_t> wake_syscalls_{0};
};

}  // namespace tailscope::exec::internal
