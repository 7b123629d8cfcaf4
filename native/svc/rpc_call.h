// What both RPC client models (svc/multiplexed_channel.h,
// svc/blocking_client_pool.h) share: how a call ends, and how a client
// connection is opened.
//
// Either way a call ends exactly once: with the response, kTimeout when the
// deadline passes, or kUnavailable when the connection fails or cannot be
// opened. A failed connection is reopened on a later call, so the graph
// recovers when a killed service comes back.
//
// A service's peers live at host:port, host numeric or a DNS name; every host
// passes the allow-list (net/allow_list.h) when a client is built, and a name
// is resolved and judged again on every connect, before any socket exists.
#pragma once

#include <functional>
#include <string>

#include "svc/transport.h"

namespace tailscope::svc {

struct CallResult {
  RpcStatus status = RpcStatus::kOk;
  std::string payload;
};
using CallCallback = std::function<void(CallResult&&)>;

// Opens a blocking TCP connection (TCP_NODELAY) to host:port within
// timeout_ms; -1 on failure. Throws std::invalid_argument, before any socket
// exists, when host is not numeric or not on the allow-list.
int connect_to(const std::string& host, int port, int timeout_ms);

}  // namespace tailscope::svc
