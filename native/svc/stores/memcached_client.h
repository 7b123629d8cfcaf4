// memcached clients. Blocking (thread models): libmemcached, one memcached_st
// per pooled connection, with connect / poll / send / receive timeouts.
// Non-blocking (event-loop models): our own text-protocol client on the
// loop's poller (libmemcached cannot be driven from an outside loop), one
// pipelined connection per loop; only get and set, what the topologies use.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "svc/stores/async_store.h"
#include "svc/stores/store_client.h"

namespace tailscope::svc::stores {

// Opens a connection to memcached at `address`; every call and the connect
// itself end within timeout_ns. Never throws: a refused connect is a broken
// connection whose run() answers kUnavailable.
std::unique_ptr<BlockingStoreConnection> connect_memcached_blocking(const StoreAddress& address, int64_t timeout_ns);
// Connects on the first op; `reg` is its descriptor's place in the loop.
std::unique_ptr<AsyncStoreClient> make_memcached_async(const StoreAddress& address, LoopRegistration& reg);

// One reply of the text protocol at the start of `in`, for a `get` or `set`
// (exposed for its tests). Bounded: a line longer than kMemcachedMaxLineBytes
// or a value larger than kMemcachedMaxValueBytes is a protocol error.
inline constexpr size_t kMemcachedMaxLineBytes = 1024;
inline constexpr size_t kMemcachedMaxValueBytes = 1 << 20;
struct MemcachedReply {
  enum Kind {
    kIncomplete,     // more bytes needed
    kOk,             // STORED, or VALUE … END
    kMiss,           // END alone: get found nothing
    kServerError,    // SERVER_ERROR: the op failed, the stream is still in step
    kProtocolError,  // ERROR, CLIENT_ERROR, garbage: close the connection
  } kind;
  std::string error;
};
// *consumed: the reply's bytes (0 unless kOk, kMiss or kServerError).
MemcachedReply parse_memcached_reply(StoreVerb op, std::string_view in, size_t* consumed);

}  // namespace tailscope::svc::stores
