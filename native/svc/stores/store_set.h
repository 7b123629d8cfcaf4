// A service's real stores: where each system listens, the blocking
// connection pools of the thread models, the key draws and the counters per
// system (ops, errors_unavailable, misses) that the result documents report.
//
// Connection policy (thread models, recorded in describe()): a bounded pool
// per system, like DeathStarBench's ClientPool for its MongoDB/Memcached/Redis
// clients: a thread takes an idle connection or opens one while fewer than
// max_connections exist, else waits for one until the call timeout (then the
// call fails unavailable); a connection that failed is dropped, not reused,
// and one idle longer than the idle timeout is closed (svc/idle_connections.h).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svc/idle_connections.h"
#include "svc/stores/store_client.h"

namespace tailscope::svc::stores {

const char* system_name(StoreSystem s);    // memcached, redis, mongodb (the topology's name)
const char* db_system_tag(StoreSystem s);  // memcached, redis, postgresql (the span's db.system)
// Parses "SYSTEM=HOST:PORT" (--store-addr); throws std::invalid_argument naming
// what is wrong. The host must be numeric and pass the lab allow-list
// (loopback or 198.18.0.0/15, svc/peer_addresses.h).
std::pair<StoreSystem, StoreAddress> parse_store_addr(const std::string& text);

// The ids one store stage run draws (docs/stores.md): its on_miss stages reuse them.
struct StoreDraw {
  int user = 0;
  int hotel = 0;
  int64_t post = 0;      // fresh on a write, a recent one on a read
  int64_t follower = 0;  // {follower}: set per op of a for_each fan-out, not drawn
};
StoreDraw draw_store_ids(bool write);
std::string expand_key(const KeyTemplate& key, const StoreDraw& draw);
StoreRequest make_request(const StoreOp& op, const StoreDraw& draw);

struct SystemCounters {
  std::atomic<int64_t> ops{0}, errors_unavailable{0}, misses{0};
  std::atomic<int64_t> connections_closed_idle{0};  // blocking pool: closed after the idle timeout
};

class StoreSet {
 public:
  // idle_timeout_ns <= 0: idle connections are kept until the set is destroyed.
  StoreSet(std::map<StoreSystem, StoreAddress> addresses, int64_t timeout_ns, size_t max_connections_per_system,
           int64_t idle_timeout_ns = 0);
  ~StoreSet();

  // A blocking operation on a pooled connection (thread models). A system
  // without an address fails unavailable ("no --store-addr for ...").
  StoreResult run_blocking(StoreSystem system, const StoreRequest& request);
  // A batch (a fan-out) on one pooled connection, pipelined where the client
  // can (Redis: one round trip); one result per request, each op counted.
  std::vector<StoreResult> run_blocking_batch(StoreSystem system, const std::vector<StoreRequest>& requests);
  // Folds an outcome into the system's counters (every client form calls it once per op).
  void count(StoreSystem system, const StoreResult& result);
  const StoreAddress* address(StoreSystem system) const;
  int64_t timeout_ns() const { return timeout_ns_; }
  // {"memcached": {"ops", "errors_unavailable", "misses", "connections_closed_idle"}, ...} for each
  // system with an address.
  nlohmann::json counters_json() const;
  nlohmann::json describe() const;

 private:
  using Connection = std::unique_ptr<BlockingStoreConnection>;
  struct Pool {
    std::mutex mu;
    std::condition_variable freed;
    IdleConnections<Connection> idle{0};  // the set's timeout is given in its constructor
    size_t open = 0;
  };
  Connection take(StoreSystem system, Pool& pool, std::string* error);
  // A pooled connection of `system`, or nullptr with *error (no address, the pool exhausted).
  Connection connection(StoreSystem system, std::string* error);
  void give_back(Pool& pool, Connection conn);

  std::map<StoreSystem, StoreAddress> addresses_;
  int64_t timeout_ns_;
  size_t max_connections_;
  int64_t idle_timeout_ns_;
  std::array<Pool, 4> pools_;               // by StoreSystem
  std::array<SystemCounters, 4> counters_;  // by StoreSystem
};

}  // namespace tailscope::svc::stores
