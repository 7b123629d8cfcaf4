// Real stores end to end: the blocking and the non-blocking clients against
// real memcached, Redis and PostgreSQL servers started here (by the same code the supervisor uses),
// every concurrency model on a tiny graph, a store killed or hung mid-run, the
// preload, and that a stopped server leaves no process or directory behind.
// Skipped, with the reason, when a server binary is absent.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "core/clock.h"
#include "net/event_loop.h"
#include "svc/service_options.h"
#include "svc/stores/docstore_client.h"
#include "svc/stores/memcached_client.h"
#include "svc/stores/redis_client.h"
#include "svc/stores/social_graph.h"
#include "svc/stores/store_loop.h"
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

// ---------------------------------------------------------------- follower lists (docs/stores.md, "Follower fan-out")

TEST(FollowerLists, TheAnswerPayloadRoundTripsAndFillerIsNoList) {
  EXPECT_EQ(encode_followers({}), "followers:");
  EXPECT_EQ(encode_followers({3, 17, 961}), "followers:3,17,961");
  EXPECT_EQ(decode_followers("followers:3,17,961"), (std::vector<int64_t>{3, 17, 961}));
  EXPECT_EQ(decode_followers("followers:"), std::vector<int64_t>{});
  for (const char* other : {"rrrrrrrr", "", "followers:1,", "followers:,1", "followers:1;2", "followers:-4",
                            "followers:99999999999999999999"})
    EXPECT_FALSE(decode_followers(other).has_value()) << other;
}

TEST(FollowerLists, TheGeneratedGraphsFollowersAreItsEdgesBothWays) {
  const auto& followers = social_graph_followers();
  ASSERT_EQ(followers.size(), static_cast<size_t>(kStoreUsers));
  size_t ends = 0, isolated = 0;
  for (const auto& f : followers) {
    ends += f.size();
    isolated += f.empty();
  }
  EXPECT_EQ(ends, 2u * kSocialGraphEdges);
  // Every user has a follower, so every social-graph miss fills its Redis key (the fan-out test relies on it).
  EXPECT_EQ(isolated, 0u);
  for (auto [a, b] : generate_social_graph(kStoreUsers, kSocialGraphEdges, kSocialGraphSeed)) {
    const auto& fa = followers[static_cast<size_t>(a)];
    ASSERT_NE(std::find(fa.begin(), fa.end(), b), fa.end()) << a << " " << b;
  }
}

TEST(StoreClients, RedisWritesAListAsMembersReadsIdsBackAndPipelines) {
  NEED_SERVERS();
  auto c = connect_redis_blocking(Servers::get().server(StoreSystem::kRedis).address, kTimeoutNs);
  StoreRequest fill = req(StoreVerb::kZadd, "fl:blk");
  fill.members = {3, 961, 17};
  EXPECT_EQ(c->run(fill).status, StoreStatus::kOk);
  StoreRequest read = req(StoreVerb::kZrevrange, "fl:blk");
  read.read_ids = true;
  const StoreResult r = c->run(read);
  EXPECT_EQ(r.status, StoreStatus::kOk);
  EXPECT_EQ(r.ids, (std::vector<int64_t>{961, 17, 3}));  // scored by id, newest first
  read.read_ids = false;
  EXPECT_TRUE(c->run(read).ids.empty());  // ids only when asked
  // A timeline member ("post:payload") reads back as its post id.
  EXPECT_EQ(c->run(req(StoreVerb::kZadd, "fl:tl")).status, StoreStatus::kOk);
  StoreRequest timeline = req(StoreVerb::kZrevrange, "fl:tl");
  timeline.read_ids = true;
  EXPECT_EQ(c->run(timeline).ids, std::vector<int64_t>{42});
  // A pipelined batch: one result per request, in order; a failing one does not stop the rest.
  std::vector<StoreRequest> batch;
  for (int i = 0; i < 50; ++i) batch.push_back(req(StoreVerb::kZadd, "fl:pl:" + std::to_string(i)));
  batch.push_back(req(StoreVerb::kZadd, "fl:str"));
  EXPECT_EQ(c->run(req(StoreVerb::kSet, "fl:str")).status, StoreStatus::kOk);  // a string: ZADD on it is an error
  batch.push_back(req(StoreVerb::kZadd, "fl:pl:last"));
  const std::vector<StoreResult> results = c->run_pipelined(batch);
  ASSERT_EQ(results.size(), batch.size());
  for (size_t i = 0; i < results.size(); ++i)
    EXPECT_EQ(results[i].status, i == 50 ? StoreStatus::kUnavailable : StoreStatus::kOk) << i << results[i].error;
  EXPECT_NE(results[50].error.find("WRONGTYPE"), std::string::npos) << results[50].error;
  EXPECT_EQ(combine_results(results).status, StoreStatus::kUnavailable);
  EXPECT_FALSE(c->broken());
  EXPECT_EQ(c->run(timeline).status, StoreStatus::kOk);  // the connection is still in step
}

// A zadd with `keep`: the write and the trim behind it in one round trip; the
// timeline holds its `keep` newest posts (highest scores), every client alike.
StoreRequest capped(const std::string& key, int64_t post) {
  StoreRequest r = req(StoreVerb::kZadd, key);
  r.member = post;
  r.keep = 5;
  return r;
}

std::vector<int64_t> newest_first(int64_t last, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(last - i);
  return out;
}

