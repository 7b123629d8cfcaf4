// Opening a client connection: a listening peer is reached, a port nothing
// listens on is a -1, and a target outside the allow-list is refused before
// any socket exists.
#include "svc/rpc_call.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <stdexcept>

#include "net/socket.h"

namespace tailscope::svc {
namespace {

TEST(ConnectTo, ReachesAListenerAndReportsANonListeningPort) {
  const int listener = net::make_listener("127.0.0.1", 0);
  const int port = net::bound_port(listener);
  const int fd = connect_to("127.0.0.1", port, 1000);
  EXPECT_GE(fd, 0);
  if (fd >= 0) ::close(fd);
  ::close(listener);  // nothing listens there now
  EXPECT_EQ(connect_to("127.0.0.1", port, 1000), -1);
}

TEST(ConnectTo, RefusesATargetOutsideTheAllowListBeforeAnySocketExists) {
  // 192.0.2.1 is RFC 5737 documentation space: refused by the rule, and no packet is sent.
  EXPECT_THROW(connect_to("192.0.2.1", 9, 100), std::invalid_argument);
  EXPECT_THROW(connect_to("example.com", 9, 100), std::invalid_argument);
}

}  // namespace
}  // namespace tailscope::svc
