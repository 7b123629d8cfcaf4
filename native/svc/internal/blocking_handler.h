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
#include <vector>

#include "svc/runtime.h"

namespace tailscope::svc::internal {

template <class Launcher>
void run_stages_blocking(ServiceRuntime& rt, RequestScope& rs, const StageList& stages, Launcher& launcher) {
  for (const Stage& stage : stages) {
    if (rs.status != RpcStatus::kOk) return;  // a failed stage ends the handler, as an exception would
    switch (stage.kind) {
      case Stage::Kind::kCpu:
      case Stage::Kind::kWork:
        rt.run_compute(stage);
        break;
      case Stage::Kind::kStore: {
        // Real ops block this thread in the store client (a pooled
        // connection, bounded by the store timeout); simulated ones sleep.
        bool missed = false;
        for (int i = 0; i < stage.store.count && rs.status == RpcStatus::kOk; ++i) {
          SpanRecord span = rt.begin_store(rs, stage.store);
          if (rt.store_is_real(stage.store))
            missed = rt.complete_store(rs, span, rt.run_store_blocking(rs, stage.store)) || missed;
          else
            blocking_wait_ns(stage.store.latency.sample_ns(), rt.stopping());
          rt.end_store(span);
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
        for (const CallSpec& spec : stage.group.calls) handles.push_back(launcher.launch(rt.begin_call(rs, spec)));
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

}  // namespace tailscope::svc::internal