TEST(StoreClients, RedisKeepTrimsATimelineToItsNewestPosts) {
  NEED_SERVERS();
  auto c = connect_redis_blocking(Servers::get().server(StoreSystem::kRedis).address, kTimeoutNs);
  StoreRequest read = req(StoreVerb::kZrevrange, "keep:blk");
  read.read_ids = true;
  read.limit = 100;
  for (int64_t post = 1; post <= 3; ++post) EXPECT_EQ(c->run(capped("keep:blk", post)).status, StoreStatus::kOk);
  EXPECT_EQ(c->run(read).ids, newest_first(3, 3));  // under the cap: nothing trimmed
  for (int64_t post = 4; post <= 12; ++post) EXPECT_EQ(c->run(capped("keep:blk", post)).status, StoreStatus::kOk);
  EXPECT_EQ(c->run(read).ids, newest_first(12, 5));
  // Pipelined (a fan-out): each op's write and trim, replies matched in order.
  std::vector<StoreRequest> batch;
  for (int64_t post = 13; post <= 20; ++post) batch.push_back(capped("keep:blk", post));
  batch.push_back(capped("keep:str", 1));
  EXPECT_EQ(c->run(req(StoreVerb::kSet, "keep:str")).status, StoreStatus::kOk);  // ZADD and the trim on it fail
  batch.push_back(capped("keep:blk", 21));
  const std::vector<StoreResult> results = c->run_pipelined(batch);
  ASSERT_EQ(results.size(), batch.size());
  for (size_t i = 0; i < results.size(); ++i)
    EXPECT_EQ(results[i].status, i == 8 ? StoreStatus::kUnavailable : StoreStatus::kOk) << i << results[i].error;
  EXPECT_EQ(c->run(read).ids, newest_first(21, 5));
  EXPECT_FALSE(c->broken());
}

TEST(StoreClients, DocstoreFindReadsTheSocialGraphsFollowers) {
  NEED_SERVERS();
  StoreRequest find = req(StoreVerb::kFind, "user:5", "social_graph");
  find.read_ids = true;
  auto c = connect_docstore_blocking(Servers::get().server(StoreSystem::kMongodb).address, kTimeoutNs);
  const StoreResult r = c->run(find);
  EXPECT_EQ(r.status, StoreStatus::kOk) << r.error;
  EXPECT_EQ(r.ids, social_graph_followers()[5]);  // what the preload wrote
  find.key = "user:absent";
  EXPECT_EQ(c->run(find).status, StoreStatus::kMiss);
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
    EXPECT_FALSE(stop_store_server(s).has_value()) << system_name(system) << ": the stop ended it, not a death";
    EXPECT_EQ(::kill(pid, 0), -1);
    EXPECT_EQ(errno, ESRCH) << system_name(system) << " pid " << pid << " still exists";
    EXPECT_EQ(::kill(-pid, 0), -1) << system_name(system) << ": a process of its group is left";
    EXPECT_FALSE(std::filesystem::exists(dir));
  }
}

// PostgreSQL's backends call setsid(): the CPU of a connection still open is
// found by the backend's parent, not by the process group (issue 29's soak).
TEST(StoreServers, TheCpuOfALiveBackendCountsForThePostgresServer) {
  NEED_SERVERS();
  const StoreServer& s = Servers::get().server(StoreSystem::kMongodb);
  const StoreAddress& a = s.address;
  const std::string conninfo = "host=" + a.host + " port=" + std::to_string(a.port) + " user=postgres dbname=tailscope";
  PGconn* c = PQconnectdb(conninfo.c_str());
  ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  const auto before = store_server_cpu_s(s);
  ASSERT_TRUE(before.has_value());
  // Work in the backend until the server's CPU shows ≥ 0.2 s more (bounded: 100 rounds).
  std::optional<double> after = before;
  for (int i = 0; i < 100 && after && *after < *before + 0.2; ++i) {
    PGresult* r = PQexec(c, "SELECT count(*) FROM generate_series(1, 2000000)");
    ASSERT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQerrorMessage(c);
    PQclear(r);
    after = store_server_cpu_s(s);
  }
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after, *before + 0.2) << "the live backend's CPU was not counted";
  PQfinish(c);
}

// The first PostgreSQL start keeps its fresh initdb as a template; the next
// starts copy it instead of running initdb, and reach the same served state.
TEST(StoreServers, PostgresStartsFromTheDataDirTemplateAfterTheFirstInitdb) {
  NEED_SERVERS();
  const std::string root = Servers::get().scratch() + "/template-root";
  std::filesystem::remove_all(root);
  // An older format's template of the same owner (the postgres user when run as root, as the server is).
  const passwd* pg = ::geteuid() == 0 ? ::getpwnam("postgres") : nullptr;
  const std::string older = root + "/docstore-pg15-v1-uid" + std::to_string(pg ? pg->pw_uid : ::geteuid());
  std::filesystem::create_directories(older);
  std::ofstream(older + "/PG_VERSION") << "15\n";
  auto start = [&](const std::string& name) {
    StoreServerOptions o;
    o.system = StoreSystem::kMongodb;
    o.scratch_dir = Servers::get().scratch() + "/" + name;
    o.template_dir = root;
    std::filesystem::create_directories(o.scratch_dir);
    return start_store_server(o);
  };
  auto initdb_ran = [](const StoreServer& s) {
    std::ifstream log(s.dir + "/server.log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    return text.find("The files belonging to this database system") != std::string::npos;
  };
  StoreServer first = start("template-first");
  EXPECT_TRUE(initdb_ran(first));
  EXPECT_FALSE(std::filesystem::exists(older)) << "the older format's template was kept";
  size_t templates = 0;
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << "a partial copy is left";
    EXPECT_TRUE(std::filesystem::exists(e.path() / "PG_VERSION"));
    ++templates;
  }
  EXPECT_EQ(templates, 1u);
  stop_store_server(first);

  StoreServer second = start("template-second");
  EXPECT_FALSE(initdb_ran(second)) << "the second start ran initdb again";
  EXPECT_TRUE(store_server_alive(second));
  preload_docstore(second.address, {"posts"});  // the database the first start made exists in the copy too
  const std::string dir = second.dir;
  stop_store_server(second);
  EXPECT_FALSE(std::filesystem::exists(dir));
  std::filesystem::remove_all(root);
}

// ---------------------------------------------------------------- non-blocking clients (event-loop models)

// Drives a StoreLoop on the test's thread, as a model's loop does: wait for
// readiness until the earliest deadline, hand the events over, service.
class LoopHarness {
 public:
  LoopHarness(std::map<StoreSystem, StoreAddress> addresses, int64_t timeout_ns, size_t docstore_connections = 4)
      : set_(std::move(addresses), timeout_ns, 1), stores_(set_, events_, 0, docstore_connections) {}

