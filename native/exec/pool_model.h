// The AsyncModel over any pooled Executor (fixed-pool, spin-pool,
// work-stealing): the pool decides who runs the body; this file decides how
// the value comes back, once for all pools.
//   future:       the work item owns a std::promise and fulfils it;
//   continuation: the work item runs the body, then completes the caller's
//                 OneShot slot. If the pool drops the item unrun (cancel), its
//                 destructor completes the slot with broken_promise, exactly
//                 as a dropped std::promise would.
#pragma once

#include <future>
#include <memory>

#include "exec/async_model.h"

namespace tailscope::exec {

template <class T>
class PoolModel final : public ExecutorModel<T> {
 public:
  using ExecutorModel<T>::ExecutorModel;
  using ExecutorModel<T>::executor;
  std::string_view name() const override { return executor().model(); }
  std::vector<ResultMechanism> mechanisms() const override {
    return {ResultMechanism::kFuture, ResultMechanism::kContinuation};
  }

  std::unique_ptr<PendingCall<T>> launch(ResultMechanism m, std::function<T()> body) override {
    this->require(m);
    if (m == ResultMechanism::kFuture) {
      return promised_call<T>([&](FutureCall<T>&, std::promise<T> promise) {
        executor().submit([p = std::move(promise), b = std::move(body)]() mutable { fulfil(p, b); });
      });
    }
    auto call = std::make_unique<SlotCall>();
    executor().submit(SlotCompletion{&call->slot, std::move(body)});
    return call;
  }

 private:
  struct SlotCall final : PendingCall<T> {
    // The worker writes into `slot`: never free it under the worker's feet.
    ~SlotCall() override { slot.wait(); }
    void join(const Receiver<T>& receive) override { receive(slot.get()); }
    OneShot<T> slot;
  };
  // Move-only work item that completes `slot` exactly once: with the body's
  // value or exception when run, with broken_promise when destroyed unrun.
  struct SlotCompletion {
    OneShot<T>* slot;
    std::function<T()> body;
    SlotCompletion(OneShot<T>* s, std::function<T()> b) : slot(s), body(std::move(b)) {}
    SlotCompletion(SlotCompletion&& o) noexcept : slot(std::exchange(o.slot, nullptr)), body(std::move(o.body)) {}
    SlotCompletion& operator=(SlotCompletion&&) = delete;
    ~SlotCompletion() {
      if (slot) slot->set_exception(std::make_exception_ptr(std::future_error(std::future_errc::broken_promise)));
    }
    void operator()() {
      OneShot<T>* s = std::exchange(slot, nullptr);
      try {
        s->set_value(invoke_for_value(body));
      } catch (...) {
        s->set_exception(std::current_exception());
      }
    }
  };
};

}  // namespace tailscope::exec
