// The shell shared by the two pool models (pool-blocking, pool-callback): an
// IO dispatcher (EventLoopServer) hands each request to a fixed BoundedPool;
// a full queue rejects (overload is an answer). What a pool thread does with
// an admitted request — block on futures or run until the first wait and
// continue from callbacks — is the one thing each model file defines.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "svc/runtime.h"

namespace tailscope::svc::internal {

class PoolModel : public ConcurrencyModel {
 public:
  // `server` / `client`: how the model serves and calls, as reported in the engine's result document.
  PoolModel(std::string name, size_t default_workers, std::string server, std::string client)
      : name_(std::move(name)),
        default_workers_(default_workers),
        server_text_(std::move(server)),
        client_text_(std::move(client)) {}

  std::string_view name() const override { return name_; }
  void start(ServiceRuntime& rt, ListenSpec listen) override {
    const auto& o = rt.options();
    pool_ = std::make_unique<BoundedPool>(o.workers ? o.workers : default_workers_, o.queue_capacity);
    server_ = std::make_unique<EventLoopServer>(
        listen, o.loops ? o.loops : 1, rt.counters(), [this, &rt](size_t, InboundRequest&& request) {
          auto shared = std::make_shared<InboundRequest>(std::move(request));
          const bool queued = pool_->try_submit([this, &rt, shared] {
            // The limbo of docs/collapse-study.md: parse → a pool thread picks it up.
            rt.counters().queue_wait.record(monotonic_ns() - shared->received_ns);
            handle(rt, std::move(*shared));
          });
          if (!queued) rt.reject(std::move(*shared));
        });
    attach(rt, *server_);
    server_->start();
  }
  void stop() override {
    if (server_) server_->stop();
    if (pool_) pool_->stop();
  }
  nlohmann::json describe() const override {
    return {{"server", server_text_},
            {"workers", pool_ ? pool_->workers() : 0},
            {"thread_create_failures", pool_ ? pool_->threads_failed() : 0},
            {"io_dispatchers", server_ ? server_->loops() : 0},
            {"queue_capacity", pool_ ? pool_->queue_capacity() : 0},
            {"max_queue_depth", pool_ ? pool_->max_queue_depth() : 0},
            {"client", client_text_}};
  }

 protected:
  // Runs on a pool thread, once per admitted request.
  virtual void handle(ServiceRuntime& rt, InboundRequest&& request) = 0;
  // Before the dispatcher loops start: what else they drive (pool-callback: its store clients).
  virtual void attach(ServiceRuntime&, EventLoopServer&) {}
  BoundedPool& pool() { return *pool_; }

 private:
  std::string name_;
  size_t default_workers_;
  std::string server_text_, client_text_;
  std::unique_ptr<BoundedPool> pool_;
  std::unique_ptr<EventLoopServer> server_;
};

}  // namespace tailscope::svc::internal
