// The lean multiplexed channel: every call ends exactly once (ok, timeout,
// unavailable) with many in flight, calls queued in one loop iteration leave
// in one send(), a connection the peer closed is reopened by the next call,
// a late response is counted and dropped, and every service answers the ping
// method at once without running its handler. The link-delay shim holds
// frames at least their delay, keeps their order, and never holds up the loop;
// a peer outside the allow-list is refused before any socket exists. Driven
// by a server's event loop, a channel's calls start and end on that loop's thread.
#include "svc/multiplexed_channel.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "net/socket.h"
#include "svc/internal/pending_calls.h"
#include "svc/server.h"
#include "svc/testing/rpc_test_server.h"

namespace tailscope::svc {
namespace {

using testing::kLongTimeoutNs;
using testing::kShimDelayNs;
using testing::TestServer;

// Collects call results by key; wait_for(n) blocks until n calls have ended.
class Results {
 public:
  CallCallback callback(int key) {
    return [this, key](CallResult&& r) {
      std::lock_guard lock(mu_);
      ended_[key].push_back(std::move(r));
      ++total_;
      cv_.notify_all();
    };
  }
  void wait_for(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return total_ >= n; });
  }
  std::map<int, std::vector<CallResult>> ended() {
    std::lock_guard lock(mu_);
    return ended_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, std::vector<CallResult>> ended_;
  int total_ = 0;
};

struct Client {
  explicit Client(int port, size_t connections = 1) : channel(port, connections, timers, loop) {}
  ~Client() {
    channel.close();
    loop.stop();
    timers.stop();
  }
  TimerService timers;
  ChannelLoop loop;
  MultiplexedChannel channel;
};

TEST(MultiplexedChannel, ManyCallsInFlightFromManyThreadsEachEndOnceWithTheirOwnResponse) {
  TestServer server;
  Client client(server.port(), 2);
  Results results;
  constexpr int kThreads = 4, kCallsPerThread = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCallsPerThread; ++i) {
        const int key = t * kCallsPerThread + i;
        client.channel.call("echo", "payload-" + std::to_string(key), TraceContext{}, kLongTimeoutNs,
                            results.callback(key));
      }
    });
  for (auto& t : threads) t.join();
  results.wait_for(kThreads * kCallsPerThread);
  const auto ended = results.ended();
  ASSERT_EQ(ended.size(), static_cast<size_t>(kThreads * kCallsPerThread));
  for (const auto& [key, rs] : ended) {
    ASSERT_EQ(rs.size(), 1u) << key;
    EXPECT_EQ(rs[0].status, RpcStatus::kOk) << key;
    EXPECT_EQ(rs[0].payload, "payload-" + std::to_string(key));
  }
  EXPECT_EQ(server.dispatched(), kThreads * kCallsPerThread);
  EXPECT_EQ(client.loop.late_responses(), 0);
}

