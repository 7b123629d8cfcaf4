// Test helper for the RPC client tests (multiplexed_channel_test.cc,
// blocking_client_pool_test.cc): a real RPC server on an ephemeral loopback
// port that answers, or holds, each request.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "net/socket.h"
#include "svc/server.h"

namespace tailscope::svc::testing {

constexpr int64_t kLongTimeoutNs = 30'000'000'000;  // never reached: the runner's timeout catches hangs

// The link delay the shim tests configure: long enough to tell held from not held.
constexpr int64_t kShimDelayNs = 20'000'000;

// An RPC server on an ephemeral loopback port. `answer` decides per request:
// true answers it now (payload echoed), false holds it in held().
class TestServer {
 public:
  explicit TestServer(bool answer = true) : listen_fd_(net::make_listener("127.0.0.1", 0)) { start(answer); }
  ~TestServer() {
    stop();
    ::close(listen_fd_);
  }
  void start(bool answer) {
    server_ = std::make_unique<EventLoopServer>(ListenSpec{listen_fd_}, 1, counters_,
                                                [this, answer](size_t, InboundRequest&& r) {
                                                  dispatched_.fetch_add(1);
                                                  if (answer) {
                                                    r.conn->respond(r.id, RpcStatus::kOk, r.payload);
                                                    return;
                                                  }
                                                  std::lock_guard lock(mu_);
                                                  held_.push_back(std::move(r));
                                                });
    server_->start();
  }
  // Stops serving: its connections are shut down (the clients see EOF).
  void stop() {
    if (server_) server_->stop();
    server_.reset();
  }
  size_t held_count() {
    std::lock_guard lock(mu_);
    return held_.size();
  }
  void answer_held() {
    std::lock_guard lock(mu_);
    for (auto& r : held_) r.conn->respond(r.id, RpcStatus::kOk, r.payload);
    held_.clear();
  }
  void drop_held() {
    std::lock_guard lock(mu_);
    held_.clear();
  }
  int port() const { return net::bound_port(listen_fd_); }
  int dispatched() const { return dispatched_.load(); }
  ServiceCounters& counters() { return counters_; }

 private:
  int listen_fd_;
  ServiceCounters counters_;
  std::unique_ptr<EventLoopServer> server_;
  std::atomic<int> dispatched_{0};
  std::mutex mu_;
  std::vector<InboundRequest> held_;
};

}  // namespace tailscope::svc::testing
