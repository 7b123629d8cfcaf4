// The real stores of one event loop (coroutine: each of its loops;
// pool-callback: its IO dispatcher): a non-blocking client per store system,
// made on the first op, whose sockets live in the loop's poller and are
// serviced on its thread (net::LoopDriven, beside the loop's RPC channels
// through net::LoopDrivers). Ops are counted through the StoreSet like the
// blocking pools' (ops, errors_unavailable, misses) and fail unavailable at
// the store timeout, so a dead, hung or slow store never stalls the loop.
//
// Connection policy (docs/stores.md "Clients per model"): per loop and
// system, one pipelined connection to memcached and to Redis (both answer in
// order on one connection; one loop thread cannot use more), and a bounded set
// of docstore_connections to PostgreSQL, which runs one query at a time per
// connection — an op waits, in order, for a free one until its deadline.
//
// Loop thread only, except close() after the loop has stopped.
#pragma once

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "net/event_loop.h"
#include "svc/stores/async_store.h"
#include "svc/stores/store_set.h"

namespace tailscope::svc::stores {

inline constexpr size_t kDocstoreConnectionsPerLoop = 4;

class StoreLoop final : public net::LoopDriven {
 public:
  // token_bits: what net::LoopDrivers::add gave it (0 when it is the loop's only driven).
  StoreLoop(StoreSet& set, net::EventLoop& events, uint64_t token_bits = 0,
            size_t docstore_connections = kDocstoreConnectionsPerLoop);
  ~StoreLoop() override;
  StoreLoop(const StoreLoop&) = delete;
  StoreLoop& operator=(const StoreLoop&) = delete;

  // Runs one op; `done` runs once on this loop's thread (maybe before run
  // returns), after the outcome is counted. A system without an address fails
  // unavailable, as the blocking path does.
  void run(StoreSystem system, const StoreRequest& request, StoreDone done);
  // A batch (a fan-out's ops), all started now, in this loop iteration: the
  // Redis and memcached clients send them in one write on their one
  // connection (one round trip); the document store spreads them over its
  // set. `done` runs once, with combine_results of them all, after the last
  // (at once for an empty batch). Each op is counted.
  void run_batch(StoreSystem system, std::vector<StoreRequest> requests, StoreDone done);
  void on_ready(const net::ReadyEvent& e) override;
  int64_t service() override;
  // Fails every op in flight ("store client closed") and closes the connections.
  void close();

  // The policy, for a model's describe().
  static nlohmann::json policy_json(size_t docstore_connections);

 private:
  AsyncStoreClient* client(StoreSystem system);
  LoopRegistration* registration(AsyncStoreClient* owner, size_t sub);

  StoreSet& set_;
  net::EventLoop& events_;
  uint64_t token_bits_;
  size_t docstore_connections_;
  struct Slot {
    std::unique_ptr<LoopRegistration> reg;
    AsyncStoreClient* owner;
    size_t sub;
  };
  std::vector<Slot> slots_;                                   // by the slot in the token's low 16 bits
  std::array<std::unique_ptr<AsyncStoreClient>, 4> clients_;  // by StoreSystem; declared after slots_: destroyed first
  bool closed_ = false;
};

}  // namespace tailscope::svc::stores
