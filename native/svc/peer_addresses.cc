#include "svc/peer_addresses.h"

#include <charconv>
#include <sstream>
#include <stdexcept>

#include "net/allow_list.h"

namespace tailscope::svc {

PeerAddress parse_address_port(const std::string& text, const std::string& what) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument(what + ": expected HOST:PORT, got '" + text + "'");
  std::string address = text.substr(0, colon);
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']')
    address = address.substr(1, address.size() - 2);
  const std::string port = text.substr(colon + 1);
  int value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535)
    throw std::invalid_argument(what + ": '" + text + "': the port must be an integer in 1 … 65535");
  const net::ResolvedTarget resolved = net::resolve_allowed_target(address, what);
  const bool numeric = net::is_numeric_address(address) || address == "localhost";
  return {numeric ? resolved.address : address, value, resolved.address, resolved.rule};
}

std::string address_port_text(const std::string& address, int port) {
  std::string out;
  const bool v6 = address.find(':') != std::string::npos;
  if (v6) out += '[';
  out += address;
  if (v6) out += ']';
  out += ':';
  out += std::to_string(port);
  return out;
}

std::map<std::string, PeerAddress> parse_peers(const std::string& text) {
  std::map<std::string, PeerAddress> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::invalid_argument("--peers: expected NAME=HOST:PORT, got '" + item + "'");
    const std::string name = item.substr(0, eq);
    if (out.count(name)) throw std::invalid_argument("--peers: '" + name + "' is given twice");
    out[name] = parse_address_port(item.substr(eq + 1), "--peers " + name);
  }
  return out;
}

std::map<std::string, int> parse_ports(const std::string& text) {
  std::map<std::string, int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("--ports: expected NAME=PORT, got '" + item + "'");
    const std::string port = item.substr(eq + 1);
    int value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535)
      throw std::invalid_argument("--ports: '" + item + "': the port must be an integer in 1 … 65535");
    out[item.substr(0, eq)] = value;
  }
  return out;
}

}  // namespace tailscope::svc
