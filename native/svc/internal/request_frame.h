// The request frame both client models send (net/frame.h's codec).
#pragma once

#include <cstdint>
#include <string_view>

#include "net/frame.h"
#include "svc/transport.h"

namespace tailscope::svc::internal {

inline net::FrameView request_view(uint64_t id, std::string_view method, std::string_view payload,
                                   const TraceContext& trace) {
  return net::FrameView{FrameKind::kRequest, id, RpcStatus::kOk, trace, method, payload};
}

}  // namespace tailscope::svc::internal