// A ChannelLoop driven by a server's event loop (the coroutine model's
// client side): calls made on that loop's thread are sent, answered and
// completed on that same thread, and the loop has no thread of its own.
class DrivenClient {
 public:
  explicit DrivenClient(int peer_port)
      : listen_fd_(net::make_listener("127.0.0.1", 0)),
        host_(ListenSpec{listen_fd_}, 1, counters_, [](size_t, InboundRequest&&) {}),
        loop_(ChannelLoop::Driven{}, host_.events(0)),
        channel_(peer_port, 1, timers_, loop_) {
    host_.drive(0, &loop_);
    host_.start();
  }
  ~DrivenClient() {
    host_.stop();
    channel_.close();
    loop_.stop();
    timers_.stop();
    ::close(listen_fd_);
  }
  // Runs fn on the host loop's thread and waits for it.
  void on_host(std::function<void()> fn) {
    std::promise<void> done;
    host_.post(0, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }
  MultiplexedChannel& channel() { return channel_; }
  ChannelLoop& loop() { return loop_; }

 private:
  int listen_fd_;
  ServiceCounters counters_;
  TimerService timers_;
  EventLoopServer host_;
  ChannelLoop loop_;
  MultiplexedChannel channel_;
};

TEST(DrivenChannelLoop, CallsMadeOnTheHostThreadEndThereWithTheirOwnResponse) {
  TestServer server;
  DrivenClient client(server.port());
  EXPECT_TRUE(client.loop().driven());
  constexpr int kCalls = 200;
  Results results;
  std::thread::id host_thread;
  std::mutex ids_mu;
  std::vector<std::thread::id> callback_threads;
  client.on_host([&] {
    host_thread = std::this_thread::get_id();
    for (int key = 0; key < kCalls; ++key) {
      auto record = results.callback(key);
      client.channel().call("echo", "payload-" + std::to_string(key), TraceContext{}, kLongTimeoutNs,
                            [&, record](CallResult&& r) mutable {
                              {
                                std::lock_guard lock(ids_mu);
                                callback_threads.push_back(std::this_thread::get_id());
                              }
                              record(std::move(r));
                            });
    }
  });
  results.wait_for(kCalls);
  const auto ended = results.ended();
  ASSERT_EQ(ended.size(), static_cast<size_t>(kCalls));
  for (const auto& [key, rs] : ended) {
    ASSERT_EQ(rs.size(), 1u) << key;
    EXPECT_EQ(rs[0].status, RpcStatus::kOk) << key;
    EXPECT_EQ(rs[0].payload, "payload-" + std::to_string(key));
  }
  std::lock_guard lock(ids_mu);
  ASSERT_EQ(callback_threads.size(), static_cast<size_t>(kCalls));
  for (const auto& id : callback_threads) EXPECT_EQ(id, host_thread);
  // Calls queued in one host iteration left together: far fewer sends than calls.
  EXPECT_LT(client.loop().sends(), kCalls);
  EXPECT_GE(client.loop().iterations(), 1);
}

TEST(DrivenChannelLoop, APeerThatGoesAwayFailsTheCallsInFlightAndTheNextCallReconnects) {
  auto server = std::make_unique<TestServer>(/*answer=*/false);
  const int port = server->port();
  DrivenClient client(port);
  Results results;
  client.on_host([&] {
    for (int key = 0; key < 5; ++key)
      client.channel().call("echo", "x", TraceContext{}, kLongTimeoutNs, results.callback(key));
  });
  while (server->held_count() < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server->stop();  // EOF on the client's connection
  results.wait_for(5);
  for (const auto& [key, rs] : results.ended()) {
    ASSERT_EQ(rs.size(), 1u) << key;
    EXPECT_EQ(rs[0].status, RpcStatus::kUnavailable) << key;
  }
  server->start(/*answer=*/true);
  client.on_host([&] { client.channel().call("echo", "back", TraceContext{}, kLongTimeoutNs, results.callback(99)); });
  results.wait_for(6);
  const auto again = results.ended().at(99);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].status, RpcStatus::kOk);
  EXPECT_EQ(again[0].payload, "back");
}

TEST(MultiplexedChannel, CallsQueuedInOneLoopIterationLeaveInOneSend) {
  TestServer server;
  Client client(server.port(), 1);
  Results results;
  constexpr int kBatch = 10;
  std::atomic<int64_t> sends_at_first_response{-1};
  // The first call's callback runs on the channel loop and issues a batch:
  // all of it is queued before the loop's next iteration, which sends it at once.
  client.channel.call("echo", "first", TraceContext{}, kLongTimeoutNs, [&](CallResult&& r) {
    EXPECT_EQ(r.status, RpcStatus::kOk);
    sends_at_first_response = client.loop.sends();
    for (int i = 0; i < kBatch; ++i)
      client.channel.call("echo", std::to_string(i), TraceContext{}, kLongTimeoutNs, results.callback(i));
  });
  results.wait_for(kBatch);
  for (const auto& [key, rs] : results.ended()) {
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].payload, std::to_string(key));
  }
  EXPECT_EQ(sends_at_first_response.load(), 1);
  EXPECT_EQ(client.loop.sends(), 2);  // the first call, then the whole batch in one send()
}

