// std-thread: one std::thread per call, joined by the caller.
//   future: the thread fulfils a std::promise; the caller takes the value
//           from the future, then joins the thread (the join is the caller's
//           cost but comes after val_received).
//   join:   the thread writes the value into a plain slot; thread::join() is
//           the only synchronisation, so val_received is after the join.
#pragma once

#include <future>
#include <thread>

#include "exec/async_model.h"

namespace tailscope::exec {

template <class T>
class StdThreadModel final : public AsyncModel<T> {
 public:
  std::string_view name() const override { return "std-thread"; }
  std::vector<ResultMechanism> mechanisms() const override {
    return {ResultMechanism::kFuture, ResultMechanism::kJoin};
  }

  std::unique_ptr<PendingCall<T>> launch(ResultMechanism m, std::function<T()> body) override {
    this->require(m);
    if (m == ResultMechanism::kFuture) {
      return promised_call<T, ThreadFutureCall>([&](ThreadFutureCall& call, std::promise<T> promise) {
        call.thread = std::thread([p = std::move(promise), b = std::move(body)]() mutable { fulfil(p, b); });
      });
    }
    auto call = std::make_unique<JoinCall>();
    call->thread = std::thread([slot = call.get(), b = std::move(body)]() mutable {
      try {
        slot->value.emplace(invoke_for_value(b));
      } catch (...) {
        slot->error = std::current_exception();
      }
    });
    return call;
  }

 private:
  // The future, plus the thread that fulfils it and must be joined.
  struct ThreadFutureCall final : FutureCall<T> {
    ~ThreadFutureCall() override {
      if (thread.joinable()) thread.join();
    }
    void join(const Receiver<T>& receive) override {
      try {
        FutureCall<T>::join(receive);
      } catch (...) {
        // Join before the exception leaves: the thread still holds the
        // promise, and the exception object must not outlive it unordered.
        thread.join();
        throw;
      }
      thread.join();
    }
    std::thread thread;
  };
  struct JoinCall final : PendingCall<T> {
    ~JoinCall() override {
      if (thread.joinable()) thread.join();
    }
    void join(const Receiver<T>& receive) override {
      thread.join();
      if (error) std::rethrow_exception(error);
      receive(std::move(*value));
    }
    std::thread thread;
    std::optional<ValueOf<T>> value;
    std::exception_ptr error;
  };
};

}  // namespace tailscope::exec
