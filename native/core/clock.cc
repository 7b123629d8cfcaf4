#include "core/clock.h"

#include <cerrno>

namespace tailscope {

void sleep_until_ns(int64_t deadline_ns) noexcept {
  timespec ts{static_cast<time_t>(deadline_ns / 1'000'000'000), static_cast<long>(deadline_ns % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

void precise_wait_until_ns(int64_t deadline_ns, int64_t spin_ns) noexcept {
  const int64_t sleep_target_ns = deadline_ns - spin_ns;
  if (sleep_target_ns > monotonic_ns()) sleep_until_ns(sleep_target_ns);
  spin_until_ns(deadline_ns);
}

}  // namespace tailscope
