#include "echo/server.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <stdexcept>

#include "core/affinity.h"
#include "core/clock.h"

namespace tailscope::echo {

StopSignal::StopSignal() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) throw std::runtime_error("eventfd failed");
}

StopSignal::~StopSignal() { ::close(fd_); }

void StopSignal::request() noexcept {
  requested_.store(true, std::memory_order_release);
  uint64_t one = 1;
  ssize_t r = ::write(fd_, &one, sizeof one);
  (void)r;
}

namespace {
// One phase for the whole process: every thread (and every connection thread
// of thread-per-connection) stalls in the same windows, as a GC pause would.
int64_t process_stall_origin_ns() {
  static const int64_t origin = monotonic_ns();
  return origin;
}
}  // namespace

StallSchedule::StallSchedule(const ServerConfig& config)
    : t0_ns_(process_stall_origin_ns()),
      every_ns_(config.stall_every_ms * 1'000'000),
      stall_ns_(config.stall_ms * 1'000'000) {}

void StallSchedule::maybe_stall() const {
  if (!enabled()) return;
  const int64_t now = monotonic_ns();
  const int64_t phase = (now - t0_ns_) % every_ns_;
  if (phase < stall_ns_) sleep_until_ns(now - phase + stall_ns_);
}

void pin_worker(const ServerConfig& config, int worker_index) {
  if (config.cpus.empty()) return;
  std::string error;
  const int cpu = config.cpus[static_cast<size_t>(worker_index) % config.cpus.size()];
  if (!pin_current_thread(cpu, &error))
    throw std::runtime_error("cannot pin worker to CPU " + std::to_string(cpu) + ": " + error);
}

const std::vector<Model>& all_models() {
  static const std::vector<Model> models = {
      {"epoll", "one thread, non-blocking sockets, level-triggered epoll", false, run_epoll},
      {"thread-per-connection", "one blocking thread per connection, blocking accept", false,
       run_thread_per_connection},
      {"poll", "one thread, poll() over every socket, read/write right after readiness", false, run_poll},
      {"poll-pool", "one poll() thread hands ready sockets to a fixed pool that reads and writes", false,
       run_poll_pool},
      {"asio", "Boost.Asio, callbacks, one io_context run by one thread", false, run_asio},
      {"asio-mt", "Boost.Asio, callbacks, one io_context run by --threads threads", false, run_asio_mt},
      {"io-uring",
       "liburing, one thread: multishot accept into registered files, multishot recv from a provided buffer ring, "
       "one io_uring_enter per loop iteration, optional SQPOLL; falls back per feature with the reason",
       false, run_io_uring},
      {"epoll-reuseport", "one epoll loop per thread, each with its own SO_REUSEPORT listener", true,
       run_epoll_reuseport},
      {"asio-coro", "Boost.Asio C++20 coroutines (co_await), one io_context run by --threads threads", false,
       run_asio_coro},
  };
  return models;
}

nlohmann::json model_features(const Model& model, const ServerConfig& config) {
  if (model.run == run_io_uring) return io_uring_features(config);
  return nlohmann::json::object();
}

const Model* find_model(std::string_view name) {
  for (const Model& m : all_models())
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace tailscope::echo
