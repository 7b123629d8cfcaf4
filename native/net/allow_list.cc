#include "net/allow_list.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace tailscope::net {
namespace {

std::mutex g_declared_mu;
std::vector<Cidr> g_declared;  // the deployment's blocks (--allow-cidr), fixed at start-up

bool prefix_matches(const uint8_t* ip, const uint8_t* net, int bits) {
  const int whole = bits / 8;
  if (std::memcmp(ip, net, static_cast<size_t>(whole)) != 0) return false;
  if (bits % 8 == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - bits % 8));
  return (ip[whole] & mask) == (net[whole] & mask);
}

std::string rule_v4(uint32_t ip_host_order) {
  if ((ip_host_order >> 24) == 127) return "loopback";
  if ((ip_host_order & 0xfffe0000u) == 0xc6120000u) return "lab subnet 198.18.0.0/15";
  std::lock_guard lock(g_declared_mu);
  for (const Cidr& c : g_declared)
    if (c.contains_v4(ip_host_order)) return "declared " + c.text;
  return {};
}

std::string rule_v6(const std::array<uint8_t, 16>& ip) {
  std::lock_guard lock(g_declared_mu);
  for (const Cidr& c : g_declared)
    if (c.contains_v6(ip)) return "declared " + c.text;
  return {};
}

std::string policy_text() {
  std::string text(kAllowedTargets);
  const std::vector<Cidr> blocks = declared_cidrs();
  if (blocks.empty()) return text + " (declare a network with --allow-cidr CIDR)";
  text += ", or the declared ";
  for (size_t i = 0; i < blocks.size(); ++i) text += (i ? ", " : "") + blocks[i].text;
  return text;
}

std::string canonical(const std::string& text) {
  in_addr v4{};
  in6_addr v6{};
  char out[INET6_ADDRSTRLEN] = {};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return inet_ntop(AF_INET, &v4, out, sizeof out);
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) return inet_ntop(AF_INET6, &v6, out, sizeof out);
  return text;
}

}  // namespace

bool is_numeric_address(std::string_view address) {
  const std::string text(address);
  in6_addr probe{};
  return inet_pton(AF_INET, text.c_str(), &probe) == 1 || inet_pton(AF_INET6, text.c_str(), &probe) == 1;
}

bool Cidr::contains_v4(uint32_t ip_host_order) const {
  if (v6) return false;
  const uint32_t be = htonl(ip_host_order);
  uint8_t ip[4];
  std::memcpy(ip, &be, 4);
  return prefix_matches(ip, bytes.data(), prefix_bits);
}

bool Cidr::contains_v6(const std::array<uint8_t, 16>& ip) const {
  return v6 && prefix_matches(ip.data(), bytes.data(), prefix_bits);
}

Cidr parse_cidr(std::string_view text, std::string_view what) {
  const std::string input(text);
  const std::string where = std::string(what) + " '" + input + "'";
  const size_t slash = input.find('/');
  if (slash == std::string::npos) throw std::invalid_argument(where + ": expected ADDR/BITS, e.g. 198.51.100.0/24");
  const std::string address = input.substr(0, slash), bits_text = input.substr(slash + 1);
  Cidr c;
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    std::memcpy(c.bytes.data(), &v4, 4);
  } else if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    c.v6 = true;
    std::memcpy(c.bytes.data(), &v6, 16);
  } else {
    throw std::invalid_argument(where + ": '" + address + "' is not a numeric IPv4/IPv6 address");
  }
  const int max_bits = c.v6 ? 128 : 32;
  int bits = -1;
  const auto [end, ec] = std::from_chars(bits_text.data(), bits_text.data() + bits_text.size(), bits);
  if (ec != std::errc() || end != bits_text.data() + bits_text.size() || bits < 0 || bits > max_bits)
    throw std::invalid_argument(where + ": the prefix length must be an integer in 0 … " + std::to_string(max_bits));
  if (bits < kMinDeclaredPrefixBits)
    throw std::invalid_argument(where + ": refused: broader than /" + std::to_string(kMinDeclaredPrefixBits) +
                                " (it would allow most of the Internet); declare the container network or the "
                                "cluster's pod and service ranges");
  c.prefix_bits = bits;
  const int used_bytes = c.v6 ? 16 : 4;
  for (int i = 0; i < used_bytes; ++i) {
    const int keep = std::clamp(bits - 8 * i, 0, 8);
    const uint8_t mask = keep == 0 ? 0 : static_cast<uint8_t>(0xff << (8 - keep));
    if (c.bytes[i] & ~mask)
      throw std::invalid_argument(where + ": host bits are set (the block starts at a multiple of its size)");
  }
  c.text = canonical(address) + "/" + std::to_string(bits);
  return c;
}