  // Runs the ops (all started in one loop iteration: pipelined) and drives the
  // loop until every one has ended; a bound of 30 s fails the test instead of hanging it.
  std::vector<StoreResult> run_all(StoreSystem system, const std::vector<StoreRequest>& requests) {
    std::vector<StoreResult> out(requests.size());
    size_t left = requests.size();
    for (size_t i = 0; i < requests.size(); ++i)
      stores_.run(system, requests[i], [&out, &left, i](const StoreResult& r) {
        out[i] = r;
        --left;
      });
    drive_until([&] { return left == 0; });
    EXPECT_EQ(left, 0u) << "ops still pending: the loop would have stalled";
    return out;
  }
  StoreResult run(StoreSystem system, const StoreRequest& r) { return run_all(system, {r})[0]; }
  // One batch through StoreLoop::run_batch (a fan-out): its combined outcome, or nullopt if it never ended.
  std::optional<StoreResult> run_batch(StoreSystem system, std::vector<StoreRequest> requests) {
    std::optional<StoreResult> out;
    stores_.run_batch(system, std::move(requests), [&out](const StoreResult& r) { out = r; });
    drive_until([&] { return out.has_value(); });
    return out;
  }
  // Services the loop without ops for `ns` (lets a relay's cut reach the client).
  void idle(int64_t ns) {
    const int64_t until = monotonic_ns() + ns;
    drive_until([&] { return monotonic_ns() >= until; });
  }
  StoreSet& set() { return set_; }
  StoreLoop& stores() { return stores_; }

 private:
  void drive_until(const std::function<bool()>& done) {
    const int64_t give_up_ns = monotonic_ns() + 30'000'000'000;
    int64_t due_ns = stores_.service();
    while (!done() && monotonic_ns() < give_up_ns) {
      const int64_t wait_ns = std::clamp<int64_t>(due_ns - monotonic_ns(), 0, 10'000'000);
      for (const net::ReadyEvent& e : events_.wait(wait_ns)) stores_.on_ready(e);
      due_ns = stores_.service();
    }
  }
  net::EventLoop events_;
  StoreSet set_;
  StoreLoop stores_;
};

