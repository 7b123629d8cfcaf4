#include "svc/rpc_call.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/allow_list.h"
#include "net/socket.h"

namespace tailscope::svc {

int connect_to(const std::string& host, int port, int timeout_ms) {
  net::check_allowed_target(host, "connect to");  // before the socket exists: no packet to a refused address
  const int fd = net::start_connect(host, port);  // non-blocking, TCP_NODELAY
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
