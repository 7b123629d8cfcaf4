// Where a service's peers are, as tailscope-svc's flags give it: --ports
// NAME=PORT,... (peers on 127.0.0.1) and --peers NAME=HOST:PORT,... (peers
// anywhere the allow-list permits, net/allow_list.h; HOST may be a DNS name,
// a Compose service or a Kubernetes Service). Every error names the flag and
// the item that was wrong.
#pragma once

#include <map>
#include <string>
#include <utility>

namespace tailscope::svc {

// Where one peer is. A name is kept as the host to dial: the RPC client
// resolves it again on every connect (svc/rpc_call.h), so a restarted
// container found at a new address is reached; `address` and `rule` record
// what it resolved to at start, for stderr and the result document.
struct PeerAddress {
  std::string host;  // canonical numeric address, or the DNS name as given
  int port = 0;
  std::string address;  // numeric, what `host` resolved to at start
  std::string rule;     // the allow-list rule that admitted `address`
};

// "HOST:PORT" or "[V6ADDR]:PORT" → PeerAddress; `what` names the input in
// errors. A name is resolved now (getaddrinfo): one that does not resolve, or
// whose addresses are all outside the policy, is refused before any connect.
PeerAddress parse_address_port(const std::string& text, const std::string& what);

// The inverse: "ADDR:PORT", or "[V6ADDR]:PORT" for an IPv6 address.
std::string address_port_text(const std::string& address, int port);

// --peers NAME=HOST:PORT,... → name → PeerAddress. A name given twice is an error.
std::map<std::string, PeerAddress> parse_peers(const std::string& text);

// --ports NAME=PORT,... → name → port.
std::map<std::string, int> parse_ports(const std::string& text);

}  // namespace tailscope::svc
