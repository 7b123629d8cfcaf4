// The stage interpreter of the three blocking models (std-async, std-thread,
// pool-blocking): the handler thread walks the stages in order and blocks
// wherever the stage waits. What differs between the three — how an async
// or deferred call is launched and joined — is the Launcher:
//
//   struct Launcher {
//     struct Handle;                                        // one launched call
//     Handle launch(std::unique_ptr<CallScope> call);       // stamps trigger_async_fn
//     void join(Handle& h);     // stamps request_val … val_received; sets h's call->result
//     CallScope& scope(Handle& h);
//     void call_sync(CallScope& call);                      // a plain blocking call
//   };
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "svc/runtime.h"

namespace tailscope::svc::internal {

// One repetition of a store stage on the calling thread: the span starts,
// then the wait for the store's capacity (inside the span), then the operation
// (a fan-out stage's whole batch).
// False when the wait reached the call timeout (the span records it; the caller
// fails the request). `missed`: a real read that found nothing.
inline bool run_store_op_blocking(ServiceRuntime& rt, RequestScope& rs, const StoreOp& op, bool& missed) {
  SpanRecord span = rt.begin_store(rs, op);
  CapacityLimit* slot = rt.limit(op.limit_index);
  if (slot && !slot->acquire(span.start_ns + rt.call_timeout_ns())) {
    rt.mark_wait_timeout(span);
    rt.end_store(span);
    return false;
  }
  if (op.fans_out()) {
    // A follower fan-out: the whole batch on one pooled connection (Redis:
    // pipelined, one round trip), or one simulated draw for that round trip.
    const ServiceRuntime::FanOut fan = rt.fan_out(rs, op, span);
    if (rt.store_is_real(op))
      missed = rt.complete_store(rs, op, span, rt.run_fan_out_blocking(op, fan)) || missed;
    else
      blocking_wait_ns(fan.simulated_ns(op), rt.stopping());
  } else if (rt.store_is_real(op)) {
    missed = rt.complete_store(rs, op, span, rt.run_store_blocking(rs, op)) || missed;
  } else {
    blocking_wait_ns(op.latency.sample_ns(rs.factor), rt.stopping());
  }
  // The span ends before the slot passes on: the next holder's operation
  // starts after this span's end, as a trace of a real lock shows it.
  rt.end_store(span);
  if (slot) slot->release();
  return true;
}

// `parallel: true` (simulated only): the count operations on threads of
// their own, as a blocking program runs a chain in parallel; the stage ends
// when the last one has. A thread the system refuses runs its op inline.
inline void run_parallel_store_blocking(ServiceRuntime& rt, RequestScope& rs, const StoreOp& op) {
  std::vector<std::thread> threads;
  std::vector<char> ok(static_cast<size_t>(op.count), 1);
  bool unused_missed = false;  // simulated: nothing to miss
  for (int i = 0; i < op.count; ++i) {
    auto body = [&rt, &rs, &op, flag = &ok[static_cast<size_t>(i)]] {
      bool missed = false;
      *flag = run_store_op_blocking(rt, rs, op, missed) ? 1 : 0;
    };
    try {
      threads.emplace_back(body);
    } catch (const std::system_error&) {
      ok[static_cast<size_t>(i)] = run_store_op_blocking(rt, rs, op, unused_missed) ? 1 : 0;
    }
  }
  for (auto& t : threads) t.join();
  for (char o : ok)
    if (!o) {
      rt.fail_wait(rs);
      return;
    }
}

template <class Launcher>
void run_stages_blocking(ServiceRuntime& rt, RequestScope& rs, const StageList& stages, Launcher& launcher) {
  for (const Stage& stage : stages) {
    if (rs.status != RpcStatus::kOk) return;  // a failed stage ends the handler, as an exception would
    switch (stage.kind) {
      case Stage::Kind::kCpu:
      case Stage::Kind::kWork:
        rt.run_compute(stage, rs.factor);
        break;
      case Stage::Kind::kStore: {
        // Real ops block this thread in the store client (a pooled
        // connection, bounded by the store timeout); simulated ones sleep.
        bool missed = false;
        if (stage.store.parallel) {
          run_parallel_store_blocking(rt, rs, stage.store);
        } else {
          for (int i = 0; i < stage.store.count && rs.status == RpcStatus::kOk; ++i)
            if (!run_store_op_blocking(rt, rs, stage.store, missed)) rt.fail_wait(rs);
        }
        if (rs.status == RpcStatus::kOk && stage.store.on_miss && rt.store_missed(stage.store, missed)) {
          auto saved = rt.enter_miss(rs);
          run_stages_blocking(rt, rs, *stage.store.on_miss, launcher);
          rt.leave_miss(rs, saved);
        }
        break;
      }
      case Stage::Kind::kCall: {
        auto call = rt.begin_call(rs, stage.call);
        launcher.call_sync(*call);
        rt.end_call(rs, *call);
        break;
      }
      case Stage::Kind::kGroup: {
        std::vector<typename Launcher::Handle> handles;
        handles.reserve(stage.group.calls.size());
        // max_in_flight k: a window of k slots for this group instance; the
        // handler takes one before launching each call (in order) and the
        // call gives it back when it ends, so call i > k starts when an
        // earlier one has ended. Every call ends by its timeout; should the
        // window still not open by then, the call starts anyway (never a hang).
        std::shared_ptr<CapacityLimit> window;
        if (stage.group.max_in_flight > 0 && static_cast<size_t>(stage.group.max_in_flight) < stage.group.calls.size())
          window = std::make_shared<CapacityLimit>(stage.group.max_in_flight);
        for (const CallSpec& spec : stage.group.calls) {
          const bool slot = window && window->acquire(monotonic_ns() + 2 * rt.call_timeout_ns() + 1'000'000'000);
          auto call = rt.begin_call(rs, spec);
          if (slot) call->group_slot = window;
          handles.push_back(launcher.launch(std::move(call)));
        }
        // Every launched call is joined, even after a failure: a future of
        // std::async would block in its destructor anyway, and a thread must be joined.
        for (size_t index : stage.group.join_order) {
          // After a failure a deferred call is never requested (DeathStarBench's
          // handler has thrown by then), so it never runs.
          if (rs.status != RpcStatus::kOk && stage.group.calls[index].launch == CallSpec::Launch::kDeferred) continue;
          launcher.join(handles[index]);
          rt.end_call(rs, launcher.scope(handles[index]));
        }
        break;
      }
    }
  }
}

// A request of an endpoint: the wait for the endpoint's capacity (inside the
// server span, which began at arrival), then its stages.
template <class Launcher>
void run_endpoint_blocking(ServiceRuntime& rt, RequestScope& rs, Launcher& launcher) {
  CapacityLimit* slot = rt.limit(rs.endpoint->limit_index);
  if (slot && !slot->acquire(rs.span.start_ns + rt.call_timeout_ns())) {
    rt.fail_wait(rs);
    return;
  }
  run_stages_blocking(rt, rs, rs.endpoint->stages, launcher);
  if (slot) slot->release();
}

}  // namespace tailscope::svc::internal
