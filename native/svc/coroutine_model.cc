// coroutine: one event loop per core; each loop reads its connections and
// runs the handlers of their requests as C++20 coroutines (exec::Task). A
// downstream call or a simulated store suspends the handler; its completion
// (channel callback, timer) resumes it on the handler's own loop, so a
// handler's code always runs on one thread and needs no locks.
// Each loop owns its own client connections (a ChannelLoop it drives,
// svc/multiplexed_channel.h): a call's frame leaves when the loop finishes its
// iteration, the response is read by the same loop, and the resumption is a
// post to itself — no channel thread, no cross-thread hand-off per call.
// Real stores the same way: each loop drives its own store clients
// (svc/stores/store_loop.h) beside its ChannelLoop (net::LoopDrivers), and an
// op's completion resumes the handler on that loop.
// A group's async calls start eagerly and are joined with exec::when_all;
// deferred calls start when the join reaches them. CPU stages run on the loop.
// In-flight handlers per loop are bounded (queue_capacity): beyond, reject.
#include <chrono>
#include <coroutine>
#include <future>
#include <map>
#include <memory>
#include <string>

#include "core/clock.h"
#include "exec/coroutine.h"
#include "net/loop_drivers.h"
#include "svc/runtime.h"

namespace tailscope::svc {
namespace {

using exec::Task;

// One loop's client side: its ChannelLoop and a channel per downstream
// service, made on first use, and its store clients (real store mode), both
// driven by the loop through `drivers`. Only that loop's thread touches it.
struct LoopClients {
  net::LoopDrivers drivers;
  std::unique_ptr<ChannelLoop> loop;          // declared before the channels: it outlives the channels it serves
  std::unique_ptr<stores::StoreLoop> stores;  // null: simulated stores
  std::map<std::string, std::unique_ptr<MultiplexedChannel>> channels;
  MultiplexedChannel& channel(ServiceRuntime& rt, const std::string& service) {
    auto& c = channels[service];
    if (!c) c = rt.make_channel(service, *loop);
    return *c;
  }
};

struct LoopRef {
  EventLoopServer* server;
  size_t index;
  LoopClients* clients;
  void resume_later(std::coroutine_handle<> h) const {
    server->post(index, [h] { h.resume(); });
  }
};

// co_await: a downstream call on the multiplexed channel.
struct CallAwaiter {
  ServiceRuntime& rt;
  CallScope& call;
  LoopRef loop;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    loop.clients->channel(rt, call.spec->service)
        .call(call.spec->endpoint, call.payload, call.child, rt.call_timeout_ns(),
              [c = &call, loop = loop, h](CallResult&& r) {
                c->take_answer(std::move(r));
                c->probe().stamp_fn_end();
                loop.resume_later(h);
              });
  }
  void await_resume() const noexcept {}
};

// co_await: a simulated store latency, on the handler's own loop (a loop
// timer: the loop sleeps in its readiness wait until it is due and resumes
// the handler itself — no timer thread, no cross-thread post).
struct SleepAwaiter {
  int64_t ns;
  LoopRef loop;
  bool await_ready() const noexcept { return ns <= 0; }
  void await_suspend(std::coroutine_handle<> h) {
    loop.server->schedule_on_loop(loop.index, monotonic_ns() + ns, [h] { h.resume(); });
  }
  void await_resume() const noexcept {}
};

// co_await: a real store operation on the handler's own loop's store
// clients; the completion (on that loop) resumes the handler there.
struct StoreAwaiter {
  StoreSystem system;
  stores::StoreRequest request;
  LoopRef loop;
  stores::StoreResult result;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    // The awaiter lives in the suspended frame until the resumption, so the result can land in it.
    loop.clients->stores->run(system, request, [this, loop = loop, h](const stores::StoreResult& r) {
      result = r;
      loop.resume_later(h);  // a post, never a resumption inside the store client
    });
  }
  stores::StoreResult await_resume() { return std::move(result); }
};

// co_await: a follower fan-out's batch on the loop's store clients, all sent
// in this loop iteration (Redis: pipelined on its one connection, one round
// trip); resumed once, after the last answer.
struct StoreBatchAwaiter {
  StoreSystem system;
  std::vector<stores::StoreRequest> requests;
  LoopRef loop;
  stores::StoreResult result;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    loop.clients->stores->run_batch(system, std::move(requests), [this, loop = loop, h](const stores::StoreResult& r) {
      result = r;
      loop.resume_later(h);
    });
  }
  stores::StoreResult await_resume() { return std::move(result); }
};

