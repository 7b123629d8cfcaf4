// C++20 coroutines for async calls: Task<T>, schedule_on(executor),
// when_all, sync_wait.
//
// Task<T> is *eager*: calling a Task-returning coroutine runs it on the
// caller's thread up to its first suspension — typically
// `co_await schedule_on(pool)`, which hands the rest of the body to a pool
// worker. Whoever `co_await`s the task is resumed with its value by the
// thread that completes it (symmetric transfer: no queue, no wake-up), or
// continues at once if it had already completed.
//
// Completion race, one atomic word in the promise:
//   nullptr                 running, nobody waiting
//   address of awaiter      an awaiter is suspended on it
//   kDone                   finished; value or exception is set
// The finishing side exchanges kDone in and resumes the awaiter if it found
// one; the awaiting side CASes its address in and, if it finds kDone, does not
// suspend. After that exchange the finishing side never touches the frame, so
// the awaiter may destroy it at once.
//
// A Task must be awaited (or sync_wait-ed) before it is destroyed.
#pragma once

#include <atomic>
#include <coroutine>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "exec/executor.h"
#include "exec/one_shot.h"

namespace tailscope::exec {

template <class T>
class Task;

namespace internal {

inline void* task_done_marker() noexcept {
  static char marker;
  return &marker;
}

struct TaskPromiseBase {
  std::atomic<void*> state{nullptr};
  std::exception_ptr error;

  std::suspend_never initial_suspend() noexcept { return {}; }
  struct FinalAwaiter {
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> self) noexcept {
      void* waiter = self.promise().state.exchange(task_done_marker(), std::memory_order_acq_rel);
      // From here on the frame may already be gone: touch nothing of it.
      if (waiter != nullptr) return std::coroutine_handle<>::from_address(waiter);
      return std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { error = std::current_exception(); }
};

template <class T>
struct TaskPromise : TaskPromiseBase {
  std::optional<T> value;
  Task<T> get_return_object() noexcept;
  template <class U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
};

template <>
struct TaskPromise<void> : TaskPromiseBase {
  Task<void> get_return_object() noexcept;
  void return_void() noexcept {}
};

}  // namespace internal

template <class T>
class [[nodiscard]] Task {
 public:
  using promise_type = internal::TaskPromise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Task() = default;
  explicit Task(Handle h) noexcept : h_(h) {}
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }

  bool done() const noexcept {
    return h_.promise().state.load(std::memory_order_acquire) == internal::task_done_marker();
  }

  // Awaitable (on an lvalue: `co_await task`).
  bool await_ready() const noexcept { return done(); }
  bool await_suspend(std::coroutine_handle<> waiter) noexcept {
    void* expected = nullptr;
    // Fails only if the task finished meanwhile: then do not suspend.
    return h_.promise().state.compare_exchange_strong(expected, waiter.address(), std::memory_order_acq_rel,
                                                      std::memory_order_acquire);
  }
  T await_resume() {
    auto& p = h_.promise();
    if (p.error) std::rethrow_exception(p.error);
    if constexpr (!std::is_void_v<T>) return std::move(*p.value);
  }

 private:
  Handle h_;
};

namespace internal {
template <class T>
Task<T> TaskPromise<T>::get_return_object() noexcept {
  return Task<T>(std::coroutine_handle<TaskPromise<T>>::from_promise(*this));
}
inline Task<void> TaskPromise<void>::get_return_object() noexcept {
  return Task<void>(std::coroutine_handle<TaskPromise<void>>::from_promise(*this));
}
}  // namespace internal

// A fire-and-forget coroutine: runs eagerly, frees its own frame at the end.
// Exceptions must be handled inside (one escaping terminates).
struct DetachedCoroutine {
  struct promise_type {
    DetachedCoroutine get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

// `co_await schedule_on(executor)`: continue on one of the executor's
// threads. If the executor no longer accepts work, the co_await throws
// ExecutorClosed at once; if it drops the queued resumption unrun (cancel),
// the coroutine is resumed on the cancelling thread and the co_await throws
// ExecutorClosed there.
class ScheduleOn {
 public:
  explicit ScheduleOn(Executor& executor) noexcept : executor_(executor) {}
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    WorkItem item(Resumption{h, this});
    if (executor_.try_submit(item)) return true;  // may already be running elsewhere: touch nothing
    rejected_ = true;                             // still ours: disarm the item, continue here and throw
    item = WorkItem();
    return false;
  }
  void await_resume() const {
    if (rejected_) throw ExecutorClosed(std::string(executor_.model()) + ": not accepting work");
    if (cancelled_) throw ExecutorClosed(std::string(executor_.model()) + ": cancelled before it ran");
  }

 private:
  // Resumes the coroutine when run; when destroyed unrun (the executor
  // cancelled it) resumes it too, flagged, so the co_await throws.
  struct Resumption {
    std::coroutine_handle<> h;
    ScheduleOn* awaiter;
    Resumption(std::coroutine_handle<> handle, ScheduleOn* a) noexcept : h(handle), awaiter(a) {}
    Resumption(Resumption&& o) noexcept : h(std::exchange(o.h, {})), awaiter(o.awaiter) {}
    Resumption& operator=(Resumption&&) = delete;
    ~Resumption() {
      if (h && !awaiter->rejected_) {
        awaiter->cancelled_ = true;
        h.resume();
      }
    }
    void operator()() { std::exchange(h, {}).resume(); }
  };
  Executor& executor_;
  bool rejected_ = false;
  bool cancelled_ = false;
};
inline ScheduleOn schedule_on(Executor& executor) noexcept { return ScheduleOn(executor); }

// Runs fn() on `executor` as a Task.
template <class F>
auto run_on(Executor& executor, F fn) -> Task<std::invoke_result_t<F&>> {
  co_await schedule_on(executor);
  co_return fn();
}

// Awaits every task (they already run concurrently: Tasks are eager), in
// order; values in the same order. The first exception is rethrown after all
// tasks finished, so none is destroyed while running.
template <class T>
Task<std::vector<T>> when_all(std::vector<Task<T>> tasks) {
  std::vector<T> values;
  values.reserve(tasks.size());
  std::exception_ptr first_error;
  for (auto& t : tasks) {
    try {
      values.push_back(co_await t);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
  co_return values;
}

inline Task<void> when_all(std::vector<Task<void>> tasks) {
  std::exception_ptr first_error;
  for (auto& t : tasks) {
    try {
      co_await t;
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

namespace internal {
template <class T>
DetachedCoroutine await_into(Task<T>& task, OneShot<T>& slot) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await task;
      slot.set_value(std::monostate{});
    } else {
      slot.set_value(co_await task);
    }
  } catch (...) {
    slot.set_exception(std::current_exception());
  }
}
}  // namespace internal

// Blocks the calling (non-coroutine) thread until `task` completes; returns
// its value (std::monostate for void) or rethrows its exception.
template <class T>
ValueOf<T> sync_wait(Task<T>& task) {
  OneShot<T> slot;
  internal::await_into(task, slot);
  return slot.get();
}

}  // namespace tailscope::exec
