#include "svc/stores/store_set.h"

#include <unistd.h>

#include <chrono>
#include <random>
#include <stdexcept>

#include "core/clock.h"
#include "svc/peer_addresses.h"
#include "svc/stores/docstore_client.h"
#include "svc/stores/memcached_client.h"
#include "svc/stores/redis_client.h"

namespace tailscope::svc::stores {
namespace {

std::mt19937_64& rng() {
  thread_local std::mt19937_64 g(std::random_device{}());
  return g;
}

// {post} ids: fresh ones count up from a base unique to the process (the pid in
// the high bits), so two services' posts never collide; reads draw among the
// last kRecentPosts written by this process.
constexpr int64_t kRecentPosts = 1024;
std::atomic<int64_t> g_posts_written{0};
int64_t post_base() {
  static const int64_t base = static_cast<int64_t>(getpid()) << 32;
  return base;
}

size_t index_of(StoreSystem s) { return static_cast<size_t>(s); }

}  // namespace

std::string store_payload(size_t bytes) { return std::string(bytes, 'v'); }

StoreResult combine_results(const std::vector<StoreResult>& results) {
  StoreResult out{StoreStatus::kOk};
  for (const StoreResult& r : results) {
    if (r.status == StoreStatus::kUnavailable) return {r.status, r.error};
    if (r.status == StoreStatus::kMiss) out.status = StoreStatus::kMiss;
  }
  return out;
}

std::vector<StoreResult> BlockingStoreConnection::run_pipelined(const std::vector<StoreRequest>& requests) {
  std::vector<StoreResult> out;
  out.reserve(requests.size());
  for (const StoreRequest& r : requests)
    out.push_back(broken() ? StoreResult{StoreStatus::kUnavailable, "connection broken"} : run(r));
  return out;
}

const char* system_name(StoreSystem s) {
  switch (s) {
    case StoreSystem::kMemcached:
      return "memcached";
    case StoreSystem::kRedis:
      return "redis";
    case StoreSystem::kMongodb:
      return "mongodb";
    case StoreSystem::kNone:
      break;
  }
  return "none";
}

const char* db_system_tag(StoreSystem s) { return s == StoreSystem::kMongodb ? "postgresql" : system_name(s); }

std::pair<StoreSystem, StoreAddress> parse_store_addr(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos)
    throw std::invalid_argument("--store-addr '" + text +
                                "': expected SYSTEM=HOST:PORT (SYSTEM memcached, redis, mongodb)");
  const std::string name = text.substr(0, eq);
  StoreSystem system = StoreSystem::kNone;
  for (StoreSystem s : {StoreSystem::kMemcached, StoreSystem::kRedis, StoreSystem::kMongodb})
    if (name == system_name(s)) system = s;
  if (system == StoreSystem::kNone)
    throw std::invalid_argument("--store-addr '" + text + "': unknown system '" + name +
                                "' (memcached, redis, mongodb)");
  // A store is dialled at the numeric address a name resolved to at start (the clients take numbers).
  const PeerAddress at = parse_address_port(text.substr(eq + 1), "--store-addr " + name);
  return {system, StoreAddress{at.address.empty() ? at.host : at.address, at.port}};
}

StoreDraw draw_store_ids(bool write) {
  StoreDraw d;
  d.user = std::uniform_int_distribution<int>(0, kStoreUsers - 1)(rng());
  d.hotel = std::uniform_int_distribution<int>(0, kStoreHotels - 1)(rng());
  if (write) {
    d.post = post_base() + g_posts_written.fetch_add(1, std::memory_order_relaxed);
  } else {
    const int64_t written = g_posts_written.load(std::memory_order_relaxed);
    const int64_t lo = std::max<int64_t>(0, written - kRecentPosts);
    // Before any write: a fresh id no one has written (a miss).
    d.post = post_base() + (written == 0 ? 0 : std::uniform_int_distribution<int64_t>(lo, written - 1)(rng()));
  }
  return d;
}

std::string expand_key(const KeyTemplate& key, const StoreDraw& draw) {
  std::string out;
  for (const auto& p : key.parts) {
    out += p.text;
    switch (p.var) {
      case KeyTemplate::Var::kUser:
        out += std::to_string(draw.user);
        break;
      case KeyTemplate::Var::kHotel:
        out += std::to_string(draw.hotel);
        break;
      case KeyTemplate::Var::kPost:
        out += std::to_string(draw.post);
        break;
      case KeyTemplate::Var::kFollower:
        out += std::to_string(draw.follower);
        break;
      case KeyTemplate::Var::kNone:
        break;
    }
  }
  return out;
}

StoreRequest make_request(const StoreOp& op, const StoreDraw& draw) {
  StoreRequest r;
  r.op = op.op;
  r.key = expand_key(op.key, draw);
  r.collection = op.collection;
  r.value_bytes = op.value_bytes;
  r.limit = op.limit;
  r.keep = op.keep;
  r.member = draw.post;
  r.read_ids = op.yields != IdList::kNone;
  return r;
}

