// deferred: std::async(std::launch::deferred). Nothing runs until the value
// is requested; then the body runs on the requesting thread. Its "scheduling
// delay" is therefore ambiguous (async_probe.h reports both readings).
// Lighter mechanism: keep the callable and invoke it on request — what the
// deferred future does, minus its shared state.
#pragma once

#include <future>

#include "exec/async_model.h"

namespace tailscope::exec {

template <class T>
class DeferredModel final : public AsyncModel<T> {
 public:
  std::string_view name() const override { return "deferred"; }
  std::vector<ResultMechanism> mechanisms() const override {
    return {ResultMechanism::kFuture, ResultMechanism::kContinuation};
  }
  bool deferred() const override { return true; }

  std::unique_ptr<PendingCall<T>> launch(ResultMechanism m, std::function<T()> body) override {
    this->require(m);
    if (m == ResultMechanism::kFuture)
      return std::make_unique<FutureCall<T>>(std::async(std::launch::deferred, std::move(body)));
    return std::make_unique<InlineCall>(std::move(body));
  }

 private:
  struct InlineCall final : PendingCall<T> {
    explicit InlineCall(std::function<T()> b) : body(std::move(b)) {}
    void join(const Receiver<T>& receive) override { receive(invoke_for_value(body)); }
    std::function<T()> body;
  };
};

}  // namespace tailscope::exec
