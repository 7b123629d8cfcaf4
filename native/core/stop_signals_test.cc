#include "core/stop_signals.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <csignal>

namespace {

std::atomic<int> g_last_signal{0};
std::atomic<int> g_calls{0};

void record(int sig) {
  g_last_signal.store(sig);
  g_calls.fetch_add(1);
}

TEST(StopSignals, EveryStopSignalReachesTheHandlerAndTheProcessLives) {
  tailscope::install_stop_handler(record);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const int before = g_calls.load();
    ASSERT_EQ(::raise(sig), 0);
    EXPECT_EQ(g_calls.load(), before + 1);
    EXPECT_EQ(g_last_signal.load(), sig);
  }
}

TEST(StopSignals, ABrokenPipeIsAnErrorNotADeath) {
  tailscope::install_stop_handler(record);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  const char byte = 'x';
  // Without SIGPIPE ignored, this write would kill the test binary.
  EXPECT_EQ(::write(fds[1], &byte, 1), -1);
  EXPECT_EQ(errno, EPIPE);
  ::close(fds[1]);
}

}  // namespace
