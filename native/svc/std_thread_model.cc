// std-thread: like std-async, but an async call is a std::thread started for
// it and joined when its value is requested (what the async-models study
// calls the std-thread model). A deferred call has no thread: it runs on the
// handler thread when requested, as std::launch::deferred does.
#include <system_error>
#include <thread>

#include "svc/internal/thread_per_connection_model.h"

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
    rt.release_group_slot(c);  // after fn_end: the next call of the window starts after this one ended
  }
  Handle launch(std::unique_ptr<CallScope> call) {
    call->probe().stamp_trigger();
    Handle h{std::move(call), {}};
    if (h.call->spec->launch == CallSpec::Launch::kAsync) {
      try {
        h.thread = std::thread([this, c = h.call.get()] { body(*c); });
        rt.counters().async_threads.fetch_add(1, std::memory_order_relaxed);
      } catch (const std::system_error&) {
        h.call->result = RpcStatus::kRejected;
        rt.release_group_slot(*h.call);
      }
    }
    return h;
  }
  void join(Handle& h) {
    h.call->probe().stamp_request();
    if (h.thread.joinable())
      h.thread.join();
    else if (h.call->spec->launch == CallSpec::Launch::kDeferred)
      body(*h.call);
    h.call->probe().stamp_received();
  }
  CallScope& scope(Handle& h) { return *h.call; }
  void call_sync(CallScope& call) { rt.call_via_client_pool(call); }
};

}  // namespace

std::unique_ptr<ConcurrencyModel> make_std_thread_model() {
  return std::make_unique<internal::ThreadPerConnectionModel<StdThreadLauncher>>("std-thread", "std::thread + join",
                                                                                 "inline at join");
}

}  // namespace tailscope::svc
