// Thread create → start: from just before pthread_create() to the first
// instruction of the new thread. This is what std::async(launch::async) and
// std::thread pay before a task can run, and the floor under their
// scheduling delay.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstring>
#include <stdexcept>

#include "baseline/reference.h"
#include "core/clock.h"

namespace tailscope::baseline {
namespace {

struct StartStamp {
  std::atomic<int64_t> started_ns{0};
  std::atomic<int> cpu{-1};
};

void* record_start(void* arg) {
  auto* stamp = static_cast<StartStamp*>(arg);
  int64_t now = monotonic_ns();
  stamp->cpu.store(sched_getcpu(), std::memory_order_relaxed);
  stamp->started_ns.store(now, std::memory_order_release);
  return nullptr;
}

ReferenceResult run(const ReferenceConfig& config) {
  ReferenceResult result;
  place_client(config.placement);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (config.placement.pinned) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(config.placement.server_cpu, &set);
    pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
  }
  SameCpuCounter same_cpu;
  for (int64_t i = 0; i < config.warmup_iterations + config.iterations; ++i) {
    StartStamp stamp;
    pthread_t thread;
    const int64_t create_ns = monotonic_ns();
    int rc = pthread_create(&thread, &attr, record_start, &stamp);
    if (rc != 0) {
      pthread_attr_destroy(&attr);
      throw std::runtime_error(std::string("pthread_create: ") + std::strerror(rc));
    }
    const int creator_cpu = sched_getcpu();
    pthread_join(thread, nullptr);
    if (i < config.warmup_iterations) continue;
    result.histogram.record(stamp.started_ns.load(std::memory_order_acquire) - create_ns);
    same_cpu.add(creator_cpu, stamp.cpu.load());
  }
  pthread_attr_destroy(&attr);
  result.observed = same_cpu.to_json();
  return result;
}

}  // namespace

Reference thread_create_reference() {
  return make_reference("thread_create", "pthread_create() called → first instruction of the new thread", 2000, run);
}

}  // namespace tailscope::baseline