// co_await: a slot of a capacity (nullptr: none, ready at once). A free
// slot is taken without suspending; otherwise the handler waits in the
// limiter's FCFS queue and the grant (or the deadline) posts its resumption
// back to this loop. Yields false when the deadline came first.
struct SlotAwaiter {
  CapacityLimit* limit;
  int64_t deadline_ns;
  ServiceRuntime& rt;
  LoopRef loop;
  bool granted = true;
  bool await_ready() const noexcept { return limit == nullptr; }
  bool await_suspend(std::coroutine_handle<> h) {
    // Written on the granting thread, read after the post to this loop (the post orders them).
    return !limit->acquire_async(deadline_ns, rt.timers(), [this, h, loop = loop](bool ok) {
      granted = ok;
      loop.resume_later(h);
    });
  }
  bool await_resume() const noexcept { return granted; }
};

// A call: its capacity's wait (inside the call, so inside its client span), then the RPC.
Task<int> run_call(ServiceRuntime& rt, CallScope& call, LoopRef loop) {
  call.probe().stamp_fn_start();
  CapacityLimit* slot = rt.limit(call.spec->limit_index);
  if (!co_await SlotAwaiter{slot, monotonic_ns() + rt.call_timeout_ns(), rt, loop}) {
    call.result = RpcStatus::kTimeout;
    call.probe().stamp_fn_end();
    co_return 0;
  }
  co_await CallAwaiter{rt, call, loop};
  if (slot) slot->release();
  co_return 0;
}

// One store operation: the span starts, the wait for the store's capacity,
// the real op (or the simulated latency); the span ends before the slot
// passes on. `missed`: a real read that found nothing.
Task<int> run_store_op(ServiceRuntime& rt, RequestScope& rs, const StoreOp& op, LoopRef loop, bool& missed) {
  SpanRecord span = rt.begin_store(rs, op);
  CapacityLimit* slot = rt.limit(op.limit_index);
  if (!co_await SlotAwaiter{slot, span.start_ns + rt.call_timeout_ns(), rt, loop}) {
    rt.mark_wait_timeout(span);
    rt.end_store(span);
    rt.fail_wait(rs);
    co_return 0;
  }
  if (op.fans_out()) {
    ServiceRuntime::FanOut fan = rt.fan_out(rs, op, span);
    if (rt.store_is_real(op)) {
      StoreBatchAwaiter batch{op.real_system, std::move(fan.requests), loop, {}};  // named: see below
      const stores::StoreResult r = co_await batch;
      missed = rt.complete_store(rs, op, span, r) || missed;
    } else {
      co_await SleepAwaiter{fan.simulated_ns(op), loop};
    }
  } else if (rt.store_is_real(op)) {
    // A named awaiter, not a temporary: GCC 12 mishandles a temporary awaiter with non-trivial members
    // in a co_await (free(): invalid pointer on resumption, GCC 12.2).
    StoreAwaiter store{op.real_system, rt.store_request(rs, op), loop, {}};
    const stores::StoreResult r = co_await store;
    missed = rt.complete_store(rs, op, span, r) || missed;
  } else {
    co_await SleepAwaiter{op.latency.sample_ns(rs.factor), loop};
  }
  rt.end_store(span);
  if (slot) slot->release();
  co_return 0;
}

// max_in_flight: one of k workers of a group instance; each takes the next
// call not yet started, so call i > k starts when an earlier one has ended.
Task<int> run_window(ServiceRuntime& rt, std::vector<std::unique_ptr<CallScope>>& calls, size_t& next, LoopRef loop) {
  while (next < calls.size()) {
    CallScope& call = *calls[next++];
    co_await run_call(rt, call, loop);
  }
  co_return 0;
}

