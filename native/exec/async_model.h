// AsyncModel<T>: how one concurrency model launches a call returning T and
// hands its value back. One implementation per model file (deferred.h,
// std_async.h, std_thread.h, pool_model.h over fixed_pool / spin_pool /
// work_stealing, coroutine_model.h), all behind this interface so the
// benchmark — and a reader — can put them side by side.
//
// Every model offers the std::promise/std::future mechanism (as in the
// capstone study) and, where it has one, its own lighter mechanism:
//   continuation  pools: the worker runs the body, then a continuation writes
//                 the value into a caller-owned OneShot slot (no shared state);
//                 deferred: the stored callable is simply invoked on request
//   join          std-thread: the thread writes the value into a plain slot;
//                 std::thread::join() is the synchronisation
//   resume        coroutine: the awaiting coroutine is resumed with the value
//                 (on the thread that completed the task, by symmetric transfer)
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "exec/executor.h"
#include "exec/one_shot.h"

namespace tailscope::exec {

enum class ResultMechanism { kFuture, kContinuation, kJoin, kResume };

constexpr std::string_view mechanism_name(ResultMechanism m) noexcept {
  switch (m) {
    case ResultMechanism::kFuture:
      return "future";
    case ResultMechanism::kContinuation:
      return "continuation";
    case ResultMechanism::kJoin:
      return "join";
    case ResultMechanism::kResume:
      return "resume";
  }
  return "?";
}

template <class T>
using Receiver = std::function<void(ValueOf<T>)>;

// A launched call whose value has not been taken yet.
template <class T>
class PendingCall {
 public:
  virtual ~PendingCall() = default;
  // Waits for the value and passes it to `receive` at the instant the
  // mechanism delivers it (the probe stamps val_received there), then
  // returns. Rethrows the call's exception instead of calling `receive`.
  // Call at most once.
  virtual void join(const Receiver<T>& receive) = 0;
};

template <class T>
class AsyncModel {
 public:
  virtual ~AsyncModel() = default;
  virtual std::string_view name() const = 0;
  // Future first, then the model's own lighter mechanism if it has one.
  virtual std::vector<ResultMechanism> mechanisms() const = 0;
  // True when the body runs inside join() on the joining thread.
  virtual bool deferred() const { return false; }
  // Launches `body`. Throws std::system_error when a thread cannot be
  // created (EAGAIN), ExecutorClosed after shutdown, std::invalid_argument
  // for a mechanism the model does not offer.
  virtual std::unique_ptr<PendingCall<T>> launch(ResultMechanism mechanism, std::function<T()> body) = 0;
  // Pools: see Executor::shutdown. Per-call models have nothing to stop.
  virtual void shutdown(ShutdownMode) {}
  // Pools: their executor's idle-path counters; per-call models have none.
  virtual std::optional<ExecutorCounters> pool_counters() const { return std::nullopt; }

 protected:
  void require(ResultMechanism m) const {
    for (ResultMechanism offered : mechanisms())
      if (offered == m) return;
    throw std::invalid_argument(std::string(name()) + " has no '" + std::string(mechanism_name(m)) +
                                "' result mechanism");
  }
};

// Joins `call` and returns its value (tests, simple callers).
template <class T>
ValueOf<T> join_value(PendingCall<T>& call) {
  std::optional<ValueOf<T>> out;
  call.join([&](ValueOf<T> v) { out.emplace(std::move(v)); });
  return std::move(*out);
}

// Runs body into a std::promise: the one place a body's value or exception
// is forwarded, shared by every model that uses a promise.
template <class T>
void fulfil(std::promise<T>& promise, std::function<T()>& body) {
  try {
    if constexpr (std::is_void_v<T>) {
      body();
      promise.set_value();
    } else {
      promise.set_value(body());
    }
  } catch (...) {
    promise.set_exception(std::current_exception());
  }
}

// Hands a std::future's value to a receiver.
template <class T>
void receive_from(std::future<T>& future, const Receiver<T>& receive) {
  if constexpr (std::is_void_v<T>) {
    future.get();
    receive(std::monostate{});
  } else {
    receive(future.get());
  }
}

// The std::promise/std::future mechanism every model offers, written once:
// the caller's side of a call is a future (or, for a model that must also
// join something, a subclass that adds it).
template <class T>
struct FutureCall : PendingCall<T> {
  FutureCall() = default;
  explicit FutureCall(std::future<T> f) : future(std::move(f)) {}
  void join(const Receiver<T>& receive) override { receive_from(future, receive); }
  std::future<T> future;
};

// Makes a Call (FutureCall<T> or a subclass) holding the future of a fresh
// promise and hands the promise to start(call, promise), which gives it to
// whoever runs the body — the only thing that differs between models.
template <class T, class Call = FutureCall<T>, class Start>
std::unique_ptr<Call> promised_call(Start&& start) {
  auto call = std::make_unique<Call>();
  std::promise<T> promise;
  call->future = promise.get_future();
  start(*call, std::move(promise));
  return call;
}

// A model whose calls run on an Executor it owns (the pools, coroutines):
// shutting the model down and reading its idle-path counters are the
// executor's, once for all such models.
template <class T>
class ExecutorModel : public AsyncModel<T> {
 public:
  explicit ExecutorModel(std::unique_ptr<Executor> executor) : executor_(std::move(executor)) {}
  Executor& executor() const { return *executor_; }
  void shutdown(ShutdownMode mode) override { executor_->shutdown(mode); }
  std::optional<ExecutorCounters> pool_counters() const override { return executor_->counters(); }

 private:
  std::unique_ptr<Executor> executor_;
};

}  // namespace tailscope::exec
