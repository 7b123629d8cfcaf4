#include "core/stop_signals.h"

#include <algorithm>
#include <csignal>
#include <ctime>

#include "core/clock.h"

namespace tailscope {

void install_stop_handler(StopHandler handler) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

sigset_t signal_set(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  return set;
}

int wait_for_stop(const sigset_t& signals, int64_t deadline_ns, int64_t tick_ns) {
  // No deadline and no tick: the wait goes on in slices, so one sigtimedwait
  // path serves every case (an EINTR, from a stopped and continued process,
  // just starts the next slice).
  constexpr int64_t kNoDeadlineSliceNs = 200'000'000;
  for (;;) {
    int64_t wait_ns = tick_ns > 0 ? tick_ns : kNoDeadlineSliceNs;
    if (deadline_ns != 0) {
      const int64_t left_ns = deadline_ns - monotonic_ns();
      if (left_ns <= 0) return 0;
      wait_ns = tick_ns > 0 ? std::min(wait_ns, left_ns) : left_ns;
    }
    const timespec ts{wait_ns / 1'000'000'000, wait_ns % 1'000'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &ts);
    if (sig > 0) return sig;
    if (tick_ns > 0) return 0;
  }
}

}  // namespace tailscope
