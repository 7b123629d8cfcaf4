// The allow-list decides from the address text alone: these tests never open a
// socket, so a refused address never sees a packet.
#include "net/allow_list.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace tailscope::net {
namespace {

TEST(AllowList, LoopbackAndTheLabSubnetAreAllowed) {
  for (const char* a : {"127.0.0.1", "127.0.0.0", "127.255.255.255", "127.3.2.1", "::1", "localhost", "198.18.0.0",
                        "198.18.0.2", "198.19.255.255", "198.19.4.7"})
    EXPECT_TRUE(is_allowed_target(a)) << a;
}

TEST(AllowList, AddressesJustOutsideTheRangesAreRefused) {
  for (const char* a : {"198.17.255.255", "198.20.0.0", "126.255.255.255", "128.0.0.0", "192.0.2.1", "10.0.0.1",
                        "0.0.0.0", "255.255.255.255", "::", "::2", "2001:db8::1", "fe80::1"})
    EXPECT_FALSE(is_allowed_target(a)) << a;
}

TEST(AllowList, Ipv4MappedIpv6IsJudgedByItsIpv4Address) {
  // The kernel sends ::ffff:a.b.c.d as IPv4 to a.b.c.d: it is that address.
  EXPECT_TRUE(is_allowed_target("::ffff:127.0.0.1"));
  EXPECT_TRUE(is_allowed_target("::ffff:198.18.0.2"));
  EXPECT_FALSE(is_allowed_target("::ffff:192.0.2.1"));
  EXPECT_FALSE(is_allowed_target("::ffff:198.20.0.1"));
}

TEST(AllowList, NamesAndMalformedTextAreRefused) {
  for (const char* a : {"", "example.com", "localhost.", "LOCALHOST", "127.0.0.1 ", " 127.0.0.1", "127.0.0.1:80",
                        "[::1]", "127.1", "198.18.0.256", "lab-host"})
    EXPECT_FALSE(is_allowed_target(a)) << "'" << a << "'";
}

TEST(AllowList, TheErrorNamesTheInputTheAddressAndTheRule) {
  try {
    check_allowed_target("192.0.2.1", "--peers text-service=");
    FAIL() << "192.0.2.1 was allowed";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--peers text-service="), std::string::npos) << m;
    EXPECT_NE(m.find("192.0.2.1"), std::string::npos) << m;
    EXPECT_NE(m.find("198.18.0.0/15"), std::string::npos) << m;
    EXPECT_NE(m.find("127.0.0.0/8"), std::string::npos) << m;
  }
  try {
    check_allowed_target("example.com", "--host");
    FAIL() << "a name was allowed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("names are not resolved"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_allowed_target("198.18.0.3", "--bind"));
}

}  // namespace
}  // namespace tailscope::net
