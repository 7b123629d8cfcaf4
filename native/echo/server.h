// The one small interface every echo server model implements. A model gets
// its listener(s), the protocol and the stop signal; it decides only the
// concurrency (who waits for which socket, on which thread). Socket
// mechanics (accept back-off, bounded buffers, echo/HTTP) live in net/.
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "net/session.h"

namespace tailscope::echo {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 0;
  int threads = 1;        // worker threads, for the models that have several
  std::vector<int> cpus;  // worker i pinned to cpus[i % size]; empty: unpinned
  net::WireProtocol protocol = net::WireProtocol::kEcho;
  net::SessionLimits limits;
  int64_t stall_every_ms = 0;  // test mode: the server stalls stall_ms every stall_every_ms
  int64_t stall_ms = 0;
  bool io_uring_sqpoll = false;  // io-uring: ask for a kernel submission-polling thread
};

// Set from the SIGINT/SIGTERM handler; fd() is an eventfd that becomes
// readable then, so event loops wake up without polling a flag.
class StopSignal {
 public:
  StopSignal();
  ~StopSignal();
  int fd() const { return fd_; }
  bool requested() const { return requested_.load(std::memory_order_acquire); }
  void request() noexcept;  // async-signal-safe

 private:
  int fd_;
  std::atomic<bool> requested_{false};
};

struct ServerContext {
  const ServerConfig& config;
  std::vector<int> listen_fds;  // one, or one per thread for reuse-port models
  StopSignal& stop;
};

// Thrown by a model that cannot run on this kernel (io_uring disabled...).
class ModelUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Model {
  std::string_view name;
  std::string_view what;
  bool listener_per_thread;     // main creates config.threads SO_REUSEPORT listeners
  void (*run)(ServerContext&);  // returns once stop is requested and connections are closed
};

// What a model probed at start and will use (the io-uring model's kernel
// features, each with the reason when it falls back); {} for models with
// nothing to probe. Printed in tailscope-echo's ready line as "features".
nlohmann::json model_features(const Model& model, const ServerConfig& config);
nlohmann::json io_uring_features(const ServerConfig& config);

// Every model compiled in, in the study's order.
const std::vector<Model>& all_models();
const Model* find_model(std::string_view name);

// Test mode for the coordinated-omission demo: the server does nothing during
// [t0 + k*every, t0 + k*every + stall) for every k, as a GC pause would.
class StallSchedule {
 public:
  explicit StallSchedule(const ServerConfig& config);
  // Called by a serving thread before it handles events: sleeps out the
  // current stall window, if inside one.
  void maybe_stall() const;
  bool enabled() const { return every_ns_ > 0 && stall_ns_ > 0; }

 private:
  int64_t t0_ns_, every_ns_, stall_ns_;
};

// Pins the calling worker thread per config.cpus (no-op when empty).
void pin_worker(const ServerConfig& config, int worker_index);

// Model entry points (one file each).
void run_epoll(ServerContext& ctx);
void run_epoll_reuseport(ServerContext& ctx);
void run_thread_per_connection(ServerContext& ctx);
void run_poll(ServerContext& ctx);
void run_poll_pool(ServerContext& ctx);
void run_asio(ServerContext& ctx);
void run_asio_mt(ServerContext& ctx);
void run_asio_coro(ServerContext& ctx);
void run_io_uring(ServerContext& ctx);

}  // namespace tailscope::echo
