// A closed-loop run of kPingMethod calls over the lean multiplexed channel
// (the same ChannelLoop + MultiplexedChannel a service uses downstream)
// against one service: what a call costs in the transport alone, in CPU and
// round-trip time. `tailscope-svc --ping PORT [--ping-host ADDR]` runs it; `make bench`
// (scripts/bench-transport) and the socialnet study's in-run baseline read it.
//
// CPU is user + sys of both ends over the measured calls only (warm-up
// excluded): this process from getrusage, the server from /proc/PID/stat
// (when its pid is given; otherwise that end is unavailable, with the reason).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "svc/link_delay.h"

namespace tailscope::svc {

struct PingOptions {
  std::string host = "127.0.0.1";  // must pass the allow-list (net/allow_list.h)
  int port = 0;
  int64_t calls = 20000;        // measured
  int64_t warmup_calls = 2000;  // run first, never measured
  int64_t concurrency = 1;      // calls in flight at once (closed loop)
  size_t connections = 1;       // multiplexed connections to the service
  int64_t timeout_ns = 1'000'000'000;
  pid_t server_pid = 0;  // 0: the server's CPU is not measured
  // The link-delay shim on this side: requests to `host` are held by the
  // delay configured for it. The server holds its answers by its own table.
  LinkDelayTable link_delays;
};

// Throws std::invalid_argument for an option out of range (naming it) and
// std::runtime_error when the service cannot be reached.
// Returns {"calls", "ok", "failed", "timeouts", "concurrency", "connections",
// "wall_s", "rtt" (latency_summary), "client_cpu_s", "server_cpu_s" | null,
// "cpu_per_call_ns" | null, "client_cpu_per_call_ns", "unavailable": [..],
// "channel": {loop iterations, sends, delayed_batches}, "host", "link_delay":
// {address, one_way_delay_us, jitter_us} of this side}.
nlohmann::json run_pings(const PingOptions& options);

// `tailscope-svc --ping`'s result document: run_pings' figures under "ping",
// its "unavailable" at the top, the options under "config".
nlohmann::json ping_result_document(const PingOptions& options, int argc, char** argv);

}  // namespace tailscope::svc
