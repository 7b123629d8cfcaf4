// Where a service's peers are, as tailscope-svc's flags give it: --ports
// NAME=PORT,... (peers on 127.0.0.1) and --peers NAME=ADDR:PORT,... (peers
// anywhere the allow-list permits, net/allow_list.h). Every error names the
// flag and the item that was wrong.
#pragma once

#include <map>
#include <string>
#include <utility>

namespace tailscope::svc {

// "ADDR:PORT" or "[V6ADDR]:PORT" → (canonical address, port); `what` names the
// input in errors. The address must be numeric and on the allow-list.
std::pair<std::string, int> parse_address_port(const std::string& text, const std::string& what);

// The inverse: "ADDR:PORT", or "[V6ADDR]:PORT" for an IPv6 address.
std::string address_port_text(const std::string& address, int port);

// --peers NAME=ADDR:PORT,... → name → (address, port). A name given twice is an error.
std::map<std::string, std::pair<std::string, int>> parse_peers(const std::string& text);

// --ports NAME=PORT,... → name → port.
std::map<std::string, int> parse_ports(const std::string& text);

}  // namespace tailscope::svc
