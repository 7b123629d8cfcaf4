#include "svc/stores/memcached_client.h"

#include <libmemcached/memcached.h>

#include <algorithm>

namespace tailscope::svc::stores {
namespace {

class LibmemcachedConnection final : public BlockingStoreConnection {
 public:
  LibmemcachedConnection(const StoreAddress& address, int64_t timeout_ns) : mc_(memcached_create(nullptr)) {
    const uint64_t timeout_ms = std::max<int64_t>(1, timeout_ns / 1'000'000);
    // Every wait libmemcached makes is bounded: connect, poll, and the socket send/receive timeouts (µs).
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, timeout_ms);
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, timeout_ms);
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_SND_TIMEOUT, timeout_ms * 1000);
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_RCV_TIMEOUT, timeout_ms * 1000);
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    // A dead server is not retried behind the caller's back: the call fails and the pool reconnects.
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    memcached_server_add(mc_, address.host.c_str(), static_cast<in_port_t>(address.port));
  }
  ~LibmemcachedConnection() override { memcached_free(mc_); }

  StoreResult run(const StoreRequest& r) override {
    memcached_return_t rc = MEMCACHED_FAILURE;
    if (r.op == StoreVerb::kGet) {
      size_t length = 0;
      uint32_t flags = 0;
      char* value = memcached_get(mc_, r.key.data(), r.key.size(), &length, &flags, &rc);
      free(value);  // libmemcached allocates with malloc
      if (rc == MEMCACHED_NOTFOUND) return {StoreStatus::kMiss, {}};
    } else if (r.op == StoreVerb::kSet) {
      const std::string value = store_payload(r.value_bytes);
      rc = memcached_set(mc_, r.key.data(), r.key.size(), value.data(), value.size(), 0, 0);
    } else {
      return {StoreStatus::kUnavailable, std::string("memcached has no op ") + store_verb_name(r.op)};
    }
    if (rc == MEMCACHED_SUCCESS) return {StoreStatus::kOk, {}};
    broken_ = true;
    return {StoreStatus::kUnavailable, memcached_strerror(mc_, rc)};
  }
  bool broken() const override { return broken_; }

 private:
  memcached_st* mc_;
  bool broken_ = false;
};

}  // namespace

std::unique_ptr<BlockingStoreConnection> connect_memcached_blocking(const StoreAddress& address, int64_t timeout_ns) {
  return std::make_unique<LibmemcachedConnection>(address, timeout_ns);
}

}  // namespace tailscope::svc::stores
