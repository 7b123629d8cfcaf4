// Opening a client connection: a listening peer is reached, a port nothing
// listens on is a -1, and a target outside the allow-list is refused before
// any socket exists.
#include "svc/rpc_call.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
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
}

TEST(ConnectTo, ANameThatCannotBeUsedFailsTheConnectWithoutASocket) {
  // Not a host name (a space): refused before any lookup; a name fails the connect (the call is
  // unavailable) rather than throwing, since a reconnect may happen long after start.
  errno = 0;
  EXPECT_EQ(connect_to("no such host", 9, 100), -1);
  EXPECT_EQ(errno, EHOSTUNREACH);
}

}  // namespace
}  // namespace tailscope::svc