// A TCP relay in front of a real server: cut() closes every relayed
// connection at once — to the client, its server died (EOF) — while the relay
// keeps accepting, so a later connect reaches the server again; hold(true)
// stops forwarding (a server that no longer answers).
class Relay {
 public:
  explicit Relay(StoreAddress target) : target_(std::move(target)), listener_(net::make_listener("127.0.0.1", 0)) {
    if (::pipe(wake_) != 0) throw std::runtime_error("pipe");
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stop_ = true;
    poke();
    thread_.join();
    for (auto [a, b] : pairs_) ::close(a), ::close(b);
    ::close(listener_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  StoreAddress address() const { return {"127.0.0.1", net::bound_port(listener_)}; }
  void cut() {
    cut_ = true;
    poke();
    while (cut_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void hold(bool on) {
    hold_ = on;
    poke();
  }
  int accepted() const { return accepted_; }

 private:
  void poke() { [[maybe_unused]] auto n = ::write(wake_[1], "x", 1); }
  void run() {
    char buf[64 * 1024];
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      if (!hold_)
        for (auto [a, b] : pairs_) fds.push_back({a, POLLIN, 0}), fds.push_back({b, POLLIN, 0});
      ::poll(fds.data(), fds.size(), 100);
      if (fds[1].revents) {
        [[maybe_unused]] auto n = ::read(wake_[0], buf, sizeof buf);
      }
      if (cut_) {
        for (auto [a, b] : pairs_) ::close(a), ::close(b);
        pairs_.clear();
        cut_ = false;
        continue;
      }
      if (fds[0].revents & POLLIN) {
        const int c = ::accept(listener_, nullptr, nullptr);
        const int s = c >= 0 ? svc::testing::connect_to(target_.port) : -1;
        if (c >= 0 && s >= 0) {
          pairs_.emplace_back(c, s);
          ++accepted_;
        } else if (c >= 0) {
          ::close(c);
        }
      }
      if (hold_) continue;
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        auto& [a, b] = pairs_[(i - 2) / 2];
        const int from = fds[i].fd, to = from == a ? b : a;
        const ssize_t n = ::read(from, buf, sizeof buf);
        if (n > 0) ::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL);  // loopback: small writes complete
        if (n <= 0) ::shutdown(to, SHUT_WR);
      }
    }
  }
  StoreAddress target_;
  int listener_;
  int wake_[2];
  std::vector<std::pair<int, int>> pairs_;  // (client side, server side); the relay thread's own
  std::atomic<bool> stop_{false}, cut_{false}, hold_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

TEST(AsyncStoreClients, MemcachedRoundTripsPipelinedAndMisses) {
  NEED_SERVERS();
  LoopHarness h(Servers::get().addresses(), kTimeoutNs);
  EXPECT_EQ(h.run(StoreSystem::kMemcached, req(StoreVerb::kGet, "absent:amc")).status, StoreStatus::kMiss);
  EXPECT_EQ(h.run(StoreSystem::kMemcached, req(StoreVerb::kSet, "k:amc")).status, StoreStatus::kOk);
  EXPECT_EQ(h.run(StoreSystem::kMemcached, req(StoreVerb::kGet, "k:amc")).status, StoreStatus::kOk);
  // Many ops in one iteration: one connection, answers matched in order.
  std::vector<StoreRequest> batch;
  for (int i = 0; i < 50; ++i) {
    batch.push_back(req(StoreVerb::kSet, "b:amc:" + std::to_string(i)));
    batch.push_back(req(StoreVerb::kGet, "b:amc:" + std::to_string(i)));
    batch.push_back(req(StoreVerb::kGet, "b:amc:absent:" + std::to_string(i)));
  }
  const auto results = h.run_all(StoreSystem::kMemcached, batch);
  for (size_t i = 0; i < results.size(); ++i)
    EXPECT_EQ(results[i].status, i % 3 == 2 ? StoreStatus::kMiss : StoreStatus::kOk) << i << " " << results[i].error;
  // A value larger than one read: its reply arrives in pieces.
  StoreRequest big = req(StoreVerb::kSet, "big:amc");
  big.value_bytes = 300'000;
  EXPECT_EQ(h.run(StoreSystem::kMemcached, big).status, StoreStatus::kOk);
  EXPECT_EQ(h.run(StoreSystem::kMemcached, req(StoreVerb::kGet, "big:amc")).status, StoreStatus::kOk);
  const json c = h.set().counters_json()["memcached"];
  EXPECT_EQ(c["ops"], 3 + 150 + 2);
  EXPECT_EQ(c["misses"], 1 + 50);
  EXPECT_EQ(c["errors_unavailable"], 0);
}

TEST(AsyncStoreClients, MemcachedReplyParserIsBounded) {
  size_t used = 0;
  EXPECT_EQ(parse_memcached_reply(StoreVerb::kGet, "END\r\n", &used).kind, MemcachedReply::kMiss);
  EXPECT_EQ(used, 5u);
  EXPECT_EQ(parse_memcached_reply(StoreVerb::kGet, "VALUE k 0 3\r\nabc\r\nEN", &used).kind,
            MemcachedReply::kIncomplete);
  EXPECT_EQ(parse_memcached_reply(StoreVerb::kGet, "VALUE k 0 3\r\nabc\r\nEND\r\nEND\r\n", &used).kind,
            MemcachedReply::kOk);
  EXPECT_EQ(used, 23u);  // the next reply is left for the next op
  EXPECT_EQ(parse_memcached_reply(StoreVerb::kGet, "VALUE k 0 3\r\nabcd\r\nEND\r\n", &used).kind,
            MemcachedReply::kProtocolError);
  EXPECT_EQ(parse_memcached_reply(StoreVerb::kGet, "VALUE k 0 99999999999\r\n", &used).kind,
            MemcachedReply::kProtocolError);
  EXPECT_EQ(parse_memcached_reply(StoreVerb::kSet, "STORED\r\n", &used).kind, MemcachedReply::kOk);
  EXPECT_EQ(parse_memcached_reply(StoreVerb::kSet, "SERVER_ERROR out of memory\r\n", &used).kind,
            MemcachedReply::kServerError);
  EXPECT_EQ(parse_memcached_reply(StoreVerb::kSet, "CLIENT_ERROR bad\r\n", &used).kind, MemcachedReply::kProtocolError);
  EXPECT_EQ(parse_memcached_reply(StoreVerb::kSet, std::string(2000, 'x'), &used).kind,
            MemcachedReply::kProtocolError);  // no line end within the bound
}

TEST(AsyncStoreClients, RedisRoundTripsEveryOp) {
  NEED_SERVERS();
  LoopHarness h(Servers::get().addresses(), kTimeoutNs);
  auto run = [&](StoreVerb v, const std::string& key) { return h.run(StoreSystem::kRedis, req(v, key)).status; };
  EXPECT_EQ(run(StoreVerb::kGet, "absent:ar"), StoreStatus::kMiss);
  EXPECT_EQ(run(StoreVerb::kSet, "k:ar"), StoreStatus::kOk);
  EXPECT_EQ(run(StoreVerb::kGet, "k:ar"), StoreStatus::kOk);
  EXPECT_EQ(run(StoreVerb::kZrevrange, "k:az"), StoreStatus::kMiss);
  EXPECT_EQ(run(StoreVerb::kZadd, "k:az"), StoreStatus::kOk);
  EXPECT_EQ(run(StoreVerb::kZrevrange, "k:az"), StoreStatus::kOk);
  EXPECT_EQ(run(StoreVerb::kSmembers, "k:as"), StoreStatus::kMiss);
  EXPECT_EQ(run(StoreVerb::kSadd, "k:as"), StoreStatus::kOk);
  EXPECT_EQ(run(StoreVerb::kSmembers, "k:as"), StoreStatus::kOk);
  const StoreResult wrong_type = h.run(StoreSystem::kRedis, req(StoreVerb::kZadd, "k:ar"));  // a string, not a zset
  EXPECT_EQ(wrong_type.status, StoreStatus::kUnavailable);
  EXPECT_NE(wrong_type.error.find("WRONGTYPE"), std::string::npos) << wrong_type.error;
  std::vector<StoreRequest> batch;
  for (int i = 0; i < 100; ++i) batch.push_back(req(i % 2 ? StoreVerb::kGet : StoreVerb::kSet, "b:ar"));
  for (const StoreResult& r : h.run_all(StoreSystem::kRedis, batch)) EXPECT_EQ(r.status, StoreStatus::kOk) << r.error;
  EXPECT_EQ(h.set().counters_json()["redis"]["ops"], 10 + 100);
}

TEST(AsyncStoreClients, DocstoreFindInsertUpdateOnABoundedSet) {
  NEED_SERVERS();
  LoopHarness h(Servers::get().addresses(), kTimeoutNs, 2);
  auto run = [&](StoreVerb v, const std::string& key, const std::string& coll = "items") {
    return h.run(StoreSystem::kMongodb, req(v, key, coll));
  };
  EXPECT_EQ(run(StoreVerb::kFind, "absent:ad").status, StoreStatus::kMiss);
  EXPECT_EQ(run(StoreVerb::kInsert, "k:ad").status, StoreStatus::kOk);
  EXPECT_EQ(run(StoreVerb::kFind, "k:ad").status, StoreStatus::kOk);
  EXPECT_EQ(run(StoreVerb::kUpdate, "k:adu").status, StoreStatus::kOk);  // upsert: inserts
  EXPECT_EQ(run(StoreVerb::kUpdate, "k:adu").status, StoreStatus::kOk);  // then replaces
  EXPECT_EQ(run(StoreVerb::kFind, "k:adu").status, StoreStatus::kOk);
  EXPECT_EQ(run(StoreVerb::kFind, "user:5", "users").status, StoreStatus::kOk);  // the preload
  const StoreResult bad = run(StoreVerb::kFind, "k", "no_such_collection");
  EXPECT_EQ(bad.status, StoreStatus::kUnavailable);
  EXPECT_NE(bad.error.find("no_such_collection"), std::string::npos) << bad.error;
  // More ops at once than connections: they wait in order for one and all end.
  std::vector<StoreRequest> batch;
  for (int i = 0; i < 20; ++i) batch.push_back(req(i % 2 ? StoreVerb::kFind : StoreVerb::kInsert, "b:ad", "items"));
  for (const StoreResult& r : h.run_all(StoreSystem::kMongodb, batch)) EXPECT_EQ(r.status, StoreStatus::kOk) << r.error;
  const json c = h.set().counters_json()["mongodb"];
  EXPECT_EQ(c["ops"], 8 + 20);
  EXPECT_EQ(c["errors_unavailable"], 1);
  EXPECT_EQ(c["misses"], 1);
}

TEST(AsyncStoreClients, ABatchIsPipelinedAndEndsOnceAndFindsReadFollowers) {
  NEED_SERVERS();
  LoopHarness h(Servers::get().addresses(), kTimeoutNs);
  std::vector<StoreRequest> batch;
  for (int i = 0; i < 200; ++i) batch.push_back(req(StoreVerb::kZadd, "afl:" + std::to_string(i)));
  const std::optional<StoreResult> r = h.run_batch(StoreSystem::kRedis, batch);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, StoreStatus::kOk) << r->error;
  EXPECT_EQ(h.set().counters_json()["redis"]["ops"], 200);  // each op counted
  const std::optional<StoreResult> empty = h.run_batch(StoreSystem::kRedis, {});
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->status, StoreStatus::kOk);
  EXPECT_EQ(h.set().counters_json()["redis"]["ops"], 200);  // nobody to write to: nothing sent
  StoreRequest fill = req(StoreVerb::kZadd, "afl:list");
  fill.members = {8, 6, 7};
  EXPECT_EQ(h.run(StoreSystem::kRedis, fill).status, StoreStatus::kOk);
  StoreRequest read = req(StoreVerb::kZrevrange, "afl:list");
  read.read_ids = true;
  EXPECT_EQ(h.run(StoreSystem::kRedis, read).ids, (std::vector<int64_t>{8, 7, 6}));
  StoreRequest find = req(StoreVerb::kFind, "user:961", "social_graph");
  find.read_ids = true;
  const StoreResult found = h.run(StoreSystem::kMongodb, find);
  EXPECT_EQ(found.status, StoreStatus::kOk) << found.error;
  EXPECT_EQ(found.ids, social_graph_followers()[961]);
}

