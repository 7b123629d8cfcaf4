// std-async: DeathStarBench's compose-post handler exactly. A group's async
// calls are std::async(std::launch::async) — a new thread per call — and its
// deferred calls std::async(std::launch::deferred), which run on the handler
// thread when .get() asks for the value. The server is thread per
// connection (Thrift's TThreadedServer) and downstream calls go through a
// blocking client pool, one call per connection at a time.
#include <future>
#include <system_error>

#include "svc/internal/thread_per_connection_model.h"

namespace tailscope::svc {
namespace {

struct StdAsyncLauncher {
  ServiceRuntime& rt;
  struct Handle {
    std::unique_ptr<CallScope> call;
    std::future<RpcStatus> result;
  };

  Handle launch(std::unique_ptr<CallScope> call) {
    CallScope* c = call.get();
    const bool deferred = c->spec->launch == CallSpec::Launch::kDeferred;
    c->probe().stamp_trigger();
    auto body = [this, c] {
      c->probe().stamp_fn_start();
      const RpcStatus st = rt.call_via_client_pool(*c);
      c->probe().stamp_fn_end();
      rt.release_group_slot(*c);  // after fn_end: the next call of the window starts after this one ended
      return st;
    };
    Handle h{std::move(call), {}};
    try {
      h.result = std::async(deferred ? std::launch::deferred : std::launch::async, body);
      if (!deferred) rt.counters().async_threads.fetch_add(1, std::memory_order_relaxed);
    } catch (const std::system_error&) {  // no thread could be created: the call fails, the handler goes on
      h.call->result = RpcStatus::kRejected;
      rt.release_group_slot(*h.call);
    }
    return h;
  }
  void join(Handle& h) {
    h.call->probe().stamp_request();
    if (h.result.valid()) h.call->result = h.result.get();
    h.call->probe().stamp_received();
  }
  CallScope& scope(Handle& h) { return *h.call; }
  void call_sync(CallScope& call) { rt.call_via_client_pool(call); }
};

}  // namespace

std::unique_ptr<ConcurrencyModel> make_std_async_model() {
  return std::make_unique<internal::ThreadPerConnectionModel<StdAsyncLauncher>>(
      "std-async", "std::async(launch::async)", "std::async(launch::deferred)");
}

}  // namespace tailscope::svc