Task<int> run_stages(ServiceRuntime& rt, RequestScope& rs, const StageList& stages, LoopRef loop) {
  for (const Stage& stage : stages) {
    if (rs.status != RpcStatus::kOk) co_return 0;
    switch (stage.kind) {
      case Stage::Kind::kCpu:
      case Stage::Kind::kWork:
        rt.run_compute(stage, rs.factor);
        break;
      case Stage::Kind::kStore: {
        bool missed = false;
        if (stage.store.parallel) {
          std::vector<Task<int>> ops;  // eager: every operation starts now
          for (int i = 0; i < stage.store.count; ++i) ops.push_back(run_store_op(rt, rs, stage.store, loop, missed));
          co_await exec::when_all(std::move(ops));
        } else {
          for (int i = 0; i < stage.store.count && rs.status == RpcStatus::kOk; ++i)
            co_await run_store_op(rt, rs, stage.store, loop, missed);
        }
        if (rs.status == RpcStatus::kOk && stage.store.on_miss && rt.store_missed(stage.store, missed)) {
          auto saved = rt.enter_miss(rs);  // the on_miss stages reuse the missed key's draw
          co_await run_stages(rt, rs, *stage.store.on_miss, loop);
          rt.leave_miss(rs, saved);
        }
        break;
      }
      case Stage::Kind::kCall: {
        auto call = rt.begin_call(rs, stage.call);
        co_await run_call(rt, *call, loop);
        rt.end_call(rs, *call);
        break;
      }
      case Stage::Kind::kGroup: {
        const CallGroup& g = stage.group;
        std::vector<std::unique_ptr<CallScope>> calls;
        for (const CallSpec& spec : g.calls) calls.push_back(rt.begin_call(rs, spec));
        if (g.max_in_flight > 0 && static_cast<size_t>(g.max_in_flight) < calls.size()) {
          // Waves of k (async calls only, the parser checks): k workers drain
          // the calls in order; then every call is joined in join order.
          for (auto& c : calls) c->probe().stamp_trigger();
          size_t next = 0;
          std::vector<Task<int>> workers;
          for (int64_t w = 0; w < g.max_in_flight; ++w) workers.push_back(run_window(rt, calls, next, loop));
          co_await exec::when_all(std::move(workers));
          for (size_t i : g.join_order) {
            calls[i]->probe().stamp_request();
            calls[i]->probe().stamp_received();
            rt.end_call(rs, *calls[i]);
          }
          break;
        }
        // Fan out: every async call starts now (Tasks are eager).
        std::vector<Task<int>> started(g.calls.size());
        for (size_t i = 0; i < calls.size(); ++i) {
          calls[i]->probe().stamp_trigger();
          if (g.calls[i].launch == CallSpec::Launch::kAsync) started[i] = run_call(rt, *calls[i], loop);
        }
        // Join in join order: a run of async calls is awaited with when_all;
        // a deferred call runs when reached.
        size_t pos = 0;
        while (pos < g.join_order.size()) {
          const size_t first = g.join_order[pos];
          if (g.calls[first].launch == CallSpec::Launch::kDeferred) {
            ++pos;
            if (rs.status != RpcStatus::kOk) continue;  // never requested after a failure
            calls[first]->probe().stamp_request();
            co_await run_call(rt, *calls[first], loop);
            calls[first]->probe().stamp_received();
            rt.end_call(rs, *calls[first]);
            continue;
          }
          std::vector<size_t> batch;
          std::vector<Task<int>> tasks;
          while (pos < g.join_order.size() && g.calls[g.join_order[pos]].launch == CallSpec::Launch::kAsync) {
            batch.push_back(g.join_order[pos]);
            tasks.push_back(std::move(started[g.join_order[pos]]));
            ++pos;
          }
          for (size_t i : batch) calls[i]->probe().stamp_request();
          co_await exec::when_all(std::move(tasks));
          for (size_t i : batch) {
            calls[i]->probe().stamp_received();
            rt.end_call(rs, *calls[i]);
          }
        }
        break;
      }
    }
  }
  co_return 0;
}

exec::DetachedCoroutine handle(ServiceRuntime& rt, RequestScope rs, LoopRef loop, int64_t* in_flight) {
  // The endpoint's capacity: the wait is inside the server span (begun at arrival).
  CapacityLimit* slot = rt.limit(rs.endpoint->limit_index);
  if (co_await SlotAwaiter{slot, rs.span.start_ns + rt.call_timeout_ns(), rt, loop}) {
    co_await run_stages(rt, rs, rs.endpoint->stages, loop);
    if (slot) slot->release();
  } else {
    rt.fail_wait(rs);
  }
  rt.finish(rs);
  --*in_flight;
}

