// Condition-variable hand-off to a parked thread: from the waker stamping the
// time (under the mutex, just before notify_one) to the waiter returning from
// wait(). The waiter has been blocked for ~200 µs, so it sleeps in the kernel
// (futex) and its CPU may be idle: this is the wake-up a fixed thread pool
// pays at low load, and the yardstick for the pool's scheduling delay.
#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "baseline/reference.h"
#include "core/clock.h"

namespace tailscope::baseline {
namespace {

constexpr int64_t kParkNs = 200'000;

ReferenceResult run(const ReferenceConfig& config) {
  ReferenceResult result;
  const int64_t total = config.warmup_iterations + config.iterations;
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  int64_t woken_at_ns = 0;
  int64_t signal_ns = 0;
  int waiter_cpu = -1;
  std::atomic<int64_t> parked_round{-1};
  std::atomic<int64_t> done_round{-1};
  std::thread waiter([&] {
    place_server(config.placement);
    for (int64_t i = 0; i < total; ++i) {
      std::unique_lock lock(mu);
      parked_round.store(i, std::memory_order_release);
      cv.wait(lock, [&] { return go; });
      woken_at_ns = monotonic_ns();
      waiter_cpu = sched_getcpu();
      go = false;
      lock.unlock();
      done_round.store(i, std::memory_order_release);
    }
  });
  place_client(config.placement);
  SameCpuCounter same_cpu;
  for (int64_t i = 0; i < total; ++i) {
    while (parked_round.load(std::memory_order_acquire) < i) std::this_thread::yield();
    // The waiter published its round while holding the mutex and then
    // released it inside wait(); sleeping here lets it reach the futex.
    precise_wait_until_ns(monotonic_ns() + kParkNs, 0);
    {
      std::lock_guard lock(mu);
      go = true;
      signal_ns = monotonic_ns();
    }
    cv.notify_one();
    const int waker_cpu = sched_getcpu();
    while (done_round.load(std::memory_order_acquire) < i) std::this_thread::yield();
    std::lock_guard lock(mu);
    if (i >= config.warmup_iterations) {
      result.histogram.record(woken_at_ns - signal_ns);
      same_cpu.add(waker_cpu, waiter_cpu);
    }
  }
  waiter.join();
  result.observed = same_cpu.to_json();
  result.observed["park_ns"] = kParkNs;
  return result;
}

}  // namespace

Reference condvar_handoff_reference() {
  return make_reference("condvar_handoff",
                        "waker stamps time under the mutex, notify_one() → parked waiter returns from wait()", 2000,
                        run);
}

}  // namespace tailscope::baseline
