// The reconnect policy of the event-loop store clients, on a clock the test
// drives (the clients' use of it: stores_test.cc, refused and hung servers).
#include "svc/stores/reconnect_backoff.h"

#include <gtest/gtest.h>

namespace tailscope::svc::stores {
namespace {

TEST(ReconnectBackoff, AFailedConnectWaitsDoublingToTheCap) {
  ReconnectBackoff b("memcached");
  EXPECT_TRUE(b.may_connect(0));  // the first connect never waits
  b.failed(1'000, "connect: Connection refused");
  EXPECT_FALSE(b.may_connect(1'000 + ReconnectBackoff::kFirstNs - 1));
  EXPECT_TRUE(b.may_connect(1'000 + ReconnectBackoff::kFirstNs));
  EXPECT_EQ(b.next_ns(), 1'000 + ReconnectBackoff::kFirstNs);
  b.failed(2'000, "connect timed out");  // the second waits twice as long
  EXPECT_EQ(b.next_ns(), 2'000 + 2 * ReconnectBackoff::kFirstNs);
  const int64_t now = 3'000;
  for (int i = 0; i < 20; ++i) b.failed(now, "connect timed out");  // doubles, then stays at the cap
  EXPECT_FALSE(b.may_connect(now + ReconnectBackoff::kMaxNs - 1));
  EXPECT_TRUE(b.may_connect(now + ReconnectBackoff::kMaxNs));
}

TEST(ReconnectBackoff, ASuccessfulConnectResetsTheDelay) {
  ReconnectBackoff b("redis");
  for (int i = 0; i < 5; ++i) b.failed(0, "refused");
  b.connected();
  EXPECT_TRUE(b.may_connect(0));  // a connection that broke after working reconnects at once
  b.failed(10, "refused");        // and the next failure waits the first delay again, not the grown one
  EXPECT_EQ(b.next_ns(), 10 + ReconnectBackoff::kFirstNs);
}

TEST(ReconnectBackoff, WhileBackingOffOpsAreToldTheStoreAndTheFailure) {
  ReconnectBackoff b("document store");
  EXPECT_EQ(b.last_failure(), "");
  b.failed(0, "connection to server at \"127.0.0.1\", port 1 failed: Connection refused");
  EXPECT_EQ(b.last_failure(), "connection to server at \"127.0.0.1\", port 1 failed: Connection refused");
  EXPECT_EQ(b.backing_off(),
            "document store reconnect backing off after a failed connect (connection to server at \"127.0.0.1\", "
            "port 1 failed: Connection refused)");
  b.failed(0, "connect timed out");  // the latest failure is the one named
  EXPECT_EQ(b.last_failure(), "connect timed out");
}

TEST(ReconnectBackoff, ThePolicyInWordsFollowsTheConstants) {
  static_assert(ReconnectBackoff::kFirstNs == 100'000'000 && ReconnectBackoff::kMaxNs == 1'000'000'000,
                "docs/stores.md states 100 ms doubling to 1 s: change both");
  EXPECT_EQ(ReconnectBackoff::policy(), "reconnect after a failed connect backs off 100 ms doubling to 1 s");
}

}  // namespace
}  // namespace tailscope::svc::stores
