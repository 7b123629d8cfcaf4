// What every real store client shares: one operation (what the topology's
// store stage asks, its key already expanded), its outcome, and the blocking
// client interface the thread models use. One file per client kind:
// memcached_client, redis_client, docstore_client (PostgreSQL JSONB serving
// DeathStarBench's MongoDB roles; docs/stores.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "svc/topology.h"

namespace tailscope::svc::stores {

struct StoreRequest {
  StoreVerb op = StoreVerb::kNone;
  std::string key;
  std::string collection;  // document store only
  size_t value_bytes = 0;  // writes
  int limit = 10;          // zrevrange / smembers / find
  int keep = 0;            // zadd: trim the set to its `keep` highest scores after the write (0: no trim)
  int64_t member = 0;      // zadd / sadd: the member written (a post or user id)
  // zadd / sadd with `members`: every id a member of one command (score = id);
  // replaces `member`. The caller sends no command for an empty list.
  std::vector<int64_t> members;
  bool read_ids = false;  // zrevrange / smembers / find with `yields`: return the ids read
};

enum class StoreStatus {
  kOk,
  kMiss,         // a read found nothing (runs on_miss)
  kUnavailable,  // refused, dead, timed out or answered with an error: counted per system
};

struct StoreResult {
  StoreResult() = default;
  StoreResult(StoreStatus s, std::string why = {}) : status(s), error(std::move(why)) {}  // NOLINT: {status, error}
  StoreStatus status = StoreStatus::kUnavailable;
  std::string error;  // why, when unavailable (first words of the library's message)
  // read_ids: the ids read (zrevrange / smembers: each member's leading
  // integer; find: the first document's `followers` array).
  std::vector<int64_t> ids;
};

// The outcome of a batch (a fan-out's ops): the first unavailable one's, else
// a miss when any missed, else ok.
StoreResult combine_results(const std::vector<StoreResult>& results);

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
  // The requests in order, one result each. This default runs them one round
  // trip after another (memcached, the document store: what their blocking
  // clients do); Redis overrides it to pipeline them in one round trip. After
  // the connection breaks the rest fail unavailable without being sent.
  virtual std::vector<StoreResult> run_pipelined(const std::vector<StoreRequest>& requests);
  virtual bool broken() const = 0;
};

// The payload of a write: value_bytes of filler (the content is not what is measured).
std::string store_payload(size_t bytes);

}  // namespace tailscope::svc::stores
