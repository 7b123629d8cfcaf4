// The client side of the tailscope RPC protocol (docs/protocol.md), the wire
// of every hop of the microservice graph: tailscope-load calls one endpoint
// of one service directly, without the HTTP front.
//
// Each request is a request frame whose id is the connection's sequence
// number; responses may come back in any order (the services multiplex), so
// each is matched by id to the request it answers (ClientProtocol::feed
// reports its position among those in flight). A status other than ok is a
// bad_status response; a malformed or oversized frame, a request frame, or an
// id not in flight is a violation: the connection is closed (bad_frame).
// The frame codec is the one the services use (net/frame.h), not a copy.
#pragma once

#include <cstdint>
#include <memory>

#include "load/client_protocol.h"
#include "load/config.h"

namespace tailscope::load {

// config.rpc_method names the endpoint, config.payload_bytes the request
// payload, config.rpc_sampled the trace context's sampled flag. Throws
// std::invalid_argument if the method is empty or longer than 255 bytes, or
// the request frame would exceed the maximum frame size.
std::unique_ptr<ClientProtocol> make_rpc_client(const LoadConfig& config, uint32_t connection_id);

}  // namespace tailscope::load
