// Real stores end to end: the blocking clients against real memcached, Redis
// and PostgreSQL servers started here (by the same code the supervisor uses),
// every concurrency model on a tiny graph, a store killed or hung mid-run, the
// preload, and that a stopped server leaves no process or directory behind.
// Skipped, with the reason, when a server binary is absent.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <map>

#include "svc/service_options.h"
#include "svc/stores/docstore_client.h"
#include "svc/stores/memcached_client.h"
#include "svc/stores/redis_client.h"
#include "svc/stores/store_servers.h"
#include "svc/stores/store_set.h"
#include "svc/testing/graph_harness.h"

namespace tailscope::svc::stores {
namespace {

using nlohmann::json;

constexpr int64_t kTimeoutNs = 2'000'000'000;

// The three servers, started once for the whole binary (a PostgreSQL start is ~1 s).
class Servers {
 public:
  static Servers& get() {
    static Servers s;
    return s;
  }
  const std::string& skip_reason() const { return skip_; }
  const std::string& failed() const { return failed_; }
  const StoreServer& server(StoreSystem s) { return servers_.at(s); }
  std::map<StoreSystem, StoreAddress> addresses() {
    std::map<StoreSystem, StoreAddress> out;
    for (const auto& [k, v] : servers_) out[k] = v.address;
    return out;
  }
  std::string scratch() const { return scratch_; }
  ~Servers() {
    for (auto& [_, s] : servers_) stop_store_server(s);
    std::filesystem::remove_all(scratch_);
  }

