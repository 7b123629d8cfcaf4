#include "prof/stress/driver.h"

#include <atomic>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/affinity.h"
#include "core/clock.h"
#include "core/stop_signals.h"
#include "prof/cache_sizes.h"

namespace tailscope::prof::stress {
namespace {

using nlohmann::json;

// Duty cycles are applied per 10 ms period: long enough that the sleep's own
// cost is small, short enough that a service beside it sees steady pressure.
constexpr int64_t kPeriodNs = 10'000'000;

void sleep_until(int64_t when_ns) {
  const int64_t now = monotonic_ns();
  if (when_ns <= now) return;
  const int64_t d = when_ns - now;
  timespec ts{d / 1'000'000'000, d % 1'000'000'000};
  nanosleep(&ts, nullptr);
}

}  // namespace

StressOutcome run_stress(const StressConfig& config, const sigset_t& stop_set, const std::function<void()>& on_ready,
                         const std::function<void(const std::string&)>& message) {
  StressOutcome out;
  if (config.cpus.empty()) throw std::invalid_argument("--cpus: no CPU to run on");
  const CacheSizes caches = read_cache_sizes(config.cpus.front());
  const size_t available = mem_available_bytes();
  size_t ws = config.working_set_bytes ? config.working_set_bytes
                                       : default_working_set_bytes(config.kernel, caches, available,
                                                                   config.memcap_max_fraction, config.instances);
  // Never more memory than the cap allows: asking for more than is free is
  // clamped (with a message), not an OOM kill of the services under test.
  if (has_memory_working_set(config.kernel) && available > 0) {
    const double limit = config.memcap_max_fraction * static_cast<double>(available);
    const double total = static_cast<double>(ws) * config.instances;
    if (total > limit) {
      const size_t to = static_cast<size_t>(limit / config.instances);
      out.clamped = {{"requested_bytes", ws},
                     {"available_bytes", available},
                     {"max_fraction", config.memcap_max_fraction},
                     {"to_bytes", to}};
      message("asked for " + std::to_string(ws) + " bytes × " + std::to_string(config.instances) +
              " instances, but only " + std::to_string(available) + " bytes are free and --memcap-max-fraction is " +
              std::to_string(config.memcap_max_fraction) + ": clamped to " + std::to_string(to) +
              " bytes per instance");
      ws = to;
    }
  }
  out.requested_working_set_bytes = ws;

  const int n = config.instances;
  std::vector<std::unique_ptr<StressKernel>> kernels;
  for (int i = 0; i < n; ++i) kernels.push_back(make_kernel(config.kernel));
  out.pressure.assign(n, Pressure{});
  out.working_set_bytes.assign(n, 0);
  out.busy_s.assign(n, 0.0);

  std::mutex mu;
  std::condition_variable cv;
  int prepared = 0;
  std::string failure;
  bool go = false;
  std::atomic<bool> stop{false};
  int64_t start_ns = 0;
  const int64_t duration_ns = static_cast<int64_t>(config.duration_s * 1e9);

  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      const int cpu = config.cpus[static_cast<size_t>(i) % config.cpus.size()];
      std::string error;
      try {
        if (!pin_current_thread(cpu, &error)) throw std::runtime_error("instance " + std::to_string(i) + ": " + error);
        kernels[i]->prepare(ws);  // allocated by the pinned thread: first-touch puts pages near its CPU
      } catch (const std::exception& e) {
        error = std::string("instance ") + std::to_string(i) + ": " + e.what();
      }
      {
        std::unique_lock lock(mu);
        if (!error.empty() && failure.empty()) failure = error;
        ++prepared;
        cv.notify_all();
        cv.wait(lock, [&] { return go; });
      }
      if (!failure.empty()) return;
      Pressure& p = out.pressure[i];
      int64_t period_start = start_ns;
      int64_t busy_ns = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        kernels[i]->set_progress(duration_ns > 0 ? static_cast<double>(period_start - start_ns) / duration_ns : 1.0);
        const int64_t busy_until = period_start + static_cast<int64_t>(config.duty_cycle * kPeriodNs);
        int64_t now = monotonic_ns();
        const int64_t busy_from = now;
        do {
          kernels[i]->run_chunk(p);
          now = monotonic_ns();
        } while (now < busy_until && !stop.load(std::memory_order_relaxed));
        busy_ns += now - busy_from;
        period_start += kPeriodNs;
        if (config.duty_cycle < 1.0) sleep_until(period_start);
        if (period_start < monotonic_ns() - kPeriodNs) period_start = monotonic_ns();  // fell behind: no catch-up burst
      }
      out.busy_s[i] = busy_ns / 1e9;
      out.working_set_bytes[i] = kernels[i]->working_set_bytes();
    });
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return prepared == n; });
  }
  if (failure.empty()) on_ready();
  {
    std::lock_guard lock(mu);
    start_ns = monotonic_ns();
    go = true;
  }
  cv.notify_all();
  out.stopped_by = "duration";
  if (failure.empty()) {
    const int sig = wait_for_stop(stop_set, start_ns + duration_ns);
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
      out.stopped_by = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGHUP";
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  out.ran_s = (monotonic_ns() - start_ns) / 1e9;
  if (!failure.empty()) throw std::runtime_error(failure);
  return out;
}

