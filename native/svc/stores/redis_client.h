// Redis clients. Blocking (thread models): hiredis' synchronous API, one
// redisContext per pooled connection, connect and command timeouts set.
// Non-blocking (event-loop models): hiredis' async API on the loop's own
// poller, one pipelined connection per loop, our own deadline per op.
// Both send the same commands and read replies the same way.
#pragma once

#include <memory>

#include "svc/stores/async_store.h"
#include "svc/stores/store_client.h"

namespace tailscope::svc::stores {

// Never throws: a refused connect gives a broken connection that answers kUnavailable.
std::unique_ptr<BlockingStoreConnection> connect_redis_blocking(const StoreAddress& address, int64_t timeout_ns);
// Connects on the first op; `reg` is its descriptor's place in the loop.
std::unique_ptr<AsyncStoreClient> make_redis_async(const StoreAddress& address, LoopRegistration& reg);

}  // namespace tailscope::svc::stores