TEST(AsyncStoreClients, RedisKeepTrimsATimelineAndEachOpEndsOnce) {
  NEED_SERVERS();
  LoopHarness h(Servers::get().addresses(), kTimeoutNs);
  std::vector<StoreRequest> batch;
  for (int64_t post = 1; post <= 12; ++post) batch.push_back(capped("keep:async", post));
  const std::vector<StoreResult> results = h.run_all(StoreSystem::kRedis, batch);
  ASSERT_EQ(results.size(), batch.size());  // one outcome per op, not one per command
  for (const StoreResult& r : results) EXPECT_EQ(r.status, StoreStatus::kOk) << r.error;
  StoreRequest read = req(StoreVerb::kZrevrange, "keep:async");
  read.read_ids = true;
  read.limit = 100;
  EXPECT_EQ(h.run(StoreSystem::kRedis, read).ids, newest_first(12, 5));
  EXPECT_EQ(h.run(StoreSystem::kRedis, req(StoreVerb::kSet, "keep:astr")).status, StoreStatus::kOk);
  const StoreResult wrong_type = h.run(StoreSystem::kRedis, capped("keep:astr", 1));
  EXPECT_EQ(wrong_type.status, StoreStatus::kUnavailable);
  EXPECT_NE(wrong_type.error.find("WRONGTYPE"), std::string::npos) << wrong_type.error;
  EXPECT_EQ(h.set().counters_json()["redis"]["ops"], 12 + 1 + 1 + 1);    // ops, not commands
  EXPECT_EQ(h.run(StoreSystem::kRedis, read).status, StoreStatus::kOk);  // the connection is still in step
}

TEST(AsyncStoreClients, RefusedAndHungServersFailUnavailableAtTheTimeout) {
  const int hung = net::make_listener("127.0.0.1", 0);  // accepts (the kernel's backlog), never answers
  const int closed = net::make_listener("127.0.0.1", 0);
  const int closed_port = net::bound_port(closed);
  ::close(closed);
  constexpr int64_t kShortNs = 200'000'000;
  const StoreRequest ops[] = {req(StoreVerb::kGet, "k"), req(StoreVerb::kGet, "k"),
                              req(StoreVerb::kFind, "k", "items")};
  const StoreSystem systems[] = {StoreSystem::kMemcached, StoreSystem::kRedis, StoreSystem::kMongodb};
  for (size_t i = 0; i < 3; ++i) {
    const StoreSystem s = systems[i];
    {
      LoopHarness h({{s, StoreAddress{"127.0.0.1", closed_port}}}, kShortNs);
      const StoreResult r = h.run(s, ops[i]);
      EXPECT_EQ(r.status, StoreStatus::kUnavailable) << system_name(s);
      EXPECT_NE(r.error.find("efused"), std::string::npos) << system_name(s) << ": " << r.error;
      // The next op, at once: no second connect yet (bounded reconnects), it fails now.
      const StoreResult again = h.run(s, ops[i]);
      EXPECT_EQ(again.status, StoreStatus::kUnavailable);
      EXPECT_NE(again.error.find("backing off"), std::string::npos) << system_name(s) << ": " << again.error;
      // … naming the failure it backs off from (svc/stores/reconnect_backoff.h).
      EXPECT_NE(again.error.find("efused"), std::string::npos) << system_name(s) << ": " << again.error;
      EXPECT_EQ(h.set().counters_json()[system_name(s)]["errors_unavailable"], 2);
    }
    {
      LoopHarness h({{s, StoreAddress{"127.0.0.1", net::bound_port(hung)}}}, kShortNs);
      const int64_t start_ns = monotonic_ns();
      const StoreResult r = h.run(s, ops[i]);
      EXPECT_EQ(r.status, StoreStatus::kUnavailable) << system_name(s);
      EXPECT_TRUE(r.error.find("timed out") != std::string::npos || r.error.find("timeout") != std::string::npos)
          << system_name(s) << ": " << r.error;
      EXPECT_GE(monotonic_ns() - start_ns, kShortNs) << "failed before its deadline: not the timeout";
    }
  }
  ::close(hung);
}

