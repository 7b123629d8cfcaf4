// Spin hand-off across cores: the sender writes its timestamp into a cache
// line that the receiver is spinning on; the sample ends when the receiver
// sees it. This is the minimum cost of moving a value between two cores (one
// cache-line transfer plus the clock reads): the floor for spin pools.
//
// Unpinned, both threads may share a CPU; the receiver then yields after a
// bounded spin so a sample costs a reschedule, not a whole time slice.
#include <sched.h>

#include <atomic>
#include <thread>

#include "baseline/reference.h"
#include "core/clock.h"

namespace tailscope::baseline {
namespace {

struct alignas(64) Line {
  std::atomic<int64_t> value{0};
};

constexpr int kSpinsBeforeYield = 20'000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

ReferenceResult run(const ReferenceConfig& config) {
  ReferenceResult result;
  const int64_t total = config.warmup_iterations + config.iterations;
  Line to_receiver, to_sender;
  std::atomic<int> receiver_cpu{-1};
  std::atomic<int64_t> seen_ns{0};
  std::thread receiver([&] {
    place_server(config.placement);
    for (int64_t i = 0; i < total; ++i) {
      int spins = 0;
      int64_t sent;
      while ((sent = to_receiver.value.load(std::memory_order_acquire)) == 0) {
        cpu_relax();
        if (++spins == kSpinsBeforeYield) {
          spins = 0;
          sched_yield();
        }
      }
      const int64_t now = monotonic_ns();
      to_receiver.value.store(0, std::memory_order_relaxed);
      seen_ns.store(now, std::memory_order_relaxed);
      receiver_cpu.store(sched_getcpu(), std::memory_order_relaxed);
      to_sender.value.store(1, std::memory_order_release);
    }
  });
  place_client(config.placement);
  SameCpuCounter same_cpu;
  for (int64_t i = 0; i < total; ++i) {
    const int64_t sent_ns = monotonic_ns();
    to_receiver.value.store(sent_ns, std::memory_order_release);
    int spins = 0;
    while (to_sender.value.load(std::memory_order_acquire) == 0) {
      cpu_relax();
      if (++spins == kSpinsBeforeYield) {
        spins = 0;
        sched_yield();
      }
    }
    to_sender.value.store(0, std::memory_order_relaxed);
    if (i >= config.warmup_iterations) {
      result.histogram.record(seen_ns.load(std::memory_order_relaxed) - sent_ns);
      same_cpu.add(sched_getcpu(), receiver_cpu.load(std::memory_order_relaxed));
    }
  }
  receiver.join();
  result.observed = same_cpu.to_json();
  return result;
}

}  // namespace

Reference spin_handoff_reference() {
  return make_reference("spin_handoff", "sender stores its timestamp in a cache line → spinning receiver loads it",
                        20000, run);
}

}  // namespace tailscope::baseline
