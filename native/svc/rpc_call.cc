#include "svc/rpc_call.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <iostream>
#include <stdexcept>

#include "net/allow_list.h"
#include "net/socket.h"

namespace tailscope::svc {

int connect_to(const std::string& host, int port, int timeout_ms) {
  // A DNS name is resolved on every (re)connect: a restarted container may come back at another
  // address. The address judged by the allow-list is the address dialled, before the socket exists,
  // so a refused address sees no packet. A numeric address outside the policy is a caller's error
  // (checked when the client was built): it throws. A name that stops resolving, or now resolves
  // outside the policy, fails this connect (the call is unavailable), said on stderr a few times.
  std::string address;
  try {
    address = net::resolve_allowed_target(host, "connect to").address;
  } catch (const std::invalid_argument& e) {
    if (host == "localhost" || net::is_numeric_address(host)) throw;
    static std::atomic<int> said{0};
    if (said.fetch_add(1, std::memory_order_relaxed) < 5) std::cerr << "tailscope-svc: " << e.what() << "\n";
    errno = EHOSTUNREACH;
    return -1;
  }
  const int fd = net::start_connect(address, port);  // non-blocking, TCP_NODELAY
  if (fd < 0) return -1;
  pollfd p{fd, POLLOUT, 0};
  int rc = ::poll(&p, 1, timeout_ms) == 1 ? 0 : -1;
  int err = 0;
  socklen_t len = sizeof err;
  if (rc == 0 && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0)) rc = -1;
  if (rc < 0) {
    ::close(fd);
    return -1;
  }
  net::set_blocking(fd);
  return fd;
}

}  // namespace tailscope::svc