TEST(AsyncStoreClients, AServerGoneMidOperationFailsUnavailableAndALaterOpReconnects) {
  NEED_SERVERS();
  for (StoreSystem s : {StoreSystem::kMemcached, StoreSystem::kRedis, StoreSystem::kMongodb}) {
    Relay relay(Servers::get().server(s).address);
    LoopHarness h({{s, relay.address()}}, kTimeoutNs, 1);
    const StoreRequest op =
        s == StoreSystem::kMongodb ? req(StoreVerb::kFind, "user:1", "users") : req(StoreVerb::kSet, "k:relay");
    EXPECT_EQ(h.run(s, op).status, StoreStatus::kOk) << system_name(s);
    EXPECT_EQ(relay.accepted(), 1);
    // Mid-operation: the request is sent, the server stops answering, then its connection dies.
    relay.hold(true);
    std::optional<StoreResult> in_flight;
    h.stores().run(s, op, [&](const StoreResult& r) { in_flight = r; });
    h.idle(50'000'000);
    EXPECT_FALSE(in_flight.has_value()) << system_name(s) << ": answered while the server was held";
    relay.cut();
    relay.hold(false);
    h.idle(200'000'000);  // far less than the 2 s timeout: the EOF, not the deadline, ends it
    ASSERT_TRUE(in_flight.has_value()) << system_name(s) << ": the op outlived its connection";
    EXPECT_EQ(in_flight->status, StoreStatus::kUnavailable) << system_name(s);
    // The next op opens a new connection at once (the server is back; its last connect succeeded).
    const StoreResult later = h.run(s, op);
    EXPECT_EQ(later.status, StoreStatus::kOk) << system_name(s) << ": " << later.error;
    EXPECT_EQ(relay.accepted(), 2) << system_name(s);
    EXPECT_EQ(h.set().counters_json()[system_name(s)]["errors_unavailable"], 1) << system_name(s);
  }
}

