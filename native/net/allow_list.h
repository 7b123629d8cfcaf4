// The one rule every connect in native/ obeys: traffic goes to loopback or to
// the lab subnet, the addresses of the network namespaces tailscope's own lab
// hosts make, and nowhere else (docs/lab-hosts.md, "The allow-list"). The lab
// generates load: a typo in an address must not aim it at someone else's
// machine. The RPC client, the ping client, the OTLP exporter and tailscope-load
// check a target here before their socket exists, so a refused address never
// sees a packet.
//
// Allowed:  IPv4 127.0.0.0/8, IPv6 ::1, IPv4 198.18.0.0/15 (RFC 2544's
//           benchmarking range, where lab hosts live), the literal name
//           "localhost" (read as 127.0.0.1 by net/socket.cc, no DNS), and
//           IPv4-mapped IPv6 (::ffff:a.b.c.d) when a.b.c.d is allowed — the
//           kernel sends those as IPv4 to a.b.c.d, so they are that address.
// Refused:  everything else, including any other name: a name would need DNS,
//           and what it resolves to is not known when the rule is checked.
#pragma once

#include <string>
#include <string_view>

namespace tailscope::net {

// The rule in words, for error messages and help texts.
inline constexpr std::string_view kAllowedTargets = "loopback (127.0.0.0/8, ::1) or the lab subnet 198.18.0.0/15";

// True when `address` (numeric IPv4/IPv6 text, or "localhost") may be connected to.
bool is_allowed_target(std::string_view address);

// Throws std::invalid_argument "WHAT ADDRESS: refused: tailscope only connects
// to loopback (...) or the lab subnet 198.18.0.0/15" when it may not.
void check_allowed_target(std::string_view address, std::string_view what);

}  // namespace tailscope::net