class CoroutineModel final : public ConcurrencyModel {
 public:
  std::string_view name() const override { return "coroutine"; }
  void start(ServiceRuntime& rt, ListenSpec listen) override {
    const auto& o = rt.options();
    const size_t loops = o.loops ? o.loops : std::max(1u, std::thread::hardware_concurrency());
    in_flight_.assign(loops, 0);
    store_policy_ = rt.store_loop_policy();
    capacity_ = static_cast<int64_t>(o.queue_capacity);
    server_ =
        std::make_unique<EventLoopServer>(listen, loops, rt.counters(), [this, &rt](size_t i, InboundRequest&& r) {
          if (in_flight_[i] >= capacity_) {  // only loop i touches in_flight_[i]
            rt.reject(std::move(r));
            return;
          }
          auto rs = rt.begin(std::move(r));
          if (!rs) return;
          ++in_flight_[i];
          handle(rt, std::move(*rs), LoopRef{server_.get(), i, clients_[i].get()}, &in_flight_[i]);
        });
    for (size_t i = 0; i < loops; ++i) {
      auto c = std::make_unique<LoopClients>();
      c->loop = std::make_unique<ChannelLoop>(ChannelLoop::Driven{}, server_->events(i));
      c->drivers.add(c->loop.get());  // member 0: its pointer tokens need no member bits
      // Member 1: its tokens carry member_bits(1).
      c->stores = rt.make_store_loop(server_->events(i), net::LoopDrivers::member_bits(c->drivers.size()));
      if (c->stores) c->drivers.add(c->stores.get());
      server_->drive(i, &c->drivers);
      rt.count_channel_loop(c->loop.get());
      clients_.push_back(std::move(c));
    }
    server_->start();
  }
  void stop() override {
    if (!server_ || stopped_) return;
    stopped_ = true;
    // What close_clients() does for the runtime's channels, for each loop's own
    // (on its thread: only it touches them): the calls in flight fail while the
    // loops still run, so suspended handlers resume, answer and end instead of
    // being abandoned. Bounded: a handler still in flight after kDrainNs is
    // abandoned with the loops.
    const int64_t deadline_ns = monotonic_ns() + kDrainNs;
    std::vector<std::future<void>> drained;
    for (size_t i = 0; i < clients_.size(); ++i) {
      auto done = std::make_shared<std::promise<void>>();
      drained.push_back(done->get_future());
      server_->post(i, [this, i, done, deadline_ns] {
        for (auto& [_, ch] : clients_[i]->channels) ch->close();
        if (clients_[i]->stores) clients_[i]->stores->close();
        drain(i, done, deadline_ns);
      });
    }
    for (auto& d : drained) d.wait_for(std::chrono::nanoseconds(kDrainNs + 100'000'000));
    server_->stop();
    // The loops have stopped: their sockets close.
    for (auto& c : clients_) c->loop->stop();
  }
  nlohmann::json describe() const override {
    nlohmann::json d = {{"server", "one epoll loop per core, handlers as C++20 coroutines"},
                        {"loops", in_flight_.size()},
                        {"max_in_flight_per_loop", capacity_},
                        {"client", "multiplexed channels owned by each event loop, resumed on that loop"}};
    if (!store_policy_.is_null()) d["store_clients"] = store_policy_;
    return d;
  }

 private:
  static constexpr int64_t kDrainNs = 1'000'000'000;
  // On loop i: signals `done` once no handler is in flight there (or at the
  // deadline), looking again every millisecond on a loop timer.
  void drain(size_t i, const std::shared_ptr<std::promise<void>>& done, int64_t deadline_ns) {
    if (in_flight_[i] == 0 || monotonic_ns() >= deadline_ns) {
      done->set_value();
      return;
    }
    server_->schedule_on_loop(i, monotonic_ns() + 1'000'000,
                              [this, i, done, deadline_ns] { drain(i, done, deadline_ns); });
  }
  bool stopped_ = false;
  std::unique_ptr<EventLoopServer> server_;  // declared first: its loops' event sets outlive clients_
  std::vector<std::unique_ptr<LoopClients>> clients_;
  std::vector<int64_t> in_flight_;
  int64_t capacity_ = 0;
  nlohmann::json store_policy_;  // null: simulated stores
};

}  // namespace

std::unique_ptr<ConcurrencyModel> make_coroutine_model() { return std::make_unique<CoroutineModel>(); }

}  // namespace tailscope::svc
