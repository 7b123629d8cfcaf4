// memcached clients. Blocking (thread models): libmemcached, one memcached_st
// per pooled connection, with connect / poll / send / receive timeouts.
#pragma once

#include <memory>

#include "svc/stores/store_client.h"

namespace tailscope::svc::stores {

// Opens a connection to memcached at `address`; every call and the connect
// itself end within timeout_ns. Never throws: a refused connect is a broken
// connection whose run() answers kUnavailable.
std::unique_ptr<BlockingStoreConnection> connect_memcached_blocking(const StoreAddress& address, int64_t timeout_ns);

}  // namespace tailscope::svc::stores
