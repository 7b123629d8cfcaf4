// coroutine: each call is a C++20 Task<T> whose body hops onto a pool with
// `co_await schedule_on(pool)` (a fixed-pool by default, so the difference to
// the fixed-pool model is the coroutine machinery alone).
//   future: the coroutine fulfils a std::promise, the caller blocks on the future;
//   resume: the caller's side is itself a coroutine that `co_await`s the task;
//           it is resumed with the value by the worker that completes the task
//           (symmetric transfer), and val_received is stamped there. The
//           consumer thread then learns that its joiner finished through a
//           OneShot, which is outside the probe: in a coroutine program the
//           code after the co_await runs at resumption.
#pragma once

#include <future>
#include <memory>

#include "exec/async_model.h"
#include "exec/coroutine.h"

namespace tailscope::exec {

template <class T>
class CoroutineModel final : public ExecutorModel<T> {
 public:
  using ExecutorModel<T>::ExecutorModel;
  using ExecutorModel<T>::executor;
  std::string_view name() const override { return "coroutine"; }
  std::vector<ResultMechanism> mechanisms() const override {
    return {ResultMechanism::kFuture, ResultMechanism::kResume};
  }

  std::unique_ptr<PendingCall<T>> launch(ResultMechanism m, std::function<T()> body) override {
    this->require(m);
    if (m == ResultMechanism::kFuture) {
      return promised_call<T>([&](FutureCall<T>&, std::promise<T> promise) {
        into_promise(executor(), std::move(promise), std::move(body));
      });
    }
    return std::make_unique<ResumeCall>(run_on(executor(), std::move(body)));
  }

 private:
  static DetachedCoroutine into_promise(Executor& executor, std::promise<T> promise, std::function<T()> body) {
    try {
      co_await schedule_on(executor);
    } catch (...) {
      promise.set_exception(std::current_exception());
      co_return;
    }
    fulfil(promise, body);
  }

  struct ResumeCall final : PendingCall<T> {
    explicit ResumeCall(Task<T> t) : task(std::move(t)) {}
    ~ResumeCall() override {
      if (!joined) sync_wait(task);  // never destroy a running coroutine
    }
    void join(const Receiver<T>& receive) override {
      joined = true;
      OneShot<void> finished;
      joiner(task, receive, finished);
      finished.get();
    }
    static DetachedCoroutine joiner(Task<T>& task, const Receiver<T>& receive, OneShot<void>& finished) {
      try {
        if constexpr (std::is_void_v<T>) {
          co_await task;
          receive(std::monostate{});
        } else {
          receive(co_await task);
        }
        finished.set_value(std::monostate{});
      } catch (...) {
        finished.set_exception(std::current_exception());
      }
    }
    Task<T> task;
    bool joined = false;
  };
};

}  // namespace tailscope::exec
