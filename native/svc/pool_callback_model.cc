// pool-callback: an IO dispatcher plus a processing pool, and no thread ever
// waits. A request becomes a RequestFlow — the request context — that runs
// stages on a pool thread until one has to wait; the wait (downstream calls,
// a simulated store) is handed to the multiplexed channel or the timer with
// a callback that carries the flow and queues its continuation back to the
// pool. The article's fix (8k → 30k QPS) in ~100 lines.
#include <atomic>

#include "core/clock.h"
#include "svc/internal/pool_model.h"

namespace tailscope::svc {
namespace {

constexpr size_t kDefaultWorkers = 2;

class RequestFlow : public std::enable_shared_from_this<RequestFlow> {
 public:
  RequestFlow(ServiceRuntime& rt, BoundedPool& pool, RequestScope rs) : rt_(rt), pool_(pool), rs_(std::move(rs)) {
    stack_.push_back(Cursor{&rs_.endpoint->stages});
  }

  // Runs on a pool thread until the flow has to wait or is finished.
  void run() {
    while (!stack_.empty() && rs_.status == RpcStatus::kOk) {
      Cursor& c = stack_.back();
      if (c.index >= c.stages->size()) {
        stack_.pop_back();
        continue;
      }
      const Stage& s = (*c.stages)[c.index];
      switch (s.kind) {
        case Stage::Kind::kCpu:
        case Stage::Kind::kWork:
          rt_.run_compute(s);
          ++c.index;
          break;
        case Stage::Kind::kStore:
          if (c.step < s.store.count) {
            ++c.step;
            store_span_ = rt_.begin_store(rs_, s.store);
            rt_.timers().schedule(monotonic_ns() + s.store.latency.sample_ns(), [self = shared_from_this()] {
              self->pool_.submit_continuation([self] {
                self->rt_.end_store(self->store_span_);
                self->run();
              });
            });
            return;
          }
          c.step = 0;
          ++c.index;
          if (s.store.on_miss && rt_.store_missed(s.store)) stack_.push_back(Cursor{s.store.on_miss.get()});
          break;
        case Stage::Kind::kCall:
          if (c.step == 0) {
            c.step = 1;
            calls_.clear();
            calls_.push_back(rt_.begin_call(rs_, s.call));
            pending_.store(1, std::memory_order_relaxed);
            issue(*calls_.back());
            return;
          }
          rt_.end_call(rs_, *calls_.back());
          c.step = 0;
          ++c.index;
          break;
        case Stage::Kind::kGroup:
          if (!run_group(c, s.group)) return;
          break;
      }
    }
    // Failed or done: unfinished calls of a failed group still end through
    // their callbacks, which hold the flow alive; nobody waits for them.
    rt_.finish(rs_);
  }

 private:
  struct Cursor {
    const StageList* stages;
    size_t index = 0;
    int step = 0;         // store: repetitions done; call/group: 1 once issued
    size_t join_pos = 0;  // group: next position in join order
  };

  // Launches the async calls together; their callbacks count down and the
  // last one continues the flow. Deferred calls are issued one at a time when
  // the join reaches them. Returns false when the flow must wait.
  bool run_group(Cursor& c, const CallGroup& g) {
    if (c.step == 0) {
      c.step = 1;
      c.join_pos = 0;
      calls_.clear();
      int async_calls = 0;
      for (const CallSpec& spec : g.calls) {
        calls_.push_back(rt_.begin_call(rs_, spec));
        calls_.back()->probe().stamp_trigger();
        async_calls += spec.launch == CallSpec::Launch::kAsync;
      }
      if (async_calls > 0) {
        pending_.store(async_calls, std::memory_order_relaxed);
        for (auto& call : calls_)
          if (call->spec->launch == CallSpec::Launch::kAsync) issue(*call);
        return false;
      }
    }
    while (c.join_pos < g.join_order.size()) {
      CallScope& call = *calls_[g.join_order[c.join_pos]];
      if (call.spec->launch == CallSpec::Launch::kDeferred && !call.probe().fn_start_ns) {
        if (rs_.status != RpcStatus::kOk) {  // never requested after a failure, as in the blocking models
          ++c.join_pos;
          continue;
        }
        call.probe().stamp_request();
        pending_.store(1, std::memory_order_relaxed);
        issue(call);
        return false;
      }
      if (!call.probe().request_val_ns) call.probe().stamp_request();
      call.probe().stamp_received();
      rt_.end_call(rs_, call);
      ++c.join_pos;
    }
    c.step = 0;
    ++c.index;
    return true;
  }

  void issue(CallScope& call) {
    call.probe().stamp_fn_start();
    rt_.channel(call.spec->service)
        .call(call.spec->endpoint, call.payload, call.child, rt_.call_timeout_ns(),
              [self = shared_from_this(), c = &call](CallResult&& r) {
                c->result = r.status;
                c->probe().stamp_fn_end();
                if (self->pending_.fetch_sub(1, std::memory_order_acq_rel) == 1)
                  self->pool_.submit_continuation([self] { self->run(); });
              });
  }

  ServiceRuntime& rt_;
  BoundedPool& pool_;
  RequestScope rs_;
  std::vector<Cursor> stack_;
  std::vector<std::unique_ptr<CallScope>> calls_;
  std::atomic<int> pending_{0};
  SpanRecord store_span_;
};

class PoolCallbackModel final : public internal::PoolModel {
 public:
  PoolCallbackModel()
      : PoolModel("pool-callback", kDefaultWorkers, "epoll dispatcher + processing pool",
                  "multiplexed channel, callbacks carrying the request context") {}

 protected:
  void handle(ServiceRuntime& rt, InboundRequest&& request) override {
    auto rs = rt.begin(std::move(request));
    if (rs) std::make_shared<RequestFlow>(rt, pool(), std::move(*rs))->run();
  }
};

}  // namespace

std::unique_ptr<ConcurrencyModel> make_pool_callback_model() { return std::make_unique<PoolCallbackModel>(); }

}  // namespace tailscope::svc
