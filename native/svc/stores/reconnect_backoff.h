// When a non-blocking store client may try to connect again, and what an op
// is told meanwhile — the one reconnect policy of every client on an event
// loop (memcached_client, redis_client, docstore_client; docs/stores.md
// "Clients per model").
//
// Connections are opened on demand (an op needs one), never by a timer; after
// a connect fails (refused, timed out, the handshake failed) the next attempt
// waits kFirstNs, doubling to kMaxNs, and ops meanwhile fail at once with
// backing_off() — a dead store costs one connect per second per client, not a
// busy reconnect loop. A connection that worked and then broke reconnects on
// the next op without waiting (connected() reset the delay).
//
// Loop thread only, like its client. Times are the caller's monotonic_ns(), so
// a test drives it with any clock.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace tailscope::svc::stores {

class ReconnectBackoff {
 public:
  static constexpr int64_t kFirstNs = 100'000'000;
  static constexpr int64_t kMaxNs = 1'000'000'000;

  // `store` names the store in backing_off()'s message ("memcached", "redis", "document store").
  explicit ReconnectBackoff(std::string store) : store_(std::move(store)) {}

  bool may_connect(int64_t now_ns) const { return now_ns >= next_ns_; }
  // A connect failed at now_ns because of `why`: no new attempt before the
  // current delay has passed, and the delay after that doubles (up to kMaxNs).
  void failed(int64_t now_ns, std::string why);
  // A connect succeeded: the next failure waits kFirstNs again.
  void connected();
  int64_t next_ns() const { return next_ns_; }

  // Why the last connect failed ("" before the first failure).
  const std::string& last_failure() const { return last_failure_; }
  // What an op fails with while may_connect() is false: the store, and the
  // failure the client is backing off from.
  std::string backing_off() const;
  // The policy in words, from the constants above (StoreLoop::policy_json).
  static std::string policy();

 private:
  std::string store_;
  std::string last_failure_;
  int64_t next_ns_ = 0;
  int64_t delay_ns_ = kFirstNs;
};

}  // namespace tailscope::svc::stores
