// The blocking client pool (DeathStarBench's ClientPool): the link-delay shim
// holds a request at least its delay and never past the call's deadline, idle
// connections are closed after the idle timeout (or kept without one), and a
// peer outside the allow-list is refused before any socket exists.
#include "svc/blocking_client_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <memory>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "svc/testing/rpc_test_server.h"

namespace tailscope::svc {
namespace {

using testing::kLongTimeoutNs;
using testing::kShimDelayNs;
using testing::TestServer;

TEST(LinkDelayShim, TheBlockingPoolHoldsItsRequestToo) {
  TestServer server;
  BlockingClientPool pool("127.0.0.1", server.port(), 1, LinkDelay{kShimDelayNs, 0});
  const int64_t start = monotonic_ns();
  const CallResult r = pool.call("m", "p", TraceContext{}, kLongTimeoutNs);
  EXPECT_EQ(r.status, RpcStatus::kOk);
  EXPECT_EQ(r.payload, "p");
  EXPECT_GE(monotonic_ns() - start, kShimDelayNs);
  // A delay longer than the call's deadline: a timeout, and nothing was sent.
  const CallResult late = pool.call("m", "q", TraceContext{}, 1'000'000);
  EXPECT_EQ(late.status, RpcStatus::kTimeout);
  EXPECT_EQ(server.dispatched(), 1);
}

// `n` calls held in flight at once make the pool use n connections (opening
// those it lacks); this returns once all are answered and back in the pool.
void calls_at_once(TestServer& server, BlockingClientPool& pool, size_t n) {
  std::vector<std::thread> callers;
  for (size_t i = 0; i < n; ++i)
    callers.emplace_back(
        [&pool] { EXPECT_EQ(pool.call("m", "p", TraceContext{}, kLongTimeoutNs).status, RpcStatus::kOk); });
  while (server.held_count() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server.answer_held();
  for (auto& t : callers) t.join();
}

TEST(BlockingClientPool, ClosesConnectionsIdleLongerThanItsTimeout) {
  TestServer server(/*answer=*/false);
  constexpr int64_t kIdleNs = 20'000'000;
  BlockingClientPool pool("127.0.0.1", server.port(), 8, LinkDelay{}, kIdleNs);
  calls_at_once(server, pool, 2);
  EXPECT_EQ(pool.open_connections(), 2u);
  std::this_thread::sleep_for(std::chrono::nanoseconds(3 * kIdleNs));
  // Both idled past the timeout: the next call closes them and opens one.
  calls_at_once(server, pool, 1);
  EXPECT_EQ(pool.open_connections(), 1u);
}

TEST(BlockingClientPool, WithoutATimeoutKeepsItsHighWaterMark) {
  TestServer server(/*answer=*/false);
  BlockingClientPool pool("127.0.0.1", server.port(), 8, LinkDelay{}, 0);
  calls_at_once(server, pool, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  calls_at_once(server, pool, 1);
  EXPECT_EQ(pool.open_connections(), 2u);
}

TEST(AllowList, ThePoolRefusesAPeerOutsideItBeforeAnySocketExists) {
  // 192.0.2.1 is RFC 5737 documentation space: refused by the rule, and no packet is sent.
  EXPECT_THROW(BlockingClientPool("192.0.2.1", 9, 1, LinkDelay{}), std::invalid_argument);
}

// The idle list both blocking pools share (svc/idle_connections.h).
TEST(IdleConnections, ReusesTheNewestAndExpiresTheOldestFirst) {
  IdleConnections<int> idle(100);  // 100 ns timeout, on the clock the test passes in
  idle.give_back(1, 1000);
  idle.give_back(2, 1050);
  idle.give_back(3, 1090);
  EXPECT_EQ(idle.take_newest(), 3);  // the most recently given back
  std::vector<int> expired;
  EXPECT_EQ(idle.take_expired(1120, expired), 1U);  // 1 was idle 120 ns; 2 only 70 ns
  EXPECT_EQ(expired, std::vector<int>{1});
  EXPECT_EQ(idle.size(), 1U);
  EXPECT_EQ(idle.take_expired(1150, expired), 0U);  // exactly the timeout: kept
  EXPECT_EQ(idle.take_expired(1151, expired), 1U);
  EXPECT_TRUE(idle.empty());
}

TEST(IdleConnections, ZeroTimeoutNeverExpires) {
  IdleConnections<std::unique_ptr<int>> idle(0);
  idle.give_back(std::make_unique<int>(7), 0);
  std::vector<std::unique_ptr<int>> out;
  EXPECT_EQ(idle.take_expired(INT64_MAX / 2, out), 0U);
  EXPECT_EQ(idle.take_all(out), 1U);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(*out[0], 7);
  EXPECT_TRUE(idle.empty());
}

}  // namespace
}  // namespace tailscope::svc
