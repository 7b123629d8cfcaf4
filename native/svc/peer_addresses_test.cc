// The peer flags: addresses and ports are checked and made canonical, IPv6
// goes in brackets both ways, and every bad item is refused with the flag's name.
#include "svc/peer_addresses.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tailscope::svc {
namespace {

TEST(PeerAddresses, ParsesIpv4AndBracketedIpv6AndPrintsThemBack) {
  const PeerAddress v4 = parse_address_port("127.0.0.1:9001", "x");
  EXPECT_EQ(v4.host, "127.0.0.1");
  EXPECT_EQ(v4.port, 9001);
  EXPECT_EQ(v4.address, "127.0.0.1");
  EXPECT_EQ(v4.rule, "loopback");
  const PeerAddress v6 = parse_address_port("[::1]:80", "x");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 80);
  EXPECT_EQ(address_port_text("198.18.0.2", 7), "198.18.0.2:7");
  EXPECT_EQ(address_port_text("::1", 7), "[::1]:7");
}

TEST(PeerAddresses, RefusesBadPortsNamesAndAddressesOutsideTheAllowList) {
  EXPECT_THROW(parse_address_port("127.0.0.1", "x"), std::invalid_argument);
  EXPECT_THROW(parse_address_port("127.0.0.1:0", "x"), std::invalid_argument);
  EXPECT_THROW(parse_address_port("127.0.0.1:65536", "x"), std::invalid_argument);
  EXPECT_THROW(parse_address_port(":80", "x"), std::invalid_argument);
  EXPECT_EQ(parse_address_port("localhost:80", "x").host, "127.0.0.1");          // the one name read without a resolver
  EXPECT_THROW(parse_address_port("192.0.2.1:80", "x"), std::invalid_argument);  // not on the allow-list
}

TEST(PeerAddresses, PeersMapNamesToAddressesOnceEach) {
  const auto peers = parse_peers("a=127.0.0.1:1,b=[::1]:2,");
  ASSERT_EQ(peers.size(), 2u);
  EXPECT_EQ(peers.at("a").host, "127.0.0.1");
  EXPECT_EQ(peers.at("a").port, 1);
  EXPECT_EQ(peers.at("b").host, "::1");
  EXPECT_EQ(peers.at("b").port, 2);
  EXPECT_THROW(parse_peers("a=127.0.0.1:1,a=127.0.0.1:2"), std::invalid_argument);
  EXPECT_THROW(parse_peers("=127.0.0.1:1"), std::invalid_argument);
  try {
    parse_peers("a=127.0.0.1:x");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--peers a"), std::string::npos) << e.what();
  }
}

TEST(PeerAddresses, PortsMapNamesToPorts) {
  EXPECT_EQ(parse_ports("a=1,b=65535"), (std::map<std::string, int>{{"a", 1}, {"b", 65535}}));
  EXPECT_TRUE(parse_ports("").empty());
  EXPECT_THROW(parse_ports("a"), std::invalid_argument);
  EXPECT_THROW(parse_ports("a=0"), std::invalid_argument);
}

}  // namespace
}  // namespace tailscope::svc
