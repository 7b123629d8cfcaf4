// std-thread: like std-async, but an async call is a std::thread started for
// it and joined when its value is requested (what the async-models study
// calls the std-thread model). A deferred call has no thread: it runs on the
// handler thread when requested, as std::launch::deferred does.
#include <system_error>
#include <thread>

#include "svc/internal/blocking_handler.h"

namespace tailscope::svc {
namespace {

struct StdThreadLauncher {
  ServiceRuntime& rt;
  struct Handle {
    std::unique_ptr<CallScope> call;
    std::thread thread;
  };

  void body(CallScope& c) {
    c.probe().stamp_fn_start();
    rt.call_via_client_pool(c);
    c.probe().stamp_fn_end();
  }
  Handle launch(std::unique_ptr<CallScope> call) {
    call->probe().stamp_trigger();
    Handle h{std::move(call), {}};
    if (h.call->spec->launch == CallSpec::Launch::kAsync) {
      try {
        h.thread = std::thread([this, c = h.call.get()] { body(*c); });
      } catch (const std::system_error&) {
        h.call->result = RpcStatus::kRejected;
      }
    }
    return h;
  }
  void join(Handle& h) {
    h.call->probe().stamp_request();
    if (h.thread.joinable()) h.thread.join();
    else if (h.call->spec->launch == CallSpec::Launch::kDeferred) body(*h.call);
    h.call->probe().stamp_received();
  }
  CallScope& scope(Handle& h) { return *h.call; }
  void call_sync(CallScope& call) { rt.call_via_client_pool(call); }
};

class StdThreadModel final : public ConcurrencyModel {
 public:
  std::string_view name() const override { return "std-thread"; }
  void start(ServiceRuntime& rt, ListenSpec listen) override {
    server_ = std::make_unique<ThreadPerConnectionServer>(listen, rt.counters(), [&rt](InboundRequest&& request) {
      auto rs = rt.begin(std::move(request));
      if (!rs) return;
      StdThreadLauncher launcher{rt};
      internal::run_stages_blocking(rt, *rs, rs->endpoint->stages, launcher);
      rt.finish(*rs);
    });
    server_->start();
  }
  void stop() override {
    if (server_) server_->stop();
  }
  nlohmann::json describe() const override {
    return {{"server", "thread-per-connection"},
            {"async_launch", "std::thread + join"},
            {"deferred_launch", "inline at join"},
            {"client", "blocking client pool"},
            {"connection_threads_started", server_ ? server_->threads_started() : 0}};
  }

 private:
  std::unique_ptr<ThreadPerConnectionServer> server_;
};

}  // namespace

std::unique_ptr<ConcurrencyModel> make_std_thread_model() { return std::make_unique<StdThreadModel>(); }

}  // namespace tailscope::svc
