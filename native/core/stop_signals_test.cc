#include "core/stop_signals.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>

#include "core/clock.h"

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

// The waits below take SIGUSR1/SIGUSR2, blocked first as an engine blocks its
// stop signals: raised while blocked, a signal stays pending for the wait.
class WaitForStop : public ::testing::Test {
 protected:
  void SetUp() override { pthread_sigmask(SIG_BLOCK, &set_, &old_); }
  void TearDown() override {
    // Nothing may stay pending once the mask is restored.
    const timespec none{0, 0};
    while (sigtimedwait(&set_, nullptr, &none) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  const sigset_t set_ = tailscope::signal_set({SIGUSR1, SIGUSR2});
  sigset_t old_{};
};

TEST_F(WaitForStop, ReturnsAPendingSignalOfTheSet) {
  ASSERT_EQ(::raise(SIGUSR2), 0);
  EXPECT_EQ(tailscope::wait_for_stop(set_, 0), SIGUSR2);
}

TEST_F(WaitForStop, ReturnsZeroAtTheDeadline) {
  const int64_t deadline_ns = tailscope::monotonic_ns() + 5'000'000;
  EXPECT_EQ(tailscope::wait_for_stop(set_, deadline_ns), 0);
  EXPECT_GE(tailscope::monotonic_ns(), deadline_ns);  // not before it: a lower bound, not a speed
  // A deadline already passed: at once, even with a signal pending.
  ASSERT_EQ(::raise(SIGUSR1), 0);
  EXPECT_EQ(tailscope::wait_for_stop(set_, deadline_ns), 0);
}

TEST_F(WaitForStop, ATickEndsAWaitWithoutASignalOrADeadline) {
  EXPECT_EQ(tailscope::wait_for_stop(set_, 0, 1'000'000), 0);
  ASSERT_EQ(::raise(SIGUSR1), 0);
  EXPECT_EQ(tailscope::wait_for_stop(set_, 0, 1'000'000), SIGUSR1);
}

TEST(SignalSet, HoldsExactlyTheGivenSignals) {
  const sigset_t set = tailscope::signal_set({SIGINT, SIGTERM});
  EXPECT_EQ(sigismember(&set, SIGINT), 1);
  EXPECT_EQ(sigismember(&set, SIGTERM), 1);
  EXPECT_EQ(sigismember(&set, SIGHUP), 0);
  EXPECT_EQ(sigismember(&set, SIGCHLD), 0);
}

}  // namespace