TEST(AsyncStoreClients, ClosingFailsWhatIsInFlightAndLaterOps) {
  NEED_SERVERS();
  LoopHarness h(Servers::get().addresses(), kTimeoutNs);
  int failed = 0;
  for (StoreSystem s : {StoreSystem::kMemcached, StoreSystem::kRedis, StoreSystem::kMongodb})
    h.stores().run(s, req(s == StoreSystem::kMongodb ? StoreVerb::kFind : StoreVerb::kGet, "k", "items"),
                   [&](const StoreResult& r) { failed += r.status == StoreStatus::kUnavailable; });
  h.stores().close();
  EXPECT_EQ(failed, 3);
  EXPECT_EQ(h.run(StoreSystem::kRedis, req(StoreVerb::kGet, "k")).error, "store client closed");
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
  EXPECT_EQ(r["stores"], "real");
  if (GetParam() == "coroutine" || GetParam() == "pool-callback") {  // the event-loop models' policy is recorded
    EXPECT_EQ(r["model_details"]["store_clients"]["redis_connections_per_loop"], 1) << r["model_details"];
  }
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
  for (const std::string model : {"std-thread", "pool-blocking", "std-async", "coroutine", "pool-callback"}) {
    svc::testing::Graph g(model, real_options(addresses), kStoreGraph);
    const int fd = svc::testing::connect_to(g.port("front"));
    ASSERT_GE(fd, 0);
    if (redis.pid > 0) {
      EXPECT_EQ(svc::testing::http_get(fd, "/redis"), 200);
      ::kill(redis.pid, SIGKILL);  // dies mid-run
      // Reaps it (exited or still exiting), removes its data, and says it died by itself.
      const auto died = stop_store_server(redis);
      ASSERT_TRUE(died.has_value());
      EXPECT_TRUE(WIFSIGNALED(*died) && WTERMSIG(*died) == SIGKILL) << *died;
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

// A store that accepts and never answers: an event-loop model's request that
// needs it fails unavailable at the store timeout, and the loop meanwhile
// keeps serving what needs no store (one loop: a blocked loop would hold /cpu).
TEST(RealStoreFaults, AHungStoreDoesNotStallAnEventLoop) {
  const int hung = net::make_listener("127.0.0.1", 0);
  for (const std::string model : {"coroutine", "pool-callback"}) {
    RuntimeOptions o = real_options({{StoreSystem::kRedis, StoreAddress{"127.0.0.1", net::bound_port(hung)}}});
    o.store_timeout_ns = 1'000'000'000;
    svc::testing::Graph g(model, o, kStoreGraph);
    const int waiting = svc::testing::connect_to(g.port("front"));
    const int other = svc::testing::connect_to(g.port("front"));
    ASSERT_GE(waiting, 0);
    ASSERT_GE(other, 0);
    const std::string get = "GET /redis HTTP/1.1\r\nHost: test\r\n\r\n";
    ASSERT_EQ(::send(waiting, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
    EXPECT_EQ(svc::testing::http_get(other, "/cpu"), 200) << model;
    pollfd p{waiting, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0) << model << ": the store op ended before its timeout";
    char buf[4096];
    const ssize_t n = ::recv(waiting, buf, sizeof buf, 0);  // the answer at the store timeout (SO_RCVTIMEO 5 s)
    ASSERT_GT(n, 12) << model << ": no answer (a hung handler?)";
    EXPECT_EQ(std::string(buf + 9, 3), "502") << model;  // unavailable (transport.cc http_status_for)
    ::close(waiting);
    ::close(other);
    const json c = g.instance("front").result()["store_counters"]["redis"];
    EXPECT_EQ(c["errors_unavailable"], 1) << model;
  }
  ::close(hung);
}

// ---------------------------------------------------------------- the follower fan-out, end to end

// socialnet's home-timeline write in two services: home calls graph's
// get_followers, which reads `fol_TAG:{user}` from Redis (on a miss: the
// document in social_graph, then fills the key with the list) and answers
// with the ids; home ZADDs the post into `ht_TAG:{follower}` for each.
std::string fan_out_graph(const std::string& tag) {
  std::string text = R"({"name": "fanout", "call_timeout_ms": 5000,
  "front": {"service": "home", "path": "/post", "endpoint": "post"},
  "services": [
   {"name": "home", "endpoints": [{"name": "post", "stages": [
      {"call": {"service": "graph", "endpoint": "get_followers", "span": "get_followers_client", "yields": "followers"}},
      {"store": {"span": "write_home_timeline_redis_update_client", "system": "redis", "latency": 1, "op": "zadd",
                 "key": "ht_TAG:{follower}", "value_bytes": 16, "for_each": "followers"}}]}]},
   {"name": "graph", "endpoints": [{"name": "get_followers", "response": "followers", "stages": [
      {"store": {"span": "social_graph_redis_get_client", "system": "redis", "latency": 1, "op": "zrevrange",
                 "key": "fol_TAG:{user}", "limit": 1000, "yields": "followers", "hit_ratio": 0.9, "on_miss": [
        {"store": {"span": "social_graph_mongo_find_client", "system": "mongodb", "latency": 1, "op": "find",
                   "collection": "social_graph", "key": "user:{user}", "yields": "followers"}},
        {"store": {"span": "social_graph_redis_insert_client", "system": "redis", "latency": 1, "op": "zadd",
                   "key": "fol_TAG:{user}", "members": "followers"}}]}}]}]}]})";
  for (size_t at; (at = text.find("TAG")) != std::string::npos;) text.replace(at, 3, tag);
  return text;
}

// The test's own view of Redis: every home timeline's size (KEYS, then the ZCARDs pipelined).
class RedisProbe {
 public:
  explicit RedisProbe(const StoreAddress& a) : ctx_(redisConnect(a.host.c_str(), a.port)) {}
  ~RedisProbe() { redisFree(ctx_); }
  bool ok() const { return ctx_ && !ctx_->err; }
  std::map<int64_t, int64_t> timeline_sizes(const std::string& tag) {
    std::map<int64_t, int64_t> out;
    const std::string prefix = "ht_" + tag + ":";
    auto* keys = static_cast<redisReply*>(redisCommand(ctx_, "KEYS %s*", prefix.c_str()));
    std::vector<int64_t> ids;
    for (size_t i = 0; keys && i < keys->elements; ++i) {
      ids.push_back(std::stoll(std::string(keys->element[i]->str).substr(prefix.size())));
      redisAppendCommand(ctx_, "ZCARD %s", keys->element[i]->str);
    }
    if (keys) freeReplyObject(keys);
    for (int64_t id : ids) {
      void* raw = nullptr;
      if (redisGetReply(ctx_, &raw) != REDIS_OK) break;
      out[id] = static_cast<redisReply*>(raw)->integer;
      freeReplyObject(raw);
    }
    return out;
  }
  // Replaces the social graph's cache of every user with one made-up follower, 1 000 000 + user:
  // a request that hits it fans out to that one id, which no preloaded user has.
  void fill_every_follower_list(const std::string& tag) {
    for (int u = 0; u < kStoreUsers; ++u) {
      redisAppendCommand(ctx_, "DEL fol_%s:%d", tag.c_str(), u);
      redisAppendCommand(ctx_, "ZADD fol_%s:%d %d %d", tag.c_str(), u, 1'000'000 + u, 1'000'000 + u);
    }
    for (int i = 0; i < 2 * kStoreUsers; ++i) {
      void* raw = nullptr;
      if (redisGetReply(ctx_, &raw) == REDIS_OK) freeReplyObject(raw);
    }
  }

 private:
  redisContext* ctx_;
};

// What one request did to the home timelines: the followers that got a post, and how many ZADDs landed.
struct TimelineWrites {
  std::set<int64_t> followers;
  int64_t zadds = 0;
};
TimelineWrites writes_between(const std::map<int64_t, int64_t>& before, const std::map<int64_t, int64_t>& after) {
  TimelineWrites w;
  for (const auto& [id, size] : after) {
    auto it = before.find(id);
    const int64_t grew = size - (it == before.end() ? 0 : it->second);
    if (grew > 0) w.followers.insert(id);
    w.zadds += grew;
  }
  return w;
}

// The user whose follower list is exactly `followers` in the generated graph; -1 when none.
int author_with(const std::set<int64_t>& followers) {
  const auto& graph = social_graph_followers();
  for (int u = 0; u < kStoreUsers; ++u)
    if (std::set<int64_t>(graph[u].begin(), graph[u].end()) == followers) return u;
  return -1;
}

class FollowerFanOutOnRealStores : public ::testing::TestWithParam<std::string> {};

// A user with N followers in the preloaded graph: exactly N ZADDs, to N
// distinct home timelines — the followers the social graph read (the
// document on a miss, Redis on a hit) — pipelined in one span whose
// tailscope.followers is N.
TEST_P(FollowerFanOutOnRealStores, EveryFollowerTheSocialGraphReadGetsThePostOnce) {
  NEED_SERVERS();
  std::string tag = GetParam();
  std::replace(tag.begin(), tag.end(), '-', '_');
  RedisProbe redis(Servers::get().server(StoreSystem::kRedis).address);
  ASSERT_TRUE(redis.ok());
  Tracer::configure(1.0);
  Tracer::clear();
  std::vector<int64_t> fan_outs;  // per request: the followers written to
  {
    svc::testing::Graph g(GetParam(), real_options(Servers::get().addresses()), fan_out_graph(tag).c_str());
    const int fd = svc::testing::connect_to(g.port("home"));
    ASSERT_GE(fd, 0);
    auto counter = [&](const char* service, const char* system) {
      return g.instance(service).result()["store_counters"][system]["ops"].get<int64_t>();
    };
    // Two requests on an empty cache: each misses, finds its author's document and fans out to its followers.
    for (int i = 0; i < 2; ++i) {
      const auto before = redis.timeline_sizes(tag);
      const int64_t home_ops = counter("home", "redis"), finds = counter("graph", "mongodb");
      ASSERT_EQ(svc::testing::http_get(fd, "/post"), 200);
      const TimelineWrites w = writes_between(before, redis.timeline_sizes(tag));
      const int author = author_with(w.followers);
      ASSERT_GE(author, 0) << "request " << i << ": the " << w.followers.size()
                           << " timelines written are no user's followers";
      const int64_t n = static_cast<int64_t>(social_graph_followers()[author].size());
      EXPECT_EQ(w.zadds, n) << "one ZADD per follower, each to its own timeline";
      EXPECT_EQ(counter("home", "redis") - home_ops, n);
      EXPECT_LE(counter("graph", "mongodb") - finds, 1);  // a miss found the document; a hit (same author) did not
      fan_outs.push_back(n);
    }
    // Every follower list cached, each with one made-up follower: a hit fans out to the list Redis holds.
    redis.fill_every_follower_list(tag);
    const auto before = redis.timeline_sizes(tag);
    const int64_t finds = counter("graph", "mongodb");
    ASSERT_EQ(svc::testing::http_get(fd, "/post"), 200);
    const TimelineWrites w = writes_between(before, redis.timeline_sizes(tag));
    ASSERT_EQ(w.followers.size(), 1u);
    EXPECT_GE(*w.followers.begin(), 1'000'000) << "the hit fanned out to the preloaded graph, not Redis' list";
    EXPECT_EQ(w.zadds, 1);
    EXPECT_EQ(counter("graph", "mongodb"), finds);
    fan_outs.push_back(1);
    ::close(fd);
    const json home = g.instance("home").result();
    EXPECT_EQ(home["store_counters"]["redis"]["errors_unavailable"], 0);
  }
  // The fan-out's span: one per request, DeathStarBench's name, the follower count as its attribute.
  std::vector<int64_t> spans;
  for (const SpanRecord& s : Tracer::collect())
    if (s.operation && *s.operation == "write_home_timeline_redis_update_client") {
      spans.push_back(s.followers);
      EXPECT_STREQ(s.db_system, "redis");
    }
  Tracer::configure(0.0);
  std::sort(spans.begin(), spans.end());
  std::sort(fan_outs.begin(), fan_outs.end());
  EXPECT_EQ(spans, fan_outs);
}

INSTANTIATE_TEST_SUITE_P(Models, FollowerFanOutOnRealStores,
                         ::testing::Values("std-async", "std-thread", "pool-blocking", "pool-callback", "coroutine"));

// Simulated stores: the fan-out is as wide as the drawn author's follower
// count in the same generated graph — the degree distribution, not a constant —
// nothing is sent, and one latency draw stands for the pipelined round trip.
TEST(FollowerFanOut, SimulatedStoresFanOutByTheAuthorsDegree) {
  const Topology topology = parse_topology(json::parse(fan_out_graph("sim")), "fanout");
  TimerService timers;
  ServiceRuntime rt(topology, "home", {{"graph", 1}, {"home", 2}}, RuntimeOptions{}, timers);
  const StoreOp& op = topology.service("home").endpoints.at("post").stages[1].store;
  ASSERT_TRUE(op.fans_out());
  std::set<int64_t> widths;
  for (int i = 0; i < 300; ++i) {
    RequestScope rs;
    SpanRecord span;
    const ServiceRuntime::FanOut fan = rt.fan_out(rs, op, span);
    EXPECT_EQ(fan.followers, static_cast<int64_t>(social_graph_followers()[rs.last_draw.user].size()));
    EXPECT_EQ(span.followers, fan.followers);
    EXPECT_TRUE(fan.requests.empty());
    EXPECT_GT(fan.simulated_ns(op), 0);
    widths.insert(fan.followers);
  }
  EXPECT_GT(widths.size(), 10u) << "a constant fan-out, not the graph's degrees";
  // A request that carries a list (a real get_followers answer) fans out over it, not the graph.
  RequestScope rs;
  rs.followers = std::vector<int64_t>{7, 8, 9};
  SpanRecord span;
  EXPECT_EQ(rt.fan_out(rs, op, span).followers, 3);
  rs.followers = std::vector<int64_t>{};
  const ServiceRuntime::FanOut none = rt.fan_out(rs, op, span);
  EXPECT_EQ(none.followers, 0);
  EXPECT_EQ(none.simulated_ns(op), 0) << "nobody to write to: no round trip";
  timers.stop();
}

// The simulated graph end to end, one thread model and one event-loop model:
// the span of every request carries a follower count that is some user's degree.
TEST(FollowerFanOut, SimulatedGraphSpansCarryAGraphDegree) {
  std::set<int64_t> degrees;
  for (const auto& f : social_graph_followers()) degrees.insert(static_cast<int64_t>(f.size()));
  for (const std::string model : {"std-thread", "coroutine"}) {
    Tracer::configure(1.0);
    Tracer::clear();
    RuntimeOptions o;
    o.workers = 2;
    o.loops = 1;
    {
      svc::testing::Graph g(model, o, fan_out_graph("sim").c_str());
      const int fd = svc::testing::connect_to(g.port("home"));
      ASSERT_GE(fd, 0);
      for (int i = 0; i < 5; ++i) EXPECT_EQ(svc::testing::http_get(fd, "/post"), 200) << model;
      ::close(fd);
      EXPECT_EQ(g.instance("home").result()["stores"], "simulated");
    }
    int spans = 0;
    for (const SpanRecord& s : Tracer::collect())
      if (s.operation && *s.operation == "write_home_timeline_redis_update_client") {
        ++spans;
        EXPECT_EQ(degrees.count(s.followers), 1u) << model << ": " << s.followers;
      }
    EXPECT_EQ(spans, 5) << model;
  }
  Tracer::configure(0.0);
}

}  // namespace
}  // namespace tailscope::svc::stores
