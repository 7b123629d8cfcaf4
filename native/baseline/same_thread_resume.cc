// Same-thread coroutine resume: handle.resume() runs a suspended coroutine one
// step, to its next co_await, on the calling thread. No queue, no other
// thread, no kernel: the floor of the coroutine model, which a coroutine
// resumed by a pool worker is compared with.
//
// One resume costs a few nanoseconds, below a clock read, so each sample is
// the mean of kPerSample resume→suspend round trips (one clock read pair per
// batch, so the clock's cost drops out).
#include <algorithm>
#include <cmath>
#include <coroutine>
#include <exception>

#include "baseline/reference.h"
#include "core/clock.h"

namespace tailscope::baseline {
namespace {

constexpr int kPerSample = 1000;

// A coroutine that never finishes; the runner owns and destroys its frame.
struct ResumeLoop {
  struct promise_type {
    ResumeLoop get_return_object() { return {std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  std::coroutine_handle<promise_type> handle;
};

// The volatile counter keeps each step from being optimised away.
ResumeLoop resume_loop(volatile int64_t* counter) {
  for (;;) {
    *counter = *counter + 1;
    co_await std::suspend_always{};
  }
}

ReferenceResult run(const ReferenceConfig& config) {
  ReferenceResult result;
  place_client(config.placement);
  volatile int64_t counter = 0;
  ResumeLoop loop = resume_loop(&counter);
  for (int64_t i = 0; i < config.warmup_iterations + config.iterations; ++i) {
    const int64_t start_ns = monotonic_ns();
    for (int k = 0; k < kPerSample; ++k) loop.handle.resume();
    const int64_t end_ns = monotonic_ns();
    if (i >= config.warmup_iterations)
      result.histogram.record(std::max<int64_t>(1, std::llround(static_cast<double>(end_ns - start_ns) / kPerSample)));
  }
  loop.handle.destroy();
  result.observed = {{"resumes_per_sample", kPerSample}};
  return result;
}

}  // namespace

Reference same_thread_resume_reference() {
  return make_reference("same_thread_resume",
                        "handle.resume() → the coroutine runs one step and suspends again, on the same thread; mean "
                        "of 1000 per sample",
                        2000, run);
}

}  // namespace tailscope::baseline
