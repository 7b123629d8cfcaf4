// WorkItem: a move-only `void()` callable, the unit every executor queues.
//
// std::function needs copyable targets, but what we queue owns one-shot
// things (a std::promise, a coroutine handle), so we need move-only type
// erasure. C++23's std::move_only_function is not in g++ 12's C++20 mode.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace tailscope::exec {

class WorkItem {
 public:
  WorkItem() = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, WorkItem>>>
  WorkItem(F&& f) : impl_(std::make_unique<Impl<std::decay_t<F>>>(std::forward<F>(f))) {}  // NOLINT: implicit by design

  explicit operator bool() const noexcept { return impl_ != nullptr; }
  // Runs the callable once and releases it, so whatever it captured (a
  // promise) is destroyed on the thread that ran it, right after it ran.
  void operator()() {
    auto impl = std::move(impl_);
    impl->run();
  }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual void run() = 0;
  };
  template <class F>
  struct Impl final : Base {
    explicit Impl(F&& f) : fn(std::move(f)) {}
    explicit Impl(const F& f) : fn(f) {}
    void run() override { fn(); }
    F fn;
  };
  std::unique_ptr<Base> impl_;
};

}  // namespace tailscope::exec
