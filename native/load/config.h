// What one tailscope-load run is asked to do (flags as applied).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tailscope::load {

enum class Arrival { kFixed, kPoisson };

// The client side of a wire protocol (client_protocol.h): the servers' echo
// and http (net::WireProtocol), plus rpc, the microservices' frames
// (docs/protocol.md), which only the load generator speaks as a client.
enum class LoadProtocol { kEcho, kHttp, kRpc };

struct LoadConfig {
  std::string host = "127.0.0.1";
  int port = 0;
  int threads = 1;
  int connections = 10;
  double duration_s = 10.0;  // measured window, excluding warm-up
  double warmup_s = 1.0;
  double rate_per_s = 0.0;   // total over all connections; 0 = closed loop
  Arrival arrival = Arrival::kFixed;
  int pipeline = 1;          // requests in flight per connection (at most)
  LoadProtocol protocol = LoadProtocol::kEcho;
  size_t payload_bytes = 64;  // echo; rpc: request payload
  std::string http_path = "/";
  std::string rpc_method;     // rpc: the endpoint called (e.g. compose_post)
  bool rpc_sampled = false;   // rpc: set the trace context's sampled flag (random trace ids)
  std::vector<int> cpus;      // worker i on cpus[i % size]; empty: unpinned
  int64_t timeout_ns = 5'000'000'000;
  int64_t spin_ns = 20'000;   // pacing: sleep until this close to a send, then busy-poll
  bool busy_poll = false;     // never sleep: poll epoll with a zero timeout (owns its core)
  uint64_t seed = 1;
  double hlog_interval_s = 1.0;
  bool record_intervals = false;  // --hlog
  int64_t connect_timeout_ns = 5'000'000'000;

  bool open_loop() const { return rate_per_s > 0; }
};

// "10k" → 10000, "2.5M" → 2.5e6, "500" → 500 (SI suffixes k, M, G as in wrk2).
// Throws std::invalid_argument naming the text.
double parse_si_number(std::string_view text);
// "10s", "500ms", "2m", "1h", "250us", bare number = seconds.
double parse_duration_s(std::string_view text);

}  // namespace tailscope::load