void declare_allowed_cidr(const Cidr& block) {
  std::lock_guard lock(g_declared_mu);
  for (const Cidr& c : g_declared)
    if (c.text == block.text) return;
  g_declared.push_back(block);
}

void clear_declared_cidrs() {
  std::lock_guard lock(g_declared_mu);
  g_declared.clear();
}

std::vector<Cidr> declared_cidrs() {
  std::lock_guard lock(g_declared_mu);
  return g_declared;
}

std::string allowing_rule(std::string_view address) {
  if (address == "localhost") return "loopback";
  const std::string text(address);  // inet_pton wants a terminated string
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return rule_v4(ntohl(v4.s_addr));
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) != 1) return {};  // a name, or not an address at all
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return "loopback";
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    uint32_t embedded = 0;
    std::memcpy(&embedded, &v6.s6_addr[12], sizeof embedded);
    return rule_v4(ntohl(embedded));
  }
  std::array<uint8_t, 16> ip{};
  std::memcpy(ip.data(), &v6, 16);
  return rule_v6(ip);
}

bool is_allowed_target(std::string_view address) { return !allowing_rule(address).empty(); }

void check_allowed_target(std::string_view address, std::string_view what) {
  if (is_allowed_target(address)) return;
  std::string message =
      std::string(what) + " " + std::string(address) + ": refused: tailscope only connects to " + policy_text();
  if (!is_numeric_address(address)) message += " (give a numeric address: names are not resolved here)";
  throw std::invalid_argument(message);
}

std::vector<std::string> system_lookup(const std::string& name, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &found);
  std::vector<std::string> out;
  if (rc != 0) {
    if (error) *error = ::gai_strerror(rc);
    return out;
  }
  for (const addrinfo* a = found; a; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = a->ai_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) && inet_ntop(a->ai_family, raw, text, sizeof text)) {
      const std::string address(text);
      bool seen = false;
      for (const auto& s : out) seen = seen || s == address;
      if (!seen) out.push_back(address);
    }
  }
  ::freeaddrinfo(found);
  if (out.empty() && error) *error = "no IPv4 or IPv6 address";
  return out;
}

ResolvedTarget resolve_allowed_target(std::string_view host, std::string_view what, const NameLookup& lookup) {
  const std::string name(host);
  if (name == "localhost") return {"127.0.0.1", "loopback"};  // the one name read without a resolver
  if (is_numeric_address(name)) {
    check_allowed_target(name, what);
    const std::string address = canonical(name);
    return {address, allowing_rule(address)};
  }
  // Digits and dots only, yet not an address (198.18.0.256, 127.1): a typo, never a name to look up.
  const bool dotted = !name.empty() && name.find_first_not_of("0123456789.") == std::string::npos;
  if (dotted || name.empty() || name.size() > 253 || name.find_first_of(" \t/:[]@,=") != std::string::npos)
    throw std::invalid_argument(std::string(what) + " '" + name + "': not a host name or a numeric address");
  std::string error;
  const std::vector<std::string> addresses = lookup(name, &error);
  if (addresses.empty())
    throw std::invalid_argument(std::string(what) + " " + name +
                                ": cannot resolve: " + (error.empty() ? std::string("no address") : error));
  for (const std::string& a : addresses) {
    std::string rule = allowing_rule(a);
    if (!rule.empty()) return {canonical(a), std::move(rule)};
  }
  std::string list;
  for (const std::string& a : addresses) list += (list.empty() ? "" : ", ") + a;
  throw std::invalid_argument(std::string(what) + " " + name + " (resolved to " + list +
                              "): refused: tailscope only connects to " + policy_text());
}

}  // namespace tailscope::net
