// std-async: std::async(std::launch::async). libstdc++ creates one thread per
// call and the future's shared state joins it — the pattern the capstone found
// putting milliseconds of scheduling and join delay on DeathStarBench's
// critical path. Measured as is (a baseline is never handicapped); it has no
// lighter mechanism of its own.
#pragma once

#include <future>

#include "exec/async_model.h"

namespace tailscope::exec {

template <class T>
class StdAsyncModel final : public AsyncModel<T> {
 public:
  std::string_view name() const override { return "std-async"; }
  std::vector<ResultMechanism> mechanisms() const override { return {ResultMechanism::kFuture}; }

  std::unique_ptr<PendingCall<T>> launch(ResultMechanism m, std::function<T()> body) override {
    this->require(m);
    // The future's destructor joins the thread if join() never ran.
    return std::make_unique<FutureCall<T>>(std::async(std::launch::async, std::move(body)));
  }
};

}  // namespace tailscope::exec
