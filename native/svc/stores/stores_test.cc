// Real stores end to end: the blocking and the non-blocking clients against
// real memcached, Redis and PostgreSQL servers started here (by the same code the supervisor uses),
// every concurrency model on a tiny graph, a store killed or hung mid-run, the
// preload, and that a stopped server leaves no process or directory behind.
// Skipped, with the reason, when a server binary is absent.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <thread>

#include "core/clock.h"
#include "net/event_loop.h"
#include "svc/service_options.h"
#include "svc/stores/docstore_client.h"
#include "svc/stores/memcached_client.h"
#include "svc/stores/redis_client.h"
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

}  // namespace
}  // namespace tailscope::svc::stores
