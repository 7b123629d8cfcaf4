#include "svc/topology.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "core/clock.h"

namespace tailscope::svc {
namespace {

using nlohmann::json;

json two_services() {
  return json::parse(R"({
    "name": "t", "front": {"service": "a", "path": "/x", "endpoint": "run"},
    "services": [
      {"name": "a", "endpoints": [{"name": "run", "stages": [
        {"cpu": 5},
        {"group": {"calls": [{"name": "b1", "service": "b", "endpoint": "get"},
                             {"name": "b2", "service": "b", "endpoint": "get", "launch": "deferred"}],
                   "join": ["b2", "b1"]}}]}]},
      {"name": "b", "endpoints": [{"name": "get", "stages": [
        {"store": {"span": "s", "latency": {"kind": "lognormal", "median_us": 60, "sigma": 0.4},
                   "hit_ratio": 0.5, "on_miss": [{"cpu": 1}]}}]}]}
    ]})");
}

std::string error_of(const json& doc) {
  try {
    parse_topology(doc, "t.json");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Topology, ParsesStagesGroupsAndJoinOrder) {
  Topology t = parse_topology(two_services());
  const Endpoint& e = t.service("a").endpoints.at("run");
  ASSERT_EQ(e.stages.size(), 2u);
  EXPECT_EQ(e.server_span, "run_server");
  const CallGroup& g = e.stages[1].group;
  EXPECT_EQ(g.calls[1].launch, CallSpec::Launch::kDeferred);
  EXPECT_EQ(g.join_order, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(t.start_order(), (std::vector<std::string>{"b", "a"}));
  ASSERT_TRUE(t.front);
  EXPECT_EQ(t.front->path, "/x");
}

TEST(Topology, UnknownServiceIsNamed) {
  json d = two_services();
  d["services"][0]["endpoints"][0]["stages"][1]["group"]["calls"][0]["service"] = "nope";
  EXPECT_NE(error_of(d).find("unknown service 'nope'"), std::string::npos) << error_of(d);
}

TEST(Topology, MissingEndpointIsNamed) {
  json d = two_services();
  d["services"][0]["endpoints"][0]["stages"][1]["group"]["calls"][0]["endpoint"] = "put";
  EXPECT_NE(error_of(d).find("service 'b' has no endpoint 'put'"), std::string::npos) << error_of(d);
}

TEST(Topology, CycleIsShownAsAPath) {
  json d = two_services();
  d["services"][1]["endpoints"][0]["stages"].push_back({{"call", {{"service", "a"}, {"endpoint", "run"}}}});
  const std::string e = error_of(d);
  EXPECT_NE(e.find("call cycle"), std::string::npos) << e;
  EXPECT_NE(e.find("a.run → b.get → a.run"), std::string::npos) << e;
}

TEST(Topology, BadInputsHaveClearErrors) {
  json d = two_services();
  d["services"][0]["endpoints"][0]["stages"][0] = {{"sleep", 1}};
  EXPECT_NE(error_of(d).find("unknown stage 'sleep'"), std::string::npos);
  d = two_services();
  d["services"][0]["endpoints"][0]["stages"][1]["group"]["join"] = {"b1"};
  EXPECT_NE(error_of(d).find("join must name every call"), std::string::npos);
  d = two_services();
  d["services"][1]["endpoints"][0]["stages"][0]["store"]["latency"] = {{"kind", "pareto"}};
  EXPECT_NE(error_of(d).find("unknown distribution kind 'pareto'"), std::string::npos);
  d = two_services();
  d["front"]["endpoint"] = "missing";
  EXPECT_NE(error_of(d).find("has no endpoint 'missing'"), std::string::npos);
  d = two_services();
  d["services"].push_back(d["services"][1]);
  EXPECT_NE(error_of(d).find("defined twice"), std::string::npos);
  EXPECT_THROW(load_topology_file("/nonexistent/t.json"), std::invalid_argument);
}

// `shared` (request_factor.h): accepted anywhere a distribution is, found in a
// miss path, refused out of range with the stage named.
TEST(Topology, SharedLoadingsAreFoundAndRangeChecked) {
  json d = two_services();
  EXPECT_FALSE(parse_topology(d).has_shared_stages());
  d["services"][1]["endpoints"][0]["stages"][0]["store"]["on_miss"][0]["cpu"] = {
      {"kind", "exponential"}, {"mean_us", 3}, {"shared", 0.4}};
  EXPECT_TRUE(parse_topology(d).has_shared_stages());
  d = two_services();
  d["services"][1]["endpoints"][0]["stages"][0]["store"]["latency"]["shared"] = 0.5;
  EXPECT_TRUE(parse_topology(d).has_shared_stages());
  d["services"][1]["endpoints"][0]["stages"][0]["store"]["latency"]["shared"] = 1.5;
  const std::string e = error_of(d);
  EXPECT_NE(e.find("'shared' is 1.5; it must be a number in 0 … 0.95"), std::string::npos) << e;
  EXPECT_NE(e.find("get"), std::string::npos) << e;
}

TEST(Distribution, SamplesStayInRangeAndAreCapped) {
  LatencyDistribution d = parse_distribution(json{{"kind", "lognormal"}, {"median_us", 100}, {"sigma", 1.0}}, "d");
  for (int i = 0; i < 10000; ++i) {
    const int64_t v = d.sample_ns();
    ASSERT_GE(v, 0);
    ASSERT_LE(v, 20 * 100'000);
  }
  LatencyDistribution u = parse_distribution(json{{"kind", "uniform"}, {"min_us", 5}, {"max_us", 6}}, "u");
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(u.sample_ns() >= 5000 && u.sample_ns() <= 6000);
  EXPECT_EQ(parse_distribution(json(7), "c").sample_ns(), 7000);
}

// Issue 13: `cpu: 1e9` (1000 s) made a service ignore SIGTERM, and 1e18 µs
// overflowed the double → int64 conversion of a draw (undefined behaviour).
// Every distribution parameter is bounded at validation (kMaxStageUs, 60 s).
TEST(Distribution, EveryParameterIsBoundedAtValidation) {
  const json too_long[] = {
      json(1e9),
      json(1e18),
      json{{"kind", "constant"}, {"us", 60'000'001}},
      json{{"kind", "uniform"}, {"min_us", 1}, {"max_us", 1e12}},
      json{{"kind", "exponential"}, {"mean_us", 1e300}},
      json{{"kind", "lognormal"}, {"median_us", 1e10}, {"sigma", 0.5}},
      json{{"kind", "lognormal"}, {"median_us", 10}, {"sigma", 0.5}, {"cap_us", 1e15}},
  };
  for (const json& j : too_long) {
    try {
      parse_distribution(j, "d");
      ADD_FAILURE() << j.dump() << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("60000000 (60 s)"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_distribution(json{{"kind", "lognormal"}, {"median_us", 10}, {"sigma", -1}}, "d"),
               std::invalid_argument);
  EXPECT_THROW(parse_distribution(json{{"kind", "lognormal"}, {"median_ms", 10}, {"sigma", 1}}, "d"),
               std::invalid_argument);
  EXPECT_EQ(parse_distribution(json(60'000'000), "d").sample_ns(), kMaxStageNs);
}

TEST(Distribution, NoDrawExceedsTheStageMaximum) {
  // The default cap (20 × the median) of a 60 s median would be 20 min.
  LatencyDistribution d = parse_distribution(json{{"kind", "lognormal"}, {"median_us", 6e7}, {"sigma", 3}}, "d");
  for (int i = 0; i < 1000; ++i) ASSERT_LE(d.sample_ns(), kMaxStageNs);
}

TEST(Topology, IntegersOutsideTheirRangeAreRejectedNotWrapped) {
  json d = two_services();
  d["services"][1]["port"] = 4294967297ULL;  // 2^32 + 1 would read as port 1 through an int
  EXPECT_NE(error_of(d).find("'port' must be in 0 … 65535"), std::string::npos) << error_of(d);
  d = two_services();
  d["services"][1]["endpoints"][0]["stages"][0]["store"]["count"] = 4294967297ULL;
  EXPECT_NE(error_of(d).find("'count' must be an integer in 1 … 1000"), std::string::npos) << error_of(d);
}

// A burn of the longest allowed stage ends as soon as the service stops; the
// test runner's timeout (not a wall-clock assertion) catches a burn that
// ignores the stop.
TEST(Distribution, CpuBurnEndsWhenStopIsSet) {
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stop.store(true);
  });
  burn_cpu_ns(kMaxStageNs, stop);
  stopper.join();
  EXPECT_TRUE(stop.load());
}

// A burn is a CPU budget, not a wall-clock deadline: the thread has run at
// least the requested CPU time when it returns, however often it was preempted.
TEST(Distribution, CpuBurnConsumesItsBudgetInThreadCpuTime) {
  std::atomic<bool> stop{false};
  constexpr int64_t kBudgetNs = 3'000'000;
  const int64_t before = thread_cpu_ns();
  burn_cpu_ns(kBudgetNs, stop);
  EXPECT_GE(thread_cpu_ns() - before, kBudgetNs);
}

TEST(Topology, ParseTopologyTextReturnsTheDocumentAndNamesTheOrigin) {
  json doc;
  parse_topology_text(two_services().dump(), "x.json", &doc);
  EXPECT_EQ(doc, two_services());
  try {
    parse_topology_text("{not json", "from-python");
    ADD_FAILURE() << "bad JSON accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("from-python: not valid JSON", 0), 0u) << e.what();
  }
}

TEST(Topology, PerServiceCpusAreACheckedCpuList) {
  json doc = two_services();
  doc["services"][0]["cpus"] = "0-1,3";
  EXPECT_EQ(parse_topology(doc).service("a").cpus, "0-1,3");
  EXPECT_EQ(parse_topology(two_services()).service("b").cpus, "");  // no placement unless asked
  doc["services"][0]["cpus"] = "";
  EXPECT_NE(error_of(doc).find("no CPU: refused"), std::string::npos) << error_of(doc);
  doc["services"][0]["cpus"] = "1-0";
  EXPECT_NE(error_of(doc).find("service 'a': 'cpus': bad cpu list '1-0'"), std::string::npos) << error_of(doc);
  doc["services"][0]["cpus"] = 1;
  EXPECT_NE(error_of(doc).find("'cpus' must be a cpu list string"), std::string::npos) << error_of(doc);
}

// A topology whose service b runs one store stage `store` (b's endpoint get).
json with_store(const json& store) {
  json d = two_services();
  d["services"][1]["endpoints"][0]["stages"] = json::array({json{{"store", store}}});
  return d;
}

json real_store(const std::string& system, const std::string& op) {
  return {{"span", "s"}, {"system", system}, {"latency", 60}, {"op", op}, {"key", "user:{user}"}};
}

TEST(Topology, RealStoreOpsParseWithTheirFields) {
  json st = real_store("mongodb", "find");
  st["collection"] = "social_graph";
  st["limit"] = 20;
  st["hit_ratio"] = 0.9;
  st["on_miss"] = json::array({json{{"store",
                                     {{"span", "fill"},
                                      {"system", "redis"},
                                      {"latency", 60},
                                      {"op", "zadd"},
                                      {"key", "followers:{user}:{post}"},
                                      {"value_bytes", 16}}}}});
  Topology t = parse_topology(with_store(st));
  const StoreOp& op = t.service("b").endpoints.at("get").stages[0].store;
  EXPECT_TRUE(op.real());
  EXPECT_EQ(op.real_system, StoreSystem::kMongodb);
  EXPECT_EQ(op.op, StoreVerb::kFind);
  EXPECT_EQ(op.collection, "social_graph");
  EXPECT_EQ(op.limit, 20);
  EXPECT_EQ(op.value_bytes, 512u);  // the default
  ASSERT_EQ(op.key.parts.size(), 1u);
  EXPECT_EQ(op.key.parts[0].text, "user:");
  EXPECT_EQ(op.key.parts[0].var, KeyTemplate::Var::kUser);
  const StoreOp& fill = (*op.on_miss)[0].store;
  EXPECT_EQ(fill.op, StoreVerb::kZadd);
  EXPECT_EQ(fill.value_bytes, 16u);
  ASSERT_EQ(fill.key.parts.size(), 2u);
  EXPECT_EQ(fill.key.parts[1].text, ":");
  EXPECT_EQ(fill.key.parts[1].var, KeyTemplate::Var::kPost);
  EXPECT_TRUE(t.has_real_stores());
  EXPECT_FALSE(parse_topology(two_services()).has_real_stores());  // the simulated form is unchanged
  EXPECT_FALSE(parse_topology(two_services()).service("b").endpoints.at("get").stages[0].store.real());
}

TEST(Topology, RealStoreOpsRejectBadInputByName) {
  auto err = [](const json& st) { return error_of(with_store(st)); };
  json st = real_store("memcached", "zadd");
  EXPECT_NE(err(st).find("'op' for memcached is one of get, set (got 'zadd')"), std::string::npos) << err(st);
  st = real_store("backend", "get");
  EXPECT_NE(err(st).find("'op' needs 'system' memcached, redis or mongodb"), std::string::npos) << err(st);
  st = real_store("redis", "get");
  st.erase("op");
  EXPECT_NE(err(st).find("need 'op'"), std::string::npos) << err(st);
  st = real_store("redis", "get");
  st.erase("key");
  EXPECT_NE(err(st).find("needs a non-empty string 'key'"), std::string::npos) << err(st);
  st = real_store("redis", "get");
  st["key"] = "user:{uid}";
  EXPECT_NE(err(st).find("unknown variable {uid}"), std::string::npos) << err(st);
  st["key"] = "user:{user";
  EXPECT_NE(err(st).find("unclosed '{'"), std::string::npos) << err(st);
  st["key"] = "user }";
  EXPECT_NE(err(st).find("without '{'"), std::string::npos) << err(st);
  st["key"] = "a b";
  EXPECT_NE(err(st).find("spaces or control bytes"), std::string::npos) << err(st);
  st = real_store("redis", "get");
  st["value_bytes"] = 10;
  EXPECT_NE(err(st).find("'value_bytes' is for writes"), std::string::npos) << err(st);
  st = real_store("redis", "set");
  st["value_bytes"] = 0;
  EXPECT_NE(err(st).find("'value_bytes' must be an integer in 1"), std::string::npos) << err(st);
  st["value_bytes"] = -3;
  EXPECT_NE(err(st).find("'value_bytes' must be an integer in 1"), std::string::npos) << err(st);
  st = real_store("mongodb", "insert");
  EXPECT_NE(err(st).find("needs a non-empty string 'collection'"), std::string::npos) << err(st);
  st["collection"] = "Posts; drop table";
  EXPECT_NE(err(st).find("lower-case letters, digits and '_' only"), std::string::npos) << err(st);
  st = real_store("redis", "get");
  st["collection"] = "posts";
  EXPECT_NE(err(st).find("'collection' is for the document store"), std::string::npos) << err(st);
  st = real_store("redis", "get");
  st["limit"] = 5;
  EXPECT_NE(err(st).find("'limit' is for zrevrange"), std::string::npos) << err(st);
  st = real_store("redis", "zrevrange");
  st["limit"] = 0;
  EXPECT_NE(err(st).find("'limit' must be an integer in 1 … 10000"), std::string::npos) << err(st);
  st = real_store("redis", "set");
  st["keep"] = 100;
  EXPECT_NE(err(st).find("'keep' is for zadd"), std::string::npos) << err(st);
  st = real_store("redis", "zadd");
  for (const json& bad_keep : {json(0), json(1000001), json(2.5), json("100")}) {
    st["keep"] = bad_keep;
    EXPECT_NE(err(st).find("'keep' must be an integer in 1 … 1000000"), std::string::npos) << err(st);
  }
  st["keep"] = 100;
  st["members"] = "followers";
  EXPECT_NE(err(st).find("'keep' trims a timeline: not with 'members'"), std::string::npos) << err(st);
  st = real_store("redis", "zadd");
  st["keep"] = 100;
  EXPECT_EQ(parse_topology(with_store(st)).service("b").endpoints.at("get").stages[0].store.keep, 100);
  st.erase("op");
  EXPECT_NE(err(st).find("'keep' need 'op'"), std::string::npos) << err(st);
  st = real_store("redis", "set");
  st["hit_ratio"] = 0.5;
  st["on_miss"] = json::array({json{{"cpu", 1}}});
  EXPECT_NE(err(st).find("needs a read that can miss"), std::string::npos) << err(st);
  st = real_store("redis", "get");
  st["opp"] = "get";
  EXPECT_NE(err(st).find("unknown key 'opp'"), std::string::npos) << err(st);
}

// The follower fan-out (docs/stores.md): a read yields the list, an answer
// carries it, a call takes it, a write fans out over it or writes it whole.
TEST(Topology, FollowerListsParseAndTheirMisuseIsRefusedByName) {
  json d = two_services();
  d["services"][0]["endpoints"][0]["stages"] = json::parse(R"([
    {"call": {"service": "b", "endpoint": "get", "yields": "followers"}},
    {"store": {"span": "fan", "system": "redis", "latency": 60, "op": "zadd", "key": "ht:{follower}",
               "for_each": "followers"}}])");
  d["services"][1]["endpoints"][0]["response"] = "followers";
  d["services"][1]["endpoints"][0]["stages"] = json::parse(R"([
    {"store": {"span": "read", "system": "redis", "latency": 60, "op": "zrevrange", "key": "f:{user}",
               "yields": "followers", "hit_ratio": 0.9, "on_miss": [
      {"store": {"span": "find", "system": "mongodb", "latency": 60, "op": "find", "collection": "social_graph",
                 "key": "user:{user}", "yields": "followers"}},
      {"store": {"span": "fill", "system": "redis", "latency": 60, "op": "zadd", "key": "f:{user}",
                 "members": "followers"}}]}}])");
  const Topology t = parse_topology(d);
  const auto& a = t.service("a").endpoints.at("run");
  EXPECT_EQ(a.stages[0].call.yields, IdList::kFollowers);
  const StoreOp& fan = a.stages[1].store;
  EXPECT_EQ(fan.for_each, IdList::kFollowers);
  EXPECT_TRUE(fan.fans_out());
  EXPECT_EQ(fan.key.parts[0].var, KeyTemplate::Var::kFollower);
  const auto& b = t.service("b").endpoints.at("get");
  EXPECT_EQ(b.response, IdList::kFollowers);
  EXPECT_EQ(b.stages[0].store.yields, IdList::kFollowers);
  EXPECT_FALSE(b.stages[0].store.fans_out());
  EXPECT_EQ((*b.stages[0].store.on_miss)[0].store.yields, IdList::kFollowers);
  EXPECT_EQ((*b.stages[0].store.on_miss)[1].store.members, IdList::kFollowers);
  EXPECT_TRUE((*b.stages[0].store.on_miss)[1].store.fans_out());

  auto err = [](const json& st) { return error_of(with_store(st)); };
  json st = real_store("redis", "get");
  st["yields"] = "followers";
  EXPECT_NE(err(st).find("'yields' is for a real read that returns ids"), std::string::npos) << err(st);
  st = real_store("redis", "zrevrange");
  st["yields"] = "friends";
  EXPECT_NE(err(st).find("'yields' names the list a request carries: followers"), std::string::npos) << err(st);
  st = real_store("redis", "set");
  st["members"] = "followers";
  EXPECT_NE(err(st).find("'members' is for zadd and sadd"), std::string::npos) << err(st);
  st = real_store("redis", "zadd");
  st["members"] = "followers";
  st["value_bytes"] = 16;
  EXPECT_NE(err(st).find("no 'value_bytes'"), std::string::npos) << err(st);
  st = real_store("redis", "zadd");
  st["for_each"] = "followers";
  EXPECT_NE(err(st).find("'key' needs {follower}"), std::string::npos) << err(st);
  st["key"] = "ht:{follower}";
  st["count"] = 4;
  EXPECT_NE(err(st).find("'count' and 'parallel' do not go with"), std::string::npos) << err(st);
  st.erase("count");
  EXPECT_EQ(err(st), "");
  st.erase("for_each");
  EXPECT_NE(err(st).find("uses {follower}, which needs 'for_each: followers'"), std::string::npos) << err(st);
  st = real_store("redis", "zrevrange");
  st["key"] = "ht:{follower}";
  st["for_each"] = "followers";
  EXPECT_NE(err(st).find("'for_each' needs a real write"), std::string::npos) << err(st);
  // A call that yields needs an answer that carries the list.
  d["services"][1]["endpoints"][0].erase("response");
  EXPECT_NE(error_of(d).find("needs the callee's endpoint 'get' to have 'response: followers'"), std::string::npos)
      << error_of(d);
  d["services"][1]["endpoints"][0]["response"] = "friends";
  EXPECT_NE(error_of(d).find("'response' names the list a request carries"), std::string::npos) << error_of(d);
}

TEST(Topology, StoreServersArePlacementAndMemoryPerSystem) {
  json d = two_services();
  d["store_servers"] = {{"memcached", {{"cpus", "1"}, {"memory_mib", 32}}}, {"mongodb", {{"cpus", "0"}}}};
  Topology t = parse_topology(d);
  EXPECT_EQ(t.store_servers.at("memcached").cpus, "1");
  EXPECT_EQ(t.store_servers.at("memcached").memory_mib, 32);
  EXPECT_EQ(t.store_servers.at("mongodb").memory_mib, 0);  // default
  EXPECT_FALSE(t.store_servers.count("redis"));
  d["store_servers"] = {{"mysql", json::object()}};
  EXPECT_NE(error_of(d).find("unknown store system 'mysql'"), std::string::npos) << error_of(d);
  d["store_servers"] = {{"redis", {{"memory_mib", 0}}}};
  EXPECT_NE(error_of(d).find("store_servers.redis: 'memory_mib' must be an integer in 1 … 65536"), std::string::npos)
      << error_of(d);
  d["store_servers"] = {{"redis", {{"cpus", "2-1"}}}};
  EXPECT_NE(error_of(d).find("store_servers.redis: 'cpus': bad cpu list"), std::string::npos) << error_of(d);
  d["store_servers"] = {{"redis", {{"pin", "1"}}}};
  EXPECT_NE(error_of(d).find("unknown key 'pin'"), std::string::npos) << error_of(d);
  d["store_servers"] = 3;
  EXPECT_NE(error_of(d).find("store_servers: a mapping"), std::string::npos) << error_of(d);
}

// The capacity fields (docs/microservices.md "Capacities"): one limiter per
// endpoint, per store span name and per client span name of a service.
json with_capacities() {
  return json::parse(R"({
    "name": "q",
    "services": [
      {"name": "a", "endpoints": [
        {"name": "run", "capacity": 4, "stages": [
          {"store": {"span": "lock", "latency": 100, "capacity": 1}},
          {"group": {"max_in_flight": 2, "calls": [
             {"name": "b1", "service": "b", "endpoint": "get", "span": "pool", "capacity": 3},
             {"name": "b2", "service": "b", "endpoint": "get", "span": "pool"},
             {"name": "b3", "service": "b", "endpoint": "get"}]}},
          {"store": {"span": "fan", "latency": 100, "count": 3, "parallel": true}}]},
        {"name": "other", "stages": [{"store": {"span": "lock", "latency": 50}}]}]},
      {"name": "b", "endpoints": [{"name": "get", "stages": [{"store": {"span": "lock", "latency": 10}}]}]}
    ]})");
}

TEST(Topology, CapacitiesGetOneLimiterPerPopulation) {
  Topology t = parse_topology(with_capacities());
  const Service& a = t.service("a");
  ASSERT_EQ(a.capacities.size(), 3u);  // endpoint run, store "lock", call "pool"
  const Endpoint& run = a.endpoints.at("run");
  ASSERT_GE(run.limit_index, 0);
  EXPECT_EQ(a.capacities[static_cast<size_t>(run.limit_index)].kind, CapacitySpec::Kind::kEndpoint);
  EXPECT_EQ(a.capacities[static_cast<size_t>(run.limit_index)].capacity, 4);
  const int lock = run.stages[0].store.limit_index;
  ASSERT_GE(lock, 0);
  EXPECT_EQ(a.capacities[static_cast<size_t>(lock)].name, "lock");
  EXPECT_EQ(a.capacities[static_cast<size_t>(lock)].capacity, 1);
  // The other endpoint's stage with the same span name shares the limiter.
  EXPECT_EQ(a.endpoints.at("other").stages[0].store.limit_index, lock);
  EXPECT_EQ(a.endpoints.at("other").limit_index, -1);
  const CallGroup& g = run.stages[1].group;
  EXPECT_EQ(g.max_in_flight, 2);
  EXPECT_GE(g.calls[0].limit_index, 0);
  EXPECT_EQ(g.calls[1].limit_index, g.calls[0].limit_index);  // same client span name: same pool
  EXPECT_EQ(g.calls[2].limit_index, -1);
  EXPECT_TRUE(run.stages[2].store.parallel);
  EXPECT_EQ(run.stages[2].store.limit_index, -1);
  // Another service's stage of the same name is another process's population.
  EXPECT_TRUE(t.service("b").capacities.empty());
  EXPECT_EQ(t.service("b").endpoints.at("get").stages[0].store.limit_index, -1);
}

TEST(Topology, NoCapacityFieldsMeansNoLimiter) {
  Topology t = parse_topology(two_services());
  for (const auto& [_, s] : t.services) EXPECT_TRUE(s.capacities.empty());
}

TEST(Topology, BadCapacitiesAreRefusedWithThePlace) {
  struct Case {
    std::function<void(json&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](json& d) { d["services"][0]["endpoints"][0]["capacity"] = 0; },
       "endpoint 'run': 'capacity' must be an integer in 1 … 100000 (got 0)"},
      {[](json& d) { d["services"][0]["endpoints"][0]["stages"][0]["store"]["capacity"] = 100001; },
       "stages[0].store: 'capacity' must be an integer in 1 … 100000 (got 100001)"},
      {[](json& d) { d["services"][0]["endpoints"][0]["stages"][0]["store"]["capacity"] = 1.5; },
       "'capacity' must be an integer in 1 … 100000 (got 1.5)"},
      {[](json& d) { d["services"][0]["endpoints"][0]["stages"][1]["group"]["calls"][0]["capacity"] = -1; },
       "calls[0]: 'capacity' must be an integer in 1 … 100000 (got -1)"},
      {[](json& d) { d["services"][0]["endpoints"][0]["stages"][1]["group"]["max_in_flight"] = 0; },
       "'max_in_flight' must be an integer in 1 … 100000 (got 0)"},
      {[](json& d) { d["services"][0]["endpoints"][0]["stages"][1]["group"]["calls"][2]["launch"] = "deferred"; },
       "stages[1].group: 'max_in_flight' is for groups of async calls (call 'b3' is deferred)"},
      {[](json& d) { d["services"][0]["endpoints"][0]["stages"][2]["store"]["count"] = 1; },
       "stages[2].store: 'parallel' needs 'count' of at least 2 (got 1)"},
      {[](json& d) { d["services"][0]["endpoints"][0]["stages"][2]["store"]["parallel"] = "yes"; },
       "'parallel' must be true or false"},
      {[](json& d) {
         auto& st = d["services"][0]["endpoints"][0]["stages"][2]["store"];
         st["system"] = "redis";
         st["op"] = "get";
         st["key"] = "k:{user}";
       },
       "stages[2].store: 'parallel' is for simulated stores only: a real 'op' runs its count in a row"},
      {[](json& d) { d["services"][0]["endpoints"][1]["stages"][0]["store"]["capacity"] = 2; },
       // endpoints are visited by name: 'other' comes first
       "endpoint 'run': stages[0].store: 'capacity' 1 for store span 'lock', which has 'capacity' 2 at t.json: "
       "service 'a': endpoint 'other': stages[0].store (one limiter per span name"},
      {[](json& d) { d["services"][0]["endpoints"][0]["stages"][0]["store"]["capacty"] = 2; }, "unknown key 'capacty'"},
  };
  for (const Case& c : cases) {
    json d = with_capacities();
    c.edit(d);
    const std::string err = error_of(d);
    EXPECT_NE(err.find(c.message), std::string::npos) << "expected: " << c.message << "\n got: " << err;
  }
}

}  // namespace
}  // namespace tailscope::svc