TEST(MultiplexedChannel, TimeoutEndsTheCallOnceAndALateResponseIsCountedAndDropped) {
  TestServer server(/*answer=*/false);
  Client client(server.port());
  Results results;
  client.channel.call("echo", "slow", TraceContext{}, 50'000'000, results.callback(0));
  results.wait_for(1);
  ASSERT_EQ(results.ended().at(0).size(), 1u);
  EXPECT_EQ(results.ended().at(0)[0].status, RpcStatus::kTimeout);
  while (server.held_count() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server.answer_held();  // the response arrives after the timeout
  while (client.loop.late_responses() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(client.loop.late_responses(), 1);
  EXPECT_EQ(results.ended().at(0).size(), 1u);  // the late response ended nothing twice
}

TEST(MultiplexedChannel, PeerClosingFailsCallsInFlightAndTheNextCallReconnects) {
  TestServer server(/*answer=*/false);
  Client client(server.port());
  Results results;
  client.channel.call("echo", "held", TraceContext{}, kLongTimeoutNs, results.callback(0));
  while (server.held_count() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server.drop_held();
  server.stop();  // closes the connection under the call
  results.wait_for(1);
  EXPECT_EQ(results.ended().at(0)[0].status, RpcStatus::kUnavailable);
  server.start(/*answer=*/true);  // same listener: the peer is back
  client.channel.call("echo", "again", TraceContext{}, kLongTimeoutNs, results.callback(1));
  results.wait_for(2);
  EXPECT_EQ(results.ended().at(0).size(), 1u);
  ASSERT_EQ(results.ended().at(1).size(), 1u);
  EXPECT_EQ(results.ended().at(1)[0].status, RpcStatus::kOk);
  EXPECT_EQ(results.ended().at(1)[0].payload, "again");
  EXPECT_EQ(server.counters().connections_accepted.load(), 2);
}

TEST(MultiplexedChannel, UnreachableOrClosedChannelFailsAtOnce) {
  const int fd = net::make_listener("127.0.0.1", 0);
  const int port = net::bound_port(fd);
  ::close(fd);  // nothing listens there now
  Client client(port);
  Results results;
  client.channel.call("echo", "x", TraceContext{}, kLongTimeoutNs, results.callback(0));
  TestServer server;
  Client closed(server.port());
  closed.channel.close();
  closed.channel.call("echo", "x", TraceContext{}, kLongTimeoutNs, results.callback(1));
  results.wait_for(2);
  EXPECT_EQ(results.ended().at(0)[0].status, RpcStatus::kUnavailable);
  EXPECT_EQ(results.ended().at(1)[0].status, RpcStatus::kUnavailable);
}

TEST(PingEndpoint, AnsweredByEveryServerShapeWithoutRunningTheHandler) {
  ServiceCounters counters;
  std::atomic<int> handled{0};
  const int listen_fd = net::make_listener("127.0.0.1", 0);
  for (const bool thread_per_connection : {false, true}) {
    std::unique_ptr<EventLoopServer> loops;
    std::unique_ptr<ThreadPerConnectionServer> threads;
    if (thread_per_connection) {
      threads = std::make_unique<ThreadPerConnectionServer>(ListenSpec{listen_fd}, counters,
                                                            [&](InboundRequest&&) { handled.fetch_add(1); });
      threads->start();
    } else {
      loops = std::make_unique<EventLoopServer>(ListenSpec{listen_fd}, 1, counters,
                                                [&](size_t, InboundRequest&&) { handled.fetch_add(1); });
      loops->start();
    }
    {
      Client client(net::bound_port(listen_fd));
      Results results;
      for (int i = 0; i < 3; ++i)
        client.channel.call(kPingMethod, {}, TraceContext{}, kLongTimeoutNs, results.callback(i));
      results.wait_for(3);
      for (const auto& [_, rs] : results.ended()) {
        ASSERT_EQ(rs.size(), 1u);
        EXPECT_EQ(rs[0].status, RpcStatus::kOk);
        EXPECT_TRUE(rs[0].payload.empty());
      }
    }
    if (threads) threads->stop();
    if (loops) loops->stop();
  }
  ::close(listen_fd);
  EXPECT_EQ(counters.pings.load(), 6);
  EXPECT_EQ(counters.requests.load(), 0);
  EXPECT_EQ(handled.load(), 0);
}

TEST(PendingCalls, ReusedSlotsGetANewIdAndAStaleIdFindsNothing) {
  internal::PendingCalls pending;
  int ran = 0;
  const uint64_t first = pending.add([&](CallResult&&) { ++ran; });
  ASSERT_TRUE(pending.take(first));
  const uint64_t second = pending.add([&](CallResult&&) { ++ran; });
  EXPECT_NE(first, second);            // same slot, next generation
  EXPECT_FALSE(pending.take(first));   // a late answer to the first call
  EXPECT_TRUE(pending.take(second));   // ends the second once
  EXPECT_FALSE(pending.take(second));  // and only once
  EXPECT_EQ(pending.size(), 0u);
}

// ---------------------------------------------------------------- link-delay shim

// ---------------------------------------------------------------- link-delay shim

TEST(LinkDelayShim, HeldRequestsLeaveInOrderAndNoEarlierThanTheirDelay) {
  TestServer server;
  TimerService timers;
  ChannelLoop loop;
  MultiplexedChannel channel("127.0.0.1", server.port(), 1, timers, loop, LinkDelay{kShimDelayNs, 5'000'000});
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> order;
  std::vector<int64_t> elapsed_ns;
  constexpr int kCalls = 50;
  for (int i = 0; i < kCalls; ++i) {
    const int64_t start = monotonic_ns();
    channel.call("m", std::to_string(i), TraceContext{}, kLongTimeoutNs, [&, start](CallResult&& r) {
      std::lock_guard lock(mu);
      EXPECT_EQ(r.status, RpcStatus::kOk);
      order.push_back(r.payload);
      elapsed_ns.push_back(monotonic_ns() - start);
      cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return order.size() == static_cast<size_t>(kCalls); });
  }
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(order[i], std::to_string(i));  // one connection, one loop: answers in request order
    EXPECT_GE(elapsed_ns[i], kShimDelayNs);  // held at least the delay (a lower bound: behaviour, not speed)
  }
  EXPECT_GE(loop.delayed_batches(), 1);
  channel.close();
  loop.stop();
  timers.stop();
}

TEST(LinkDelayShim, ADelayedChannelDoesNotHoldUpAnotherOnTheSameLoop) {
  TestServer server;
  TimerService timers;
  ChannelLoop loop;
  // Ten seconds one way: this call cannot end before the other, unless the loop waits for it.
  MultiplexedChannel slow("127.0.0.1", server.port(), 1, timers, loop, LinkDelay{10'000'000'000, 0});
  MultiplexedChannel fast("127.0.0.1", server.port(), 1, timers, loop);
  Results results;
  slow.call("m", "slow", TraceContext{}, kLongTimeoutNs, results.callback(1));
  fast.call("m", "fast", TraceContext{}, kLongTimeoutNs, results.callback(2));
  results.wait_for(1);
  auto ended = results.ended();
  ASSERT_EQ(ended.count(2), 1u);
  EXPECT_EQ(ended[2][0].status, RpcStatus::kOk);
  EXPECT_EQ(ended.count(1), 0u);
  slow.close();  // the held call ends now, once, as unavailable
  results.wait_for(2);
  EXPECT_EQ(results.ended()[1][0].status, RpcStatus::kUnavailable);
  fast.close();
  loop.stop();
  timers.stop();
  EXPECT_EQ(server.dispatched(), 1);  // the held request never left
}

TEST(LinkDelayShim, TheServerHoldsAnswersToAPeerWithADelay) {
  const int listen_fd = net::make_listener("127.0.0.1", 0);
  ServiceCounters counters;
  TimerService server_timers;
  const LinkDelayTable table = LinkDelayTable::parse("127.0.0.1=20000");
  ListenSpec spec{listen_fd};
  spec.link_delays = &table;
  spec.timers = &server_timers;
  EventLoopServer server(spec, 1, counters,
                         [](size_t, InboundRequest&& r) { r.conn->respond(r.id, RpcStatus::kOk, r.payload); });
  server.start();
  {
    Client client(net::bound_port(listen_fd));
    for (int i = 0; i < 3; ++i) {
      Results results;
      const int64_t start = monotonic_ns();
      client.channel.call("m", "x" + std::to_string(i), TraceContext{}, kLongTimeoutNs, results.callback(0));
      results.wait_for(1);
      EXPECT_GE(monotonic_ns() - start, kShimDelayNs);
      EXPECT_EQ(results.ended()[0][0].payload, "x" + std::to_string(i));
    }
    // The ping method is answered by the transport: held too, so a ping measures the link.
    Results results;
    const int64_t start = monotonic_ns();
    client.channel.call(kPingMethod, "", TraceContext{}, kLongTimeoutNs, results.callback(0));
    results.wait_for(1);
    EXPECT_EQ(results.ended()[0][0].status, RpcStatus::kOk);
    EXPECT_GE(monotonic_ns() - start, kShimDelayNs);
    // This client has no delay: its requests never took the shim's path.
    EXPECT_EQ(client.loop.delayed_batches(), 0);
  }
  server.stop();
  server_timers.stop();
  ::close(listen_fd);
}

TEST(CoarseDeadline, RoundsUpToOnePercentOfTheTimeoutWithinBounds) {
  // 1 s timeout: a 10 ms grid; never early, at most one step late.
  EXPECT_EQ(coarse_deadline_ns(5'000'000, 1'000'000'000), 1'010'000'000);
  EXPECT_EQ(coarse_deadline_ns(10'000'000, 1'000'000'000), 1'010'000'000);
  EXPECT_EQ(coarse_deadline_ns(10'000'001, 1'000'000'000), 1'020'000'000);
  // Calls started a few ms apart share one deadline: one timer wake-up for all.
  EXPECT_EQ(coarse_deadline_ns(1'000'000, 1'000'000'000), coarse_deadline_ns(9'000'000, 1'000'000'000));
  // The grid is at most 10 ms (a 60 s timeout) and at least 1 µs (a 50 µs one).
  EXPECT_EQ(coarse_deadline_ns(1, 60'000'000'000), 60'010'000'000);
  EXPECT_EQ(coarse_deadline_ns(1, 50'000), 51'000);
  for (int64_t now : {0L, 123'456'789L, 999'999'999L}) {
    const int64_t d = coarse_deadline_ns(now, 300'000'000);
    EXPECT_GE(d, now + 300'000'000);
    EXPECT_LT(d, now + 300'000'000 + 3'000'000);
  }
}

TEST(AllowList, TheChannelRefusesAPeerOutsideItBeforeAnySocketExists) {
  TimerService timers;
  ChannelLoop loop;
  // 192.0.2.1 is RFC 5737 documentation space: refused by the rule, and no packet is sent.
  EXPECT_THROW(MultiplexedChannel("192.0.2.1", 9, 1, timers, loop), std::invalid_argument);
  loop.stop();
  timers.stop();
}

}  // namespace
}  // namespace tailscope::svc
