// What every real store client shares: one operation (what the topology's
// store stage asks, its key already expanded), its outcome, and the blocking
// client interface the thread models use. One file per client kind:
// memcached_client, redis_client, docstore_client (PostgreSQL JSONB serving
// DeathStarBench's MongoDB roles; docs/stores.md).
#pragma once

#include <cstdint>
#include <string>

#include "svc/topology.h"

namespace tailscope::svc::stores {

struct StoreRequest {
  StoreVerb op = StoreVerb::kNone;
  std::string key;
  std::string collection;  // document store only
  size_t value_bytes = 0;  // writes
  int limit = 10;          // zrevrange / smembers / find
  int64_t member = 0;      // zadd / sadd: the member written (a post or user id)
};

enum class StoreStatus {
  kOk,
  kMiss,         // a read found nothing (runs on_miss)
  kUnavailable,  // refused, dead, timed out or answered with an error: counted per system
};

struct StoreResult {
  StoreStatus status = StoreStatus::kUnavailable;
  std::string error;  // why, when unavailable (first words of the library's message)
};

// Where a store listens.
struct StoreAddress {
  std::string host;  // numeric, checked against the lab allow-list by whoever made it
  int port = 0;
};

// One blocking connection (thread models). Not thread-safe: a pool hands it to
// one thread at a time. run() never blocks longer than the timeout it was made
// with (per connect, per round trip); after a failure the connection is broken
// and the pool drops it.
class BlockingStoreConnection {
 public:
  virtual ~BlockingStoreConnection() = default;
  virtual StoreResult run(const StoreRequest& request) = 0;
  virtual bool broken() const = 0;
};

// The payload of a write: value_bytes of filler (the content is not what is measured).
std::string store_payload(size_t bytes);

}  // namespace tailscope::svc::stores