 private:
  Servers() {
    for (StoreSystem s : {StoreSystem::kMemcached, StoreSystem::kRedis, StoreSystem::kMongodb}) {
      std::string missing;
      if (!find_store_binary(s, &missing)) {
        skip_ = missing;
        return;
      }
    }
    char tmpl[] = "/tmp/tailscope-stores-test-XXXXXX";
    scratch_ = ::mkdtemp(tmpl);
    try {
      for (StoreSystem s : {StoreSystem::kMemcached, StoreSystem::kRedis, StoreSystem::kMongodb}) {
        StoreServerOptions o;
        o.system = s;
        o.scratch_dir = scratch_;
        servers_[s] = start_store_server(o);
      }
      preload_docstore(servers_.at(StoreSystem::kMongodb).address, {"items"});
    } catch (const std::exception& e) {
      failed_ = e.what();  // every test that needs the servers fails with this (not a skip: they are installed)
    }
  }
  std::string skip_, failed_, scratch_;
  std::map<StoreSystem, StoreServer> servers_;
};

#define NEED_SERVERS()                                                                       \
  do {                                                                                       \
    if (!Servers::get().skip_reason().empty()) GTEST_SKIP() << Servers::get().skip_reason(); \
    ASSERT_EQ(Servers::get().failed(), "");                                                  \
  } while (0)

StoreRequest req(StoreVerb op, const std::string& key, const std::string& collection = "") {
  StoreRequest r;
  r.op = op;
  r.key = key;
  r.collection = collection;
  r.value_bytes = 100;
  r.member = 42;
  return r;
}

TEST(StoreClients, MemcachedBlockingRoundTripsAndMisses) {
  NEED_SERVERS();
  auto c = connect_memcached_blocking(Servers::get().server(StoreSystem::kMemcached).address, kTimeoutNs);
  EXPECT_EQ(c->run(req(StoreVerb::kGet, "absent:mc")).status, StoreStatus::kMiss);
  EXPECT_EQ(c->run(req(StoreVerb::kSet, "k:mc")).status, StoreStatus::kOk);
  EXPECT_EQ(c->run(req(StoreVerb::kGet, "k:mc")).status, StoreStatus::kOk);
  EXPECT_FALSE(c->broken());
}

TEST(StoreClients, RedisBlockingRoundTripsAndMisses) {
  NEED_SERVERS();
  auto c = connect_redis_blocking(Servers::get().server(StoreSystem::kRedis).address, kTimeoutNs);
  EXPECT_EQ(c->run(req(StoreVerb::kGet, "absent:r")).status, StoreStatus::kMiss);
  EXPECT_EQ(c->run(req(StoreVerb::kSet, "k:r")).status, StoreStatus::kOk);
  EXPECT_EQ(c->run(req(StoreVerb::kGet, "k:r")).status, StoreStatus::kOk);
  EXPECT_EQ(c->run(req(StoreVerb::kZrevrange, "k:z")).status, StoreStatus::kMiss);
  EXPECT_EQ(c->run(req(StoreVerb::kZadd, "k:z")).status, StoreStatus::kOk);
  EXPECT_EQ(c->run(req(StoreVerb::kZrevrange, "k:z")).status, StoreStatus::kOk);
  EXPECT_EQ(c->run(req(StoreVerb::kSadd, "k:s")).status, StoreStatus::kOk);
  EXPECT_EQ(c->run(req(StoreVerb::kSmembers, "k:s")).status, StoreStatus::kOk);
  EXPECT_EQ(c->run(req(StoreVerb::kSet, "k:z")).status, StoreStatus::kOk);  // SET replaces any type
}

TEST(StoreClients, DocstoreBlockingInsertFindUpdate) {
  NEED_SERVERS();
  auto c = connect_docstore_blocking(Servers::get().server(StoreSystem::kMongodb).address, kTimeoutNs);
  EXPECT_EQ(c->run(req(StoreVerb::kFind, "absent:d", "items")).status, StoreStatus::kMiss);
  EXPECT_EQ(c->run(req(StoreVerb::kInsert, "k:d", "items")).status, StoreStatus::kOk);
  EXPECT_EQ(c->run(req(StoreVerb::kFind, "k:d", "items")).status, StoreStatus::kOk);
  EXPECT_EQ(c->run(req(StoreVerb::kUpdate, "k:u", "items")).status, StoreStatus::kOk);  // upsert: inserts
  EXPECT_EQ(c->run(req(StoreVerb::kUpdate, "k:u", "items")).status, StoreStatus::kOk);  // then replaces
  EXPECT_EQ(c->run(req(StoreVerb::kFind, "k:u", "items")).status, StoreStatus::kOk);
  const StoreResult bad = c->run(req(StoreVerb::kFind, "k", "no_such_collection"));
  EXPECT_EQ(bad.status, StoreStatus::kUnavailable);
  EXPECT_NE(bad.error.find("no_such_collection"), std::string::npos) << bad.error;
}

TEST(StoreClients, RefusedAndHungServersFailUnavailableWithinTheTimeout) {
  // A port nobody listens on (refused) and a listener that never answers (hung).
  const int hung = net::make_listener("127.0.0.1", 0);
  const int hung_port = net::bound_port(hung);
  const int closed = net::make_listener("127.0.0.1", 0);
  const int closed_port = net::bound_port(closed);
  ::close(closed);
  constexpr int64_t kShortNs = 200'000'000;
  for (int port : {closed_port, hung_port}) {
    const StoreAddress a{"127.0.0.1", port};
    EXPECT_EQ(connect_memcached_blocking(a, kShortNs)->run(req(StoreVerb::kGet, "k")).status,
              StoreStatus::kUnavailable);
    EXPECT_EQ(connect_redis_blocking(a, kShortNs)->run(req(StoreVerb::kGet, "k")).status, StoreStatus::kUnavailable);
    EXPECT_EQ(connect_docstore_blocking(a, kShortNs)->run(req(StoreVerb::kFind, "k", "items")).status,
              StoreStatus::kUnavailable);
  }
  ::close(hung);
}

TEST(StoreSet, CountsOpsMissesAndUnavailablePerSystem) {
  NEED_SERVERS();
  auto addresses = Servers::get().addresses();
  addresses.erase(StoreSystem::kRedis);
  StoreSet set(addresses, kTimeoutNs, 2);
  EXPECT_EQ(set.run_blocking(StoreSystem::kMemcached, req(StoreVerb::kSet, "c:1")).status, StoreStatus::kOk);
  EXPECT_EQ(set.run_blocking(StoreSystem::kMemcached, req(StoreVerb::kGet, "c:absent")).status, StoreStatus::kMiss);
  const StoreResult r = set.run_blocking(StoreSystem::kRedis, req(StoreVerb::kGet, "c:1"));
  EXPECT_EQ(r.status, StoreStatus::kUnavailable);
  EXPECT_NE(r.error.find("no --store-addr for redis"), std::string::npos) << r.error;
  const json c = set.counters_json();
  EXPECT_EQ(c["memcached"]["ops"], 2);
  EXPECT_EQ(c["memcached"]["misses"], 1);
  EXPECT_EQ(c["memcached"]["errors_unavailable"], 0);
}

TEST(StoreSet, StoreAddrIsCheckedAgainstTheAllowList) {
  EXPECT_EQ(parse_store_addr("redis=127.0.0.1:6379").first, StoreSystem::kRedis);
  EXPECT_EQ(parse_store_addr("mongodb=198.18.0.2:5432").second.host, "198.18.0.2");
  auto error = [](const std::string& text) {
    try {
      parse_store_addr(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("mysql=127.0.0.1:1").find("unknown system 'mysql'"), std::string::npos);
  EXPECT_NE(error("redis").find("expected SYSTEM=HOST:PORT"), std::string::npos);
  EXPECT_FALSE(error("redis=8.8.8.8:6379").empty());  // outside loopback and the lab subnet
  EXPECT_FALSE(error("redis=127.0.0.1:70000").empty());
}

TEST(StoreOptions, EveryStoreFlagIsCheckedBeforeAnythingStarts) {
  auto error = [](ServiceOptions o) {
    o.topology = "g.json";
    try {
      check_service_options(o, false);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  ServiceOptions o;
  o.service = "a";
  EXPECT_EQ(error(o), "");  // auto, no address: simulated
  o.stores = "sometimes";
  EXPECT_NE(error(o).find("--stores: real, simulated or auto"), std::string::npos) << error(o);
  o.stores = "real";
  EXPECT_NE(error(o).find("needs --store-addr"), std::string::npos) << error(o);
  o.store_addrs = {"redis=127.0.0.1:6379"};
  EXPECT_EQ(error(o), "");
  o.store_addrs = {"redis=192.0.2.1:6379"};
  EXPECT_NE(error(o).find("--store-addr redis"), std::string::npos) << error(o);
  o.store_addrs = {};
  o.stores = "auto";
  o.store_cpus = "0";
  EXPECT_NE(error(o).find("--store-cpus needs --all"), std::string::npos) << error(o);
  o.all = true;
  o.service = "";
  o.store_cpus = "3-1";
  EXPECT_NE(error(o).find("--store-cpus: bad cpu list"), std::string::npos) << error(o);
}

TEST(StoreDraws, KeysExpandAndPostsAreFreshOnWrite) {
  KeyTemplate k;
  k.parts = {{"user:", KeyTemplate::Var::kUser}, {":post:", KeyTemplate::Var::kPost}};
  StoreDraw d{961, 79, 5};
  EXPECT_EQ(expand_key(k, d), "user:961:post:5");
  const StoreDraw w1 = draw_store_ids(true), w2 = draw_store_ids(true);
  EXPECT_NE(w1.post, w2.post);
  for (int i = 0; i < 1000; ++i) {
    const StoreDraw r = draw_store_ids(false);
    EXPECT_TRUE(r.user >= 0 && r.user < kStoreUsers && r.hotel >= 0 && r.hotel < kStoreHotels);
    EXPECT_LE(r.post, w2.post);  // a read draws a post already written
  }
}

TEST(StorePreload, SocialGraphHasReed98sSizeAndAHeavyTail) {
  const auto edges = generate_social_graph(kStoreUsers, kSocialGraphEdges, kSocialGraphSeed);
  EXPECT_EQ(edges.size(), static_cast<size_t>(kSocialGraphEdges));
  EXPECT_EQ(edges, generate_social_graph(kStoreUsers, kSocialGraphEdges, kSocialGraphSeed));  // fixed seed
  std::vector<int> degree(kStoreUsers);
  std::set<std::pair<int, int>> distinct(edges.begin(), edges.end());
  EXPECT_EQ(distinct.size(), edges.size());
  for (auto [a, b] : edges) {
    EXPECT_LT(a, b);
    ++degree[a];
    ++degree[b];
  }
  const double mean = 2.0 * kSocialGraphEdges / kStoreUsers;  // 39.1, as socfb-Reed98
  const int max = *std::max_element(degree.begin(), degree.end());
  EXPECT_GT(max, 4 * mean) << "max degree " << max;  // Reed98's is 313: heavy-tailed, not uniform
}

TEST(StorePreload, DocumentStoreHoldsUsersGraphAndHotels) {
  NEED_SERVERS();
  const StoreAddress& a = Servers::get().server(StoreSystem::kMongodb).address;
  const std::string conninfo = "host=" + a.host + " port=" + std::to_string(a.port) + " user=postgres dbname=tailscope";
  PGconn* c = PQconnectdb(conninfo.c_str());
  ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  auto count = [&](const std::string& sql) {
    PGresult* r = PQexec(c, sql.c_str());
    const int64_t n = PQresultStatus(r) == PGRES_TUPLES_OK ? std::stoll(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return n;
  };
  EXPECT_EQ(count("SELECT count(*) FROM users"), 962);
  EXPECT_EQ(count("SELECT count(*) FROM social_graph"), 962);
  EXPECT_EQ(count("SELECT sum(jsonb_array_length(doc->'followers')) FROM social_graph"), 2 * 18812);
  EXPECT_EQ(count("SELECT count(*) FROM hotels_profile"), 80);
  EXPECT_EQ(count("SELECT count(*) FROM hotels_rate"), 80);
  PQfinish(c);
}

TEST(StoreServers, AStoppedServerLeavesNoProcessAndNoDirectory) {
  NEED_SERVERS();
  for (StoreSystem system : {StoreSystem::kMemcached, StoreSystem::kRedis, StoreSystem::kMongodb}) {
    StoreServerOptions o;
    o.system = system;
    o.scratch_dir = Servers::get().scratch() + "/lifetime";
    std::filesystem::create_directories(o.scratch_dir);
    StoreServer s = start_store_server(o);
    const pid_t pid = s.pid;
    const std::string dir = s.dir;
    EXPECT_TRUE(store_server_alive(s));
    EXPECT_EQ(
        s.server.rfind(system == StoreSystem::kMongodb ? "postgresql 15" : std::string(system_name(system)) + " ", 0),
        0u)
        << s.server;
    EXPECT_TRUE(std::filesystem::exists(dir));
    const auto cpu = store_server_cpu_s(s);
    EXPECT_TRUE(cpu.has_value());
    EXPECT_TRUE(store_server_max_rss_kib(s).has_value());
    stop_store_server(s);
    EXPECT_EQ(::kill(pid, 0), -1);
    EXPECT_EQ(errno, ESRCH) << system_name(system) << " pid " << pid << " still exists";
    EXPECT_EQ(::kill(-pid, 0), -1) << system_name(system) << ": a process of its group is left";
    EXPECT_FALSE(std::filesystem::exists(dir));
  }
}

// A tiny graph whose front runs every real op (paths /all, /miss, /redis, /cpu).
const char* kStoreGraph = R"({
  "name": "stores", "call_timeout_ms": 2000,
  "front": {"service": "front", "path": "/all", "endpoint": "all",
            "routes": [{"path": "/miss", "endpoint": "miss"}, {"path": "/redis", "endpoint": "redis"},
                       {"path": "/cpu", "endpoint": "cpu"}]},
  "services": [{"name": "front", "endpoints": [
    {"name": "all", "stages": [
      {"store": {"span": "mc_set", "system": "memcached", "latency": 1, "op": "set", "key": "g:mc"}},
      {"store": {"span": "mc_get", "system": "memcached", "latency": 1, "op": "get", "key": "g:mc"}},
      {"store": {"span": "r_set", "system": "redis", "latency": 1, "op": "set", "key": "g:r"}},
      {"store": {"span": "r_get", "system": "redis", "latency": 1, "op": "get", "key": "g:r"}},
      {"store": {"span": "r_zadd", "system": "redis", "latency": 1, "op": "zadd", "key": "g:z"}},
      {"store": {"span": "r_zrev", "system": "redis", "latency": 1, "op": "zrevrange", "key": "g:z", "limit": 5}},
      {"store": {"span": "d_ins", "system": "mongodb", "latency": 1, "op": "insert", "collection": "items", "key": "g:d"}},
      {"store": {"span": "d_find", "system": "mongodb", "latency": 1, "op": "find", "collection": "items", "key": "g:d"}},
      {"store": {"span": "d_upd", "system": "mongodb", "latency": 1, "op": "update", "collection": "items", "key": "g:u"}}]},
    {"name": "miss", "stages": [
      {"store": {"span": "mc_get_absent", "system": "memcached", "latency": 1, "op": "get", "key": "absent:{post}",
                 "hit_ratio": 1.0, "on_miss": [
        {"store": {"span": "r_sadd", "system": "redis", "latency": 1, "op": "sadd", "key": "g:s"}}]}}]},
    {"name": "redis", "stages": [
      {"store": {"span": "r_get2", "system": "redis", "latency": 1, "op": "get", "key": "g:r"}}]},
    {"name": "cpu", "stages": [{"cpu": 2}]}]}]})";

RuntimeOptions real_options(std::map<StoreSystem, StoreAddress> addresses) {
  RuntimeOptions o;
  o.real_stores = true;
  o.store_addresses = std::move(addresses);
  o.store_timeout_ns = 500'000'000;
  o.workers = 2;
  o.loops = 1;
  return o;
}

class EveryModelOnRealStores : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryModelOnRealStores, RoundTripsGetSetInsertFind) {
  NEED_SERVERS();
  Tracer::configure(0.0);
  svc::testing::Graph g(GetParam(), real_options(Servers::get().addresses()), kStoreGraph);
  const int fd = svc::testing::connect_to(g.port("front"));
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(svc::testing::http_get(fd, "/all"), 200);
  EXPECT_EQ(svc::testing::http_get(fd, "/miss"), 200);
  ::close(fd);
  const json r = g.instance("front").result();
  if (GetParam() == "coroutine" || GetParam() == "pool-callback") {
    // Not written yet: the event-loop models keep the simulated waits and say so.
    EXPECT_EQ(r["stores"], "simulated");
    EXPECT_NE(r["stores_reason"].get<std::string>().find("no non-blocking store clients yet"), std::string::npos);
    GTEST_SKIP() << GetParam() << ": non-blocking store clients not written yet (simulated stores, recorded)";
  }
  EXPECT_EQ(r["stores"], "real");
  const json& c = r["store_counters"];
  EXPECT_EQ(c["memcached"]["ops"], 3 * 2 + 1);
  EXPECT_EQ(c["memcached"]["misses"], 1);   // only /miss's absent key
  EXPECT_EQ(c["redis"]["ops"], 3 * 4 + 1);  // + the on_miss sadd
  EXPECT_EQ(c["redis"]["misses"], 0);
  EXPECT_EQ(c["mongodb"]["ops"], 3 * 3);
  EXPECT_EQ(c["mongodb"]["misses"], 0);
  for (const char* s : {"memcached", "redis", "mongodb"}) EXPECT_EQ(c[s]["errors_unavailable"], 0) << s;
}

INSTANTIATE_TEST_SUITE_P(Models, EveryModelOnRealStores,
                         ::testing::Values("std-async", "std-thread", "pool-blocking", "pool-callback", "coroutine"));

TEST(RealStoreFaults, AKilledStoreFailsItsCallsUnavailableAndTheRestKeepsServing) {
  NEED_SERVERS();
  StoreServerOptions o;
  o.system = StoreSystem::kRedis;
  o.scratch_dir = Servers::get().scratch();
  std::filesystem::create_directories(o.scratch_dir + "/killed");
  o.scratch_dir += "/killed";
  StoreServer redis = start_store_server(o);
  auto addresses = Servers::get().addresses();
  addresses[StoreSystem::kRedis] = redis.address;
  for (const std::string model : {"std-thread", "pool-blocking", "std-async"}) {
    svc::testing::Graph g(model, real_options(addresses), kStoreGraph);
    const int fd = svc::testing::connect_to(g.port("front"));
    ASSERT_GE(fd, 0);
    if (redis.pid > 0) {
      EXPECT_EQ(svc::testing::http_get(fd, "/redis"), 200);
      ::kill(redis.pid, SIGKILL);  // dies mid-run
      stop_store_server(redis);    // reaps it, removes its data
    }
    for (int i = 0; i < 3; ++i) {
      const int status = svc::testing::http_get(fd, "/redis");
      EXPECT_NE(status, 0) << model << ": no answer (a hung thread?)";
      EXPECT_NE(status, 200) << model;
      EXPECT_EQ(svc::testing::http_get(fd, "/cpu"), 200) << model << ": what needs no store keeps serving";
    }
    ::close(fd);
    const json c = g.instance("front").result()["store_counters"];
    EXPECT_GE(c["redis"]["errors_unavailable"].get<int64_t>(), 3) << model;
  }
}

}  // namespace
}  // namespace tailscope::svc::stores