StoreSet::StoreSet(std::map<StoreSystem, StoreAddress> addresses, int64_t timeout_ns, size_t max_connections,
                   int64_t idle_timeout_ns)
    : addresses_(std::move(addresses)),
      timeout_ns_(timeout_ns),
      max_connections_(std::max<size_t>(1, max_connections)),
      idle_timeout_ns_(std::max<int64_t>(0, idle_timeout_ns)) {
  for (Pool& p : pools_) p.idle = IdleConnections<Connection>(idle_timeout_ns_);
}

StoreSet::~StoreSet() = default;

const StoreAddress* StoreSet::address(StoreSystem system) const {
  auto it = addresses_.find(system);
  return it == addresses_.end() ? nullptr : &it->second;
}

void StoreSet::count(StoreSystem system, const StoreResult& r) {
  SystemCounters& c = counters_[index_of(system)];
  c.ops.fetch_add(1, std::memory_order_relaxed);
  if (r.status == StoreStatus::kUnavailable) c.errors_unavailable.fetch_add(1, std::memory_order_relaxed);
  if (r.status == StoreStatus::kMiss) c.misses.fetch_add(1, std::memory_order_relaxed);
}

StoreSet::Connection StoreSet::take(StoreSystem system, Pool& pool, std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout_ns_);
  std::vector<Connection> expired;  // closed when this function returns, outside the lock
  {
    std::unique_lock lock(pool.mu);
    const size_t n = pool.idle.take_expired(monotonic_ns(), expired);
    pool.open -= n;
    counters_[index_of(system)].connections_closed_idle.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
    for (;;) {
      if (!pool.idle.empty()) return pool.idle.take_newest();
      if (pool.open < max_connections_) break;
      if (pool.freed.wait_until(lock, deadline) == std::cv_status::timeout && pool.idle.empty() &&
          pool.open >= max_connections_) {
        *error = "connection pool exhausted until the call timeout";
        return nullptr;
      }
    }
    ++pool.open;  // reserved; opened outside the lock (a connect may take up to the timeout)
  }
  const StoreAddress& a = addresses_.at(system);
  switch (system) {
    case StoreSystem::kMemcached:
      return connect_memcached_blocking(a, timeout_ns_);
    case StoreSystem::kRedis:
      return connect_redis_blocking(a, timeout_ns_);
    case StoreSystem::kMongodb:
      return connect_docstore_blocking(a, timeout_ns_);
    case StoreSystem::kNone:
      break;
  }
  return nullptr;
}

void StoreSet::give_back(Pool& pool, Connection conn) {
  {
    std::lock_guard lock(pool.mu);
    if (conn && !conn->broken())
      pool.idle.give_back(std::move(conn), monotonic_ns());
    else
      --pool.open;
  }
  pool.freed.notify_one();
  // A broken connection is destroyed here, outside the lock.
}

StoreSet::Connection StoreSet::connection(StoreSystem system, std::string* error) {
  if (!address(system)) {
    *error = std::string("no --store-addr for ") + system_name(system);
    return nullptr;
  }
  return take(system, pools_[index_of(system)], error);
}

StoreResult StoreSet::run_blocking(StoreSystem system, const StoreRequest& request) {
  std::string error;
  auto conn = connection(system, &error);
  StoreResult r = conn ? conn->run(request) : StoreResult{StoreStatus::kUnavailable, error};
  if (conn) give_back(pools_[index_of(system)], std::move(conn));
  count(system, r);
  return r;
}

std::vector<StoreResult> StoreSet::run_blocking_batch(StoreSystem system, const std::vector<StoreRequest>& requests) {
  if (requests.empty()) return {};
  std::string error;
  auto conn = connection(system, &error);
  std::vector<StoreResult> out = conn ? conn->run_pipelined(requests)
                                      : std::vector<StoreResult>(requests.size(), {StoreStatus::kUnavailable, error});
  if (conn) give_back(pools_[index_of(system)], std::move(conn));
  for (const StoreResult& r : out) count(system, r);
  return out;
}

nlohmann::json StoreSet::counters_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [system, _] : addresses_) {
    const SystemCounters& c = counters_[index_of(system)];
    out[system_name(system)] = {{"ops", c.ops.load()},
                                {"errors_unavailable", c.errors_unavailable.load()},
                                {"misses", c.misses.load()},
                                {"connections_closed_idle", c.connections_closed_idle.load()}};
  }
  return out;
}

nlohmann::json StoreSet::describe() const {
  nlohmann::json servers = nlohmann::json::object();
  for (const auto& [system, a] : addresses_) servers[system_name(system)] = a.host + ":" + std::to_string(a.port);
  return {{"addresses", servers},
          {"timeout_ns", timeout_ns_},
          {"blocking_pool",
           {{"policy", "bounded pool per system, connections opened on demand, closed after idle_timeout_ns"},
            {"max_connections_per_system", max_connections_},
            {"idle_timeout_ns", idle_timeout_ns_}}}};
}

}  // namespace tailscope::svc::stores
