// The one rule every connect in native/ obeys: traffic goes to loopback, to
// the lab subnet (the addresses of the network namespaces tailscope's own lab
// hosts make), or to the networks a deployment declares, and nowhere else
// (docs/lab-hosts.md, "The allow-list"; docs/deploy.md). The lab generates
// load: a typo in an address must not aim it at someone else's machine. The RPC
// client, the ping client, the OTLP exporter and tailscope-load check a target
// here before their socket exists, so a refused address never sees a packet.
//
// Allowed:  IPv4 127.0.0.0/8, IPv6 ::1, IPv4 198.18.0.0/15 (RFC 2544's
//           benchmarking range, where lab hosts live), the literal name
//           "localhost" (read as 127.0.0.1 by net/socket.cc, no DNS),
//           IPv4-mapped IPv6 (::ffff:a.b.c.d) when a.b.c.d is allowed — the
//           kernel sends those as IPv4 to a.b.c.d, so they are that address —
//           and every CIDR block declared with declare_allowed_cidr (a
//           container network, a cluster's pod and service ranges: --allow-cidr).
// Names:    is_allowed_target and check_allowed_target judge numeric text only.
//           resolve_allowed_target resolves a DNS name (getaddrinfo) and judges
//           what it resolved to; a connect then dials that numeric address, so
//           the address checked is the address used.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tailscope::net {

// The default rule in words, for error messages and help texts.
inline constexpr std::string_view kAllowedTargets = "loopback (127.0.0.0/8, ::1) or the lab subnet 198.18.0.0/15";

// The broadest block a deployment may declare: /8. Broader (0.0.0.0/0 above all)
// would make the allow-list allow the Internet, which is no list at all.
inline constexpr int kMinDeclaredPrefixBits = 8;

// An IPv4 or IPv6 CIDR block, e.g. 198.51.100.0/24.
struct Cidr {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // network address (IPv4 in the first 4 bytes), host bits zero
  int prefix_bits = 0;
  std::string text;  // canonical "ADDR/BITS"

  bool contains_v4(uint32_t ip_host_order) const;
  bool contains_v6(const std::array<uint8_t, 16>& ip) const;
};

// "ADDR/BITS" → Cidr. Throws std::invalid_argument naming `what` and the text
// for malformed input, host bits set, or a block broader than /8.
Cidr parse_cidr(std::string_view text, std::string_view what);

// Adds a block to this process's policy. Call at start-up, before connections
// are made (a mutex keeps later calls safe, but the policy is meant to be fixed
// for the run). Declaring the same block twice is harmless.
void declare_allowed_cidr(const Cidr& block);
void clear_declared_cidrs();  // tests
std::vector<Cidr> declared_cidrs();

// The rule that allows a numeric address (or "localhost"): "loopback",
// "lab subnet 198.18.0.0/15", "declared 198.51.100.0/24"; empty when none does.
std::string allowing_rule(std::string_view address);

// True for numeric IPv4/IPv6 text (no name, no port, no brackets).
bool is_numeric_address(std::string_view address);

// True when `address` (numeric IPv4/IPv6 text, or "localhost") may be connected to.
bool is_allowed_target(std::string_view address);

// Throws std::invalid_argument "WHAT ADDRESS: refused: ..." naming the policy
// (and the declared blocks) when it may not.
void check_allowed_target(std::string_view address, std::string_view what);

// A name's numeric addresses, in the resolver's order; empty with `error` set
// when it does not resolve. The default is getaddrinfo (TCP, IPv4 and IPv6).
using NameLookup = std::function<std::vector<std::string>(const std::string& name, std::string* error)>;
std::vector<std::string> system_lookup(const std::string& name, std::string* error);

struct ResolvedTarget {
  std::string address;  // numeric, canonical: what to connect to
  std::string rule;     // allowing_rule(address)
};

// `host` numeric or "localhost": judged as it is. A DNS name: looked up, and
// the first address the policy allows is returned. Throws std::invalid_argument
// "WHAT HOST: cannot resolve: REASON" or "WHAT HOST (resolved to A, B):
// refused: ..." — before any socket exists.
ResolvedTarget resolve_allowed_target(std::string_view host, std::string_view what,
                                      const NameLookup& lookup = system_lookup);

}  // namespace tailscope::net
