// The shell shared by the two thread-per-connection models (std-async,
// std-thread): a ThreadPerConnectionServer whose connection threads run the
// blocking stage interpreter. Only the Launcher — how an async or deferred
// call is started and joined — differs between them, and it is the one
// thing each model file defines.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "svc/internal/blocking_handler.h"
#include "svc/server.h"

namespace tailscope::svc::internal {

template <class Launcher>
class ThreadPerConnectionModel final : public ConcurrencyModel {
 public:
  // `async_launch` / `deferred_launch`: how the model launches each kind of
  // call, as reported in the engine's result document.
  ThreadPerConnectionModel(std::string name, std::string async_launch, std::string deferred_launch)
      : name_(std::move(name)), async_launch_(std::move(async_launch)), deferred_launch_(std::move(deferred_launch)) {}

  std::string_view name() const override { return name_; }
  void start(ServiceRuntime& rt, ListenSpec listen) override {
    server_ = std::make_unique<ThreadPerConnectionServer>(listen, rt.counters(), [&rt](InboundRequest&& request) {
      auto rs = rt.begin(std::move(request));
      if (!rs) return;
      Launcher launcher{rt};
      run_endpoint_blocking(rt, *rs, launcher);
      rt.finish(*rs);
    });
    server_->start();
  }
  void stop() override {
    if (server_) server_->stop();
  }
  nlohmann::json describe() const override {
    return {{"server", "thread-per-connection"},
            {"async_launch", async_launch_},
            {"deferred_launch", deferred_launch_},
            {"client", "blocking client pool"},
            {"connection_threads_started", server_ ? server_->threads_started() : 0}};
  }

 private:
  std::string name_, async_launch_, deferred_launch_;
  std::unique_ptr<ThreadPerConnectionServer> server_;
};

}  // namespace tailscope::svc::internal
