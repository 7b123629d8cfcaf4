// Every model by name: what the benchmark and the tests iterate over.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "exec/async_model.h"
#include "exec/coroutine_model.h"
#include "exec/deferred.h"
#include "exec/fixed_pool.h"
#include "exec/pool_model.h"
#include "exec/spin_pool.h"
#include "exec/std_async.h"
#include "exec/std_thread.h"
#include "exec/work_stealing.h"

namespace tailscope::exec {

// In report order: the per-call baselines first, then pools, then coroutines.
inline const std::vector<std::string>& async_model_names() {
  static const std::vector<std::string> names = {"deferred",  "std-async",     "std-thread", "fixed-pool",
                                                 "spin-pool", "work-stealing", "coroutine"};
  return names;
}

// True for models that create one thread per call (their producer is left
// unpinned: a pinned creator would pin every thread it creates).
inline bool creates_thread_per_call(std::string_view model) { return model == "std-async" || model == "std-thread"; }

// Builds model `name` for payload T; pools get `pool`. Throws
// std::invalid_argument naming the model if it is unknown.
template <class T>
std::unique_ptr<AsyncModel<T>> make_async_model(std::string_view name, const PoolOptions& pool = {}) {
  if (name == "deferred") return std::make_unique<DeferredModel<T>>();
  if (name == "std-async") return std::make_unique<StdAsyncModel<T>>();
  if (name == "std-thread") return std::make_unique<StdThreadModel<T>>();
  if (name == "fixed-pool") return std::make_unique<PoolModel<T>>(std::make_unique<FixedThreadPool>(pool));
  if (name == "spin-pool") return std::make_unique<PoolModel<T>>(std::make_unique<SpinPool>(pool));
  if (name == "work-stealing") return std::make_unique<PoolModel<T>>(std::make_unique<WorkStealingPool>(pool));
  if (name == "coroutine") return std::make_unique<CoroutineModel<T>>(std::make_unique<FixedThreadPool>(pool));
  throw std::invalid_argument("unknown async model '" + std::string(name) + "'");
}

}  // namespace tailscope::exec
