#include "net/allow_list.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <stdexcept>

namespace tailscope::net {
namespace {

bool allowed_v4(uint32_t ip_host_order) {
  const bool loopback = (ip_host_order >> 24) == 127;
  const bool lab = (ip_host_order & 0xfffe0000u) == 0xc6120000u;  // 198.18.0.0/15
  return loopback || lab;
}

}  // namespace

bool is_allowed_target(std::string_view address) {
  if (address == "localhost") return true;
  const std::string text(address);  // inet_pton wants a terminated string
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return allowed_v4(ntohl(v4.s_addr));
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) != 1) return false;  // a name, or not an address at all
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    uint32_t embedded = 0;
    std::memcpy(&embedded, &v6.s6_addr[12], sizeof embedded);
    return allowed_v4(ntohl(embedded));
  }
  return false;
}

void check_allowed_target(std::string_view address, std::string_view what) {
  if (is_allowed_target(address)) return;
  std::string message = std::string(what) + " " + std::string(address) + ": refused: tailscope only connects to " +
                        std::string(kAllowedTargets);
  in6_addr probe{};
  const std::string text(address);
  if (inet_pton(AF_INET, text.c_str(), &probe) != 1 && inet_pton(AF_INET6, text.c_str(), &probe) != 1)
    message += " (give a numeric address: names are not resolved)";
  throw std::invalid_argument(message);
}

}  // namespace tailscope::net
