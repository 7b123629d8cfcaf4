// What one tailscope-load run is asked to do (flags as applied).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "load/endpoint_mix.h"

namespace tailscope::load {

enum class Arrival { kFixed, kPoisson };

// The client side of a wire protocol (client_protocol.h): the servers' echo
// and http (net::WireProtocol), plus rpc, the microservices' frames
// (docs/protocol.md), which only the load generator speaks as a client.
enum class LoadProtocol { kEcho, kHttp, kRpc };

// How a load thread moves bytes (--io). epoll: readiness, one send() and one
// recv() per request. uring: completions, a multishot recv per connection
// from a provided buffer ring and every send of a loop turn submitted in the
// one io_uring_enter that also reaps the responses. auto: uring when the
// kernel has what it needs (probed at start), else epoll with the reason.
enum class LoadIo { kAuto, kUring, kEpoll };
// "auto" / "uring" / "epoll"; throws std::invalid_argument naming the text.
LoadIo parse_load_io(std::string_view text);
std::string_view to_string(LoadIo io);

struct LoadConfig {
  std::string host = "127.0.0.1";  // as given (a DNS name too); HTTP's Host header
  std::string address;             // numeric, host resolved at start (net/allow_list.h); "" = host
  int port = 0;
  int threads = 1;
  int connections = 10;
  double duration_s = 10.0;  // measured window, excluding warm-up
  double warmup_s = 1.0;
  double rate_per_s = 0.0;  // total over all connections; 0 = closed loop
  Arrival arrival = Arrival::kFixed;
  int pipeline = 1;  // requests in flight per connection (at most)
  LoadProtocol protocol = LoadProtocol::kEcho;
  size_t payload_bytes = 64;  // echo; rpc: request payload
  std::string http_path = "/";
  EndpointMix mix;           // http: --mix PATH=WEIGHT (endpoint_mix.h); empty: every request to http_path
  std::string rpc_method;    // rpc: the endpoint called (e.g. compose_post)
  bool rpc_sampled = false;  // rpc: set the trace context's sampled flag (random trace ids)
  // http: a W3C traceparent header on every request (fresh trace and parent
  // ids, sampled), and each answered request of the window kept for
  // --request-log (trace id, intended time, latency), at most
  // request_log_max_rows (the rest counted, not kept).
  bool traceparent = false;
  int64_t request_log_max_rows = 1'000'000;
  std::vector<int> cpus;  // worker i on cpus[i % size]; empty: unpinned
  int64_t timeout_ns = 5'000'000'000;
  int64_t spin_ns = 20'000;    // pacing: sleep until this close to a send, then busy-poll
  bool busy_poll = false;      // never sleep: poll epoll with a zero timeout (owns its core)
  LoadIo io = LoadIo::kEpoll;  // the measured default (docs/load-generator.md, I/O paths)
  uint64_t seed = 1;
  double hlog_interval_s = 1.0;
  bool record_intervals = false;  // --hlog
  int64_t connect_timeout_ns = 5'000'000'000;
  // --start-at: the request schedule (warm-up, then the measured window and its
  // --hlog intervals) starts at this realtime instant, connections opened before
  // it; 0, or an instant already past once connected: 5 ms after connecting.
  int64_t start_at_realtime_ns = 0;

  bool open_loop() const { return rate_per_s > 0; }
};

// "10k" → 10000, "2.5M" → 2.5e6, "500" → 500 (SI suffixes k, M, G as in wrk2).
// Throws std::invalid_argument naming the text (also when it is out of a
// double's range, e.g. 1e400).
double parse_si_number(std::string_view text);
// "10s", "500ms", "2m", "1h", "250us", bare number = seconds.
double parse_duration_s(std::string_view text);

// The limits of what a user can type (docs/load-generator.md, "Limits").
// Durations are bounded so every deadline stays far inside int64
// nanoseconds (9.3e9 s overflowed and ended the run at once).
inline constexpr double kMaxDurationS = 86'400;  // -d, --warmup: 24 h
inline constexpr double kMinDurationS = 0.001;   // -d: 1 ms
inline constexpr double kMaxTimeoutS = 3'600;    // --timeout: 1 h
inline constexpr double kMaxRatePerS = 100e6;    // -R: 100 M/s, far beyond what one machine sends
inline constexpr int64_t kMaxConnections = 1'000'000;

// Each parses one option's text and throws std::invalid_argument with a
// message naming the option and the value ("-c: '1.5' is not an integer").
// An integer with an optional SI suffix ("10k"), in [min, max].
int64_t parse_count(std::string_view option, std::string_view text, int64_t min, int64_t max);
// A plain number (no suffix) in [min, max].
double parse_number_in(std::string_view option, std::string_view text, double min, double max);
// A duration (units as parse_duration_s) in [min_s, max_s].
double parse_duration_in(std::string_view option, std::string_view text, double min_s, double max_s);
// -R: 0 (closed loop) or a rate in (0, kMaxRatePerS].
double parse_rate_per_s(std::string_view option, std::string_view text);

// Checks what no single option can: an open-loop rate must intend at least
// one request in the measured window (R × d ≥ 1), or the run would measure
// nothing and call it complete. Throws std::invalid_argument.
void check_load_config(const LoadConfig& config);

}  // namespace tailscope::load
