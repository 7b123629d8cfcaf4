// pool-blocking: an IO dispatcher reads requests and queues them to a fixed
// pool (bounded queue: a full queue rejects). A pool thread runs the whole
// handler and, for a group, issues the async calls on the multiplexed
// channel and then *blocks on their futures* in join order — the pattern the
// "not all async is created equal" article measured at 40k → 8k QPS: every
// waiting handler holds a pool thread, so throughput is workers ÷ latency.
// A wait never outlasts the call timeout (plus a margin for the channel's
// own timer), so too few threads show up as timeouts and rejections, not a hang.
#include <future>
#include <string>

#include "core/clock.h"
#include "svc/internal/blocking_handler.h"
#include "svc/internal/pool_model.h"

namespace tailscope::svc {
namespace {

constexpr size_t kDefaultWorkers = 8;

// Shared with the channel's callback, which may run after a timed-out joiner left.
struct CallState {
  std::promise<RpcStatus> promise;
  int64_t fn_end_ns = 0;
  std::string payload;  // the answer's, written before the promise is set
};

struct PoolBlockingLauncher {
  ServiceRuntime& rt;
  struct Handle {
    std::unique_ptr<CallScope> call;
    std::shared_ptr<CallState> state;
    std::future<RpcStatus> result;
    int64_t deadline_ns = 0;
  };

  void issue(Handle& h) {
    CallScope& c = *h.call;
    h.state = std::make_shared<CallState>();
    h.result = h.state->promise.get_future();
    h.deadline_ns = monotonic_ns() + rt.call_timeout_ns() + 50'000'000;
    c.probe().stamp_fn_start();
    // The call's capacity (a client-side pool): this thread waits for a slot,
    // inside the call's span; the slot and the group's window slot are given
    // back when the answer (or the channel's timeout) comes.
    CapacityLimit* slot = rt.limit(c.spec->limit_index);
    if (slot && !slot->acquire(monotonic_ns() + rt.call_timeout_ns())) {
      rt.release_group_slot(c);
      h.state->fn_end_ns = monotonic_ns();
      h.state->promise.set_value(RpcStatus::kTimeout);
      return;
    }
    rt.channel(c.spec->service)
        .call(c.spec->endpoint, c.payload, c.child, rt.call_timeout_ns(),
              [state = h.state, slot, window = std::move(c.group_slot)](CallResult&& r) {
                state->fn_end_ns = monotonic_ns();
                if (slot) slot->release();
                if (window) window->release();
                state->payload = std::move(r.payload);
                state->promise.set_value(r.status);
              });
  }
  void wait(Handle& h) {
    CallScope& c = *h.call;
    if (h.result.wait_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(h.deadline_ns))) ==
        std::future_status::ready) {
      c.take_answer(CallResult{h.result.get(), std::move(h.state->payload)});
      c.probe().fn_end_ns = h.state->fn_end_ns;
    } else {
      c.result = RpcStatus::kTimeout;
      c.probe().fn_end_ns = monotonic_ns();
    }
  }
  Handle launch(std::unique_ptr<CallScope> call) {
    call->probe().stamp_trigger();
    Handle h{std::move(call), {}, {}, 0};
    if (h.call->spec->launch == CallSpec::Launch::kAsync) issue(h);
    return h;
  }
  void join(Handle& h) {
    h.call->probe().stamp_request();
    if (!h.state) issue(h);  // deferred: issued when its value is requested
    wait(h);
    h.call->probe().stamp_received();
  }
  CallScope& scope(Handle& h) { return *h.call; }
  void call_sync(CallScope& call) {
    Handle h{std::unique_ptr<CallScope>(&call), {}, {}, 0};
    issue(h);
    wait(h);
    (void)h.call.release();  // the caller owns `call`: the handle only borrowed it
  }
};

class PoolBlockingModel final : public internal::PoolModel {
 public:
  PoolBlockingModel()
      : PoolModel("pool-blocking", kDefaultWorkers, "epoll dispatcher + fixed pool",
                  "multiplexed channel, future per call") {}

 protected:
  void handle(ServiceRuntime& rt, InboundRequest&& request) override {
    auto rs = rt.begin(std::move(request));
    if (!rs) return;
    PoolBlockingLauncher launcher{rt};
    internal::run_endpoint_blocking(rt, *rs, launcher);
    rt.finish(*rs);
  }
};

}  // namespace

std::unique_ptr<ConcurrencyModel> make_pool_blocking_model() { return std::make_unique<PoolBlockingModel>(); }

}  // namespace tailscope::svc
