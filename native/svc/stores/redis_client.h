// Redis clients. Blocking (thread models): hiredis' synchronous API, one
// redisContext per pooled connection, connect and command timeouts set.
#pragma once

#include <memory>

#include "svc/stores/store_client.h"

namespace tailscope::svc::stores {

// Never throws: a refused connect gives a broken connection that answers kUnavailable.
std::unique_ptr<BlockingStoreConnection> connect_redis_blocking(const StoreAddress& address, int64_t timeout_ns);

}  // namespace tailscope::svc::stores
