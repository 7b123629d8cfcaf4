// The allow-list decides from the address text alone: these tests never open a
// socket, so a refused address never sees a packet. Name resolution is tested
// with a fake lookup (no DNS query leaves the machine) and with "localhost"
// through the real getaddrinfo (answered from /etc/hosts).
#include "net/allow_list.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace tailscope::net {
namespace {

TEST(AllowList, LoopbackAndTheLabSubnetAreAllowed) {
  for (const char* a : {"127.0.0.1", "127.0.0.0", "127.255.255.255", "127.3.2.1", "::1", "localhost", "198.18.0.0",
                        "198.18.0.2", "198.19.255.255", "198.19.4.7"})
    EXPECT_TRUE(is_allowed_target(a)) << a;
}

TEST(AllowList, AddressesJustOutsideTheRangesAreRefused) {
  for (const char* a : {"198.17.255.255", "198.20.0.0", "126.255.255.255", "128.0.0.0", "192.0.2.1", "203.0.113.1",
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

// Each test that declares blocks starts and ends with the default policy.
class DeclaredPolicy : public ::testing::Test {
 protected:
  void SetUp() override { clear_declared_cidrs(); }
  void TearDown() override { clear_declared_cidrs(); }
};

TEST_F(DeclaredPolicy, ADeclaredBlockAllowsItsAddressesAndNamesItselfAsTheRule) {
  EXPECT_FALSE(is_allowed_target("198.51.100.7"));
  declare_allowed_cidr(parse_cidr("198.51.100.0/24", "--allow-cidr"));
  declare_allowed_cidr(parse_cidr("fd00:10::/64", "--allow-cidr"));
  EXPECT_EQ(allowing_rule("198.51.100.7"), "declared 198.51.100.0/24");
  EXPECT_EQ(allowing_rule("::ffff:198.51.100.255"), "declared 198.51.100.0/24");
  EXPECT_EQ(allowing_rule("fd00:10::5"), "declared fd00:10::/64");
  EXPECT_EQ(allowing_rule("127.0.0.1"), "loopback");
  EXPECT_EQ(allowing_rule("198.19.5.2"), "lab subnet 198.18.0.0/15");
  for (const char* a : {"198.51.101.1", "198.51.99.255", "fd00:11::1", "192.0.2.1"})
    EXPECT_FALSE(is_allowed_target(a)) << a;
  try {
    check_allowed_target("198.51.101.1", "peer");
    FAIL() << "198.51.101.1 was allowed";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("198.51.101.1"), std::string::npos) << m;
    EXPECT_NE(m.find("declared 198.51.100.0/24, fd00:10::/64"), std::string::npos) << m;
  }
}

TEST_F(DeclaredPolicy, PrefixBoundariesAreExact) {
  declare_allowed_cidr(parse_cidr("203.0.112.0/22", "x"));
  EXPECT_TRUE(is_allowed_target("203.0.112.0"));
  EXPECT_TRUE(is_allowed_target("203.0.115.255"));
  EXPECT_FALSE(is_allowed_target("203.0.116.0"));
  EXPECT_FALSE(is_allowed_target("203.0.111.255"));
}

TEST(AllowListCidr, BlocksBroaderThanSlash8AndMalformedTextAreRefused) {
  for (const char* bad : {"0.0.0.0/0", "198.0.0.0/7", "::/0", "2000::/3"}) {
    try {
      parse_cidr(bad, "--allow-cidr");
      FAIL() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--allow-cidr"), std::string::npos) << m;
      EXPECT_NE(m.find(bad), std::string::npos) << m;
      EXPECT_NE(m.find("broader than /8"), std::string::npos) << m;
    }
  }
  for (const char* bad : {"198.51.100.0", "198.51.100.0/", "198.51.100.0/33", "198.51.100.0/x", "example.com/16",
                          "198.51.100.1/24", "/16", "fd00::/129"})
    EXPECT_THROW(parse_cidr(bad, "--allow-cidr"), std::invalid_argument) << bad;
  EXPECT_EQ(parse_cidr("198.0.0.0/8", "x").text, "198.0.0.0/8");
  EXPECT_EQ(parse_cidr("198.51.100.3/32", "x").text, "198.51.100.3/32");
  EXPECT_EQ(parse_cidr("FD00:0::/16", "x").text, "fd00::/16");
}

TEST(AllowListResolve, NumericAndLocalhostNeedNoLookup) {
  const NameLookup never = [](const std::string& name, std::string*) -> std::vector<std::string> {
    ADD_FAILURE() << "looked up " << name;
    return {};
  };
  EXPECT_EQ(resolve_allowed_target("localhost", "x", never).address, "127.0.0.1");
  EXPECT_EQ(resolve_allowed_target("198.18.0.2", "x", never).address, "198.18.0.2");
  EXPECT_EQ(resolve_allowed_target("::1", "x", never).rule, "loopback");
  EXPECT_THROW(resolve_allowed_target("192.0.2.1", "x", never), std::invalid_argument);
  // Digits and dots that are no address are typos, not names: refused without a lookup.
  for (const char* typo : {"198.18.0.256", "127.1", "198.018.0.2", "1.2.3.4.5"})
    EXPECT_THROW(resolve_allowed_target(typo, "x", never), std::invalid_argument) << typo;
}

TEST(AllowListResolve, ANameResolvesToTheFirstAllowedAddress) {
  const NameLookup lookup = [](const std::string& name, std::string*) -> std::vector<std::string> {
    EXPECT_EQ(name, "compose-post-service");
    return {"192.0.2.9", "198.19.5.3"};
  };
  const ResolvedTarget r = resolve_allowed_target("compose-post-service", "--peers compose-post-service", lookup);
  EXPECT_EQ(r.address, "198.19.5.3");
  EXPECT_EQ(r.rule, "lab subnet 198.18.0.0/15");
}

TEST(AllowListResolve, ANameOutsideThePolicyIsRefusedNamingWhatItResolvedTo) {
  const NameLookup lookup = [](const std::string&, std::string*) -> std::vector<std::string> {
    return {"203.0.113.10"};
  };
  try {
    resolve_allowed_target("front.tailscope.svc.cluster.local", "--host", lookup);
    FAIL() << "allowed";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("front.tailscope.svc.cluster.local (resolved to 203.0.113.10): refused"), std::string::npos) << m;
    EXPECT_NE(m.find("--allow-cidr"), std::string::npos) << m;
  }
  clear_declared_cidrs();
  declare_allowed_cidr(parse_cidr("203.0.113.0/24", "--allow-cidr"));
  EXPECT_EQ(resolve_allowed_target("front.tailscope.svc.cluster.local", "--host", lookup).rule,
            "declared 203.0.113.0/24");
  clear_declared_cidrs();
}

TEST(AllowListResolve, AnUnresolvableNameIsAClearError) {
  const NameLookup lookup = [](const std::string&, std::string* error) -> std::vector<std::string> {
    *error = "Name or service not known";
    return {};
  };
  try {
    resolve_allowed_target("no-such-service", "--peers user-service", lookup);
    FAIL() << "resolved";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "--peers user-service no-such-service: cannot resolve: Name or service not known");
  }
  for (const char* bad : {"", "a b", "host:80", "[::1", "x/y"})
    EXPECT_THROW(resolve_allowed_target(bad, "x", lookup), std::invalid_argument) << "'" << bad << "'";
}

TEST(AllowListResolve, TheSystemResolverAnswersLocalhostFromTheHostsFile) {
  // "localhost" is in /etc/hosts on every system this runs on: getaddrinfo answers without DNS.
  std::string error;
  const std::vector<std::string> found = system_lookup("localhost", &error);
  ASSERT_FALSE(found.empty()) << error;
  for (const std::string& a : found) EXPECT_EQ(allowing_rule(a), "loopback") << a;
}

}  // namespace
}  // namespace tailscope::net