json outcome_json(const StressConfig& config, const StressOutcome& outcome) {
  Pressure total;
  size_t ws_sum = 0;
  double busy = 0;
  for (size_t i = 0; i < outcome.pressure.size(); ++i) {
    total.accesses += outcome.pressure[i].accesses;
    total.bytes += outcome.pressure[i].bytes;
    total.flops += outcome.pressure[i].flops;
    ws_sum += outcome.working_set_bytes[i];
    busy += outcome.busy_s[i];
  }
  const double s = outcome.ran_s;
  const bool memory = has_memory_working_set(config.kernel);
  json achieved = json::object();
  json reasons = json::object();
  if (s <= 0) {
    for (const char* k : {"accesses_per_s", "bytes_per_s", "flops_per_s"}) {
      achieved[k] = nullptr;
      reasons[k] = "the run lasted no time";
    }
  } else if (memory) {
    achieved["accesses_per_s"] = total.accesses / s;
    achieved["bytes_per_s"] = total.bytes / s;
    achieved["flops_per_s"] = nullptr;
    reasons["flops_per_s"] = "not a compute kernel";
  } else {
    achieved["accesses_per_s"] = nullptr;
    achieved["bytes_per_s"] = nullptr;
    reasons["accesses_per_s"] = reasons["bytes_per_s"] = "cpu loads execution ports, not memory (flops_per_s)";
    achieved["flops_per_s"] = total.flops / s;
  }
  const size_t instances = outcome.working_set_bytes.size();
  if (memory && instances > 0) {
    achieved["working_set_bytes"] = ws_sum / instances;
  } else {
    achieved["working_set_bytes"] = nullptr;
    reasons["working_set_bytes"] = "cpu keeps three small matrices in L1; its pressure is on execution ports";
  }
  achieved["total_working_set_bytes"] = memory ? json(ws_sum) : json(nullptr);
  achieved["busy_fraction"] = s > 0 && instances > 0 ? json(busy / (s * instances)) : json(nullptr);
  achieved["reasons"] = reasons;
  json per_instance = json::array();
  for (size_t i = 0; i < instances; ++i)
    per_instance.push_back({{"cpu", config.cpus[i % config.cpus.size()]},
                            {"accesses", outcome.pressure[i].accesses},
                            {"bytes", outcome.pressure[i].bytes},
                            {"working_set_bytes", outcome.working_set_bytes[i]},
                            {"busy_s", outcome.busy_s[i]}});
  return {{"kernel", config.kernel},
          {"instances", config.instances},
          {"cpus", format_cpu_list(config.cpus)},
          {"working_set_bytes", memory ? json(outcome.requested_working_set_bytes) : json(nullptr)},
          {"duty_cycle", config.duty_cycle},
          {"duration_s", config.duration_s},
          {"ran_s", outcome.ran_s},
          {"stopped_by", outcome.stopped_by},
          {"clamped", outcome.clamped},
          {"achieved", achieved},
          {"per_instance", per_instance}};
}

}  // namespace tailscope::prof::stress
