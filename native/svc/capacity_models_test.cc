// Capacities in every concurrency model (docs/microservices.md "Capacities"),
// checked on the spans a run records — by order, never by speed: a store
// stage of capacity 1 never has two operations inside it at once (the next
// one's latency starts after the previous span ended, so consecutive span
// ends are at least one latency apart); an endpoint of capacity 1 and a call
// pool of 1 serialise what runs behind them; a group's max_in_flight k never
// has more than k calls of one instance in flight.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "svc/runtime.h"
#include "svc/testing/graph_harness.h"

namespace tailscope::svc {
namespace {

using nlohmann::json;
using testing::connect_to;
using testing::http_get;

constexpr int64_t kLockNs = 2'000'000, kOpNs = 1'000'000;

const char* kGraph = R"({
  "name": "capacities", "call_timeout_ms": 10000,
  "front": {"service": "front", "path": "/go", "endpoint": "go",
            "routes": [{"path": "/solo", "endpoint": "solo"}, {"path": "/pooled", "endpoint": "pooled"}]},
  "services": [
    {"name": "front", "endpoints": [
      {"name": "go", "stages": [
        {"store": {"span": "lock", "latency": 2000, "capacity": 1}},
        {"group": {"max_in_flight": 2, "calls": [
          {"name": "c1", "service": "leaf", "endpoint": "get", "span": "leaf_get_client"},
          {"name": "c2", "service": "leaf", "endpoint": "get", "span": "leaf_get_client"},
          {"name": "c3", "service": "leaf", "endpoint": "get", "span": "leaf_get_client"},
          {"name": "c4", "service": "leaf", "endpoint": "get", "span": "leaf_get_client"},
          {"name": "c5", "service": "leaf", "endpoint": "get", "span": "leaf_get_client"}],
          "join": ["c5", "c1", "c2", "c3", "c4"]}},
        {"store": {"span": "fan", "latency": 1000, "count": 3, "parallel": true, "capacity": 1}}]},
      {"name": "solo", "capacity": 1, "stages": [{"store": {"span": "solo_op", "latency": 1000}}]},
      {"name": "pooled", "stages": [
        {"call": {"service": "leaf", "endpoint": "slow", "span": "pooled_client", "capacity": 1}}]}]},
    {"name": "leaf", "endpoints": [
      {"name": "get", "stages": [{"store": {"span": "leaf_op", "latency": 1000}}]},
      {"name": "slow", "stages": [{"store": {"span": "slow_op", "latency": 1000}}]}]}
  ]})";

class Capacities : public ::testing::TestWithParam<std::string> {};

std::vector<const SpanRecord*> of(const std::vector<SpanRecord>& spans, const std::string& op) {
  std::vector<const SpanRecord*> out;
  for (const auto& s : spans)
    if (*s.operation == op) out.push_back(&s);
  return out;
}

// Spans ordered by start: each starts no earlier than the previous one ended.
void expect_serial(std::vector<const SpanRecord*> spans, const std::string& what) {
  std::sort(spans.begin(), spans.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
  for (size_t i = 1; i < spans.size(); ++i)
    EXPECT_GE(spans[i]->start_ns, spans[i - 1]->end_ns) << what << ": spans " << i - 1 << " and " << i << " overlap";
}

// Span ends ordered: consecutive ends at least `gap_ns` apart (the operation
// after a release starts after the previous span ended and lasts gap_ns).
void expect_ends_apart(std::vector<const SpanRecord*> spans, int64_t gap_ns, const std::string& what) {
  std::sort(spans.begin(), spans.end(), [](auto* a, auto* b) { return a->end_ns < b->end_ns; });
  for (size_t i = 1; i < spans.size(); ++i)
    EXPECT_GE(spans[i]->end_ns - spans[i - 1]->end_ns, gap_ns) << what << ": two operations inside at once";
}

TEST_P(Capacities, StagesBehindACapacityQueue) {
  Tracer::configure(1.0);
  Tracer::clear();
  constexpr int kClients = 4, kRounds = 5;
  json front, leaf;
  {
    testing::Graph g(GetParam(), {}, kGraph);
    std::vector<std::thread> clients;
    std::atomic<int> ok{0};
    for (int c = 0; c < kClients; ++c)
      clients.emplace_back([&] {
        const int fd = connect_to(g.port("front"));
        ASSERT_GE(fd, 0);
        for (int i = 0; i < kRounds; ++i)
          for (const char* path : {"/go", "/solo", "/pooled"}) ok += http_get(fd, path) == 200;
        ::close(fd);
      });
    for (auto& t : clients) t.join();
    EXPECT_EQ(ok.load(), 3 * kClients * kRounds);
    front = g.instance("front").result();
    leaf = g.instance("leaf").result();
  }  // stopped: every span complete
  const auto spans = Tracer::collect();
  Tracer::configure(0.0);
  constexpr size_t kRequests = kClients * kRounds;

  // Store capacity 1: one operation at a time, in the sequential and the parallel stage.
  const auto lock = of(spans, "lock");
  ASSERT_EQ(lock.size(), kRequests);
  expect_ends_apart(lock, kLockNs, "store 'lock' capacity 1");
  const auto fan = of(spans, "fan");
  ASSERT_EQ(fan.size(), 3 * kRequests);  // parallel: each operation its own span
  expect_ends_apart(fan, kOpNs, "parallel store 'fan' capacity 1");

  // Endpoint capacity 1: its stages never overlap across requests.
  const auto solo = of(spans, "solo_op");
  ASSERT_EQ(solo.size(), kRequests);
  expect_serial(solo, "endpoint 'solo' capacity 1");
  // Call capacity 1: what runs behind the pooled call never overlaps.
  const auto slow = of(spans, "slow_op");
  ASSERT_EQ(slow.size(), kRequests);
  expect_serial(slow, "call 'pooled_client' capacity 1");

  // max_in_flight 2: per group instance, at most 2 calls in flight (client
  // spans cover fn_start … fn_end: the call itself).
  std::map<uint64_t, std::vector<std::pair<int64_t, int>>> events;  // parent → (time, +1 start / −1 end)
  for (const SpanRecord* s : of(spans, "leaf_get_client")) {
    EXPECT_FALSE(s->error);
    events[s->parent_span_id].emplace_back(s->start_ns, +1);
    events[s->parent_span_id].emplace_back(s->end_ns, -1);
  }
  ASSERT_EQ(events.size(), kRequests);
  for (auto& [parent, ev] : events) {
    ASSERT_EQ(ev.size(), 10u);        // 5 calls per group instance
    std::sort(ev.begin(), ev.end());  // at a tie, the end (−1) sorts first
    int in_flight = 0, most = 0;
    for (const auto& [t, d] : ev) most = std::max(most, in_flight += d);
    EXPECT_LE(most, 2) << "group instance " << parent;
  }

  // The result document counts every limiter of the service.
  std::map<std::string, json> caps;
  for (const auto& c : front["capacities"]) caps[c["name"].get<std::string>()] = c;
  ASSERT_EQ(caps.size(), 4u) << front["capacities"].dump();
  EXPECT_EQ(caps["lock"]["kind"], "store");
  EXPECT_EQ(caps["lock"]["capacity"], 1);
  EXPECT_EQ(caps["lock"]["acquisitions"], kRequests);
  EXPECT_EQ(caps["fan"]["acquisitions"], 3 * kRequests);
  EXPECT_EQ(caps["solo"]["kind"], "endpoint");
  EXPECT_EQ(caps["solo"]["acquisitions"], kRequests);
  EXPECT_EQ(caps["pooled_client"]["kind"], "call");
  EXPECT_EQ(caps["pooled_client"]["acquisitions"], kRequests);
  for (const auto& [name, c] : caps) {
    EXPECT_EQ(c["timeouts"], 0) << name;
    EXPECT_LE(c["waited"].get<int64_t>(), c["acquisitions"].get<int64_t>()) << name;
    EXPECT_LE(c["wait_max_ns"].get<int64_t>(), c["wait_total_ns"].get<int64_t>()) << name;
  }
  // Three operations of one request compete for one slot: some always wait.
  EXPECT_GE(caps["fan"]["waited"].get<int64_t>(), static_cast<int64_t>(2 * kRequests));
  EXPECT_TRUE(leaf["capacities"].empty());
}

// A wait that reaches the call timeout fails the request with a timeout
// (504 at the front), and the limiter counts it.
TEST_P(Capacities, AWaitPastTheCallTimeoutIsATimeout) {
  Tracer::configure(0.0);
  const char* graph = R"({
    "name": "timeout", "call_timeout_ms": 30,
    "front": {"service": "front", "path": "/x", "endpoint": "x"},
    "services": [{"name": "front", "endpoints": [{"name": "x", "stages": [
      {"store": {"span": "lock", "latency": 200000, "capacity": 1}}]}]}]})";
  testing::Graph g(GetParam(), {}, graph);
  // The first request holds the lock for 200 ms; the second waits 30 ms for it and gives up.
  std::thread holder([&] {
    const int fd = connect_to(g.port("front"));
    http_get(fd, "/x");
    ::close(fd);
  });
  // Start the second only once the first holds the slot.
  for (;;) {
    const json c = g.instance("front").result()["capacities"][0];
    if (c["acquisitions"] == 1) break;
    std::this_thread::yield();
  }
  const int fd = connect_to(g.port("front"));
  EXPECT_EQ(http_get(fd, "/x"), 504);
  ::close(fd);
  const json c = g.instance("front").result()["capacities"][0];
  EXPECT_EQ(c["timeouts"], 1);
  EXPECT_EQ(c["acquisitions"], 1);
  holder.join();
}

INSTANTIATE_TEST_SUITE_P(Svc, Capacities,
                         ::testing::Values("std-async", "std-thread", "pool-blocking", "pool-callback", "coroutine"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace tailscope::svc
