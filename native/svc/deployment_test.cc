#include "svc/deployment.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace tailscope::svc {
namespace {

using nlohmann::json;

Topology two_services() {
  return parse_topology(json::parse(R"({
    "name": "t", "front": {"service": "a", "path": "/x", "endpoint": "run"},
    "services": [
      {"name": "a", "endpoints": [{"name": "run", "stages": [
        {"group": {"calls": [{"name": "b1", "service": "b", "endpoint": "get"}]}}]}]},
      {"name": "b", "endpoints": [{"name": "get", "stages": [{"cpu": 1}]}]}
    ]})"));
}

json two_hosts() {
  return json::parse(R"({
    "name": "t-2-hosts",
    "hosts": {"front": {"netns": "ts-h1", "address": "198.18.0.2", "cpus": "0"},
              "logic": {"netns": "ts-h2", "address": "198.18.0.3", "cpus": "1"}},
    "links": [{"between": ["front", "logic"], "delay_us": 100, "jitter_us": 10}],
    "services": {"a": {"host": "front", "port": 8080, "cpus": "0-1"},
                 "b": {"host": "logic"}}})");
}

std::string error_of(const json& doc) {
  try {
    parse_deployment(doc, two_services(), "d.json");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Deployment, ParsesHostsLinksAndServices) {
  const Deployment d = parse_deployment(two_hosts(), two_services(), "d.json");
  EXPECT_EQ(d.name, "t-2-hosts");
  EXPECT_EQ(d.host_of("a").netns, "ts-h1");
  EXPECT_EQ(d.host_of("b").address, "198.18.0.3");
  EXPECT_EQ(d.services.at("a").port, 8080);
  EXPECT_EQ(d.services.at("b").port, 0);  // ephemeral
  EXPECT_EQ(d.cpus_of("a"), "0-1");       // the service's own wins
  EXPECT_EQ(d.cpus_of("b"), "1");         // else its host's
  // Each end of a link holds frames to the other end's address.
  EXPECT_EQ(d.link_delays_for("front").for_address("198.18.0.3").delay_ns, 100'000);
  EXPECT_EQ(d.link_delays_for("front").for_address("198.18.0.3").jitter_ns, 10'000);
  EXPECT_EQ(d.link_delays_for("logic").for_address("198.18.0.2").delay_ns, 100'000);
  EXPECT_TRUE(d.link_delays_for("logic").for_address("198.18.0.3").zero());
  EXPECT_EQ(d.links_json()[0]["addresses"], json({"198.18.0.2", "198.18.0.3"}));
}

TEST(Deployment, TheStoresHostIsTheNamedOneOrTheGraphsOnlyHost) {
  std::string why;
  json doc = two_hosts();
  EXPECT_EQ(parse_deployment(doc, two_services(), "d.json").stores_host_or_only(&why), nullptr);
  EXPECT_NE(why.find("names none for the store servers (give `stores: HOST`"), std::string::npos) << why;
  doc["stores"] = {{"host", "logic"}};
  const Deployment named = parse_deployment(doc, two_services(), "d.json");
  ASSERT_NE(named.stores_host_or_only(&why), nullptr);
  EXPECT_EQ(named.stores_host_or_only(&why)->address, "198.18.0.3");
  json one = two_hosts();
  one["services"]["b"]["host"] = "front";
  one.erase("links");
  const Deployment single = parse_deployment(one, two_services(), "d.json");
  ASSERT_NE(single.stores_host_or_only(&why), nullptr);
  EXPECT_EQ(single.stores_host_or_only(&why)->name, "front");
  doc["stores"] = {{"host", "storage"}};
  EXPECT_NE(error_of(doc).find("stores.host: unknown host 'storage'"), std::string::npos) << error_of(doc);
  doc["stores"] = "logic";
  EXPECT_NE(error_of(doc).find("stores: expected an object"), std::string::npos) << error_of(doc);
}

TEST(Deployment, OptionalPartsMayBeAbsentAndNetnsNullMeansHere) {
  json d = two_hosts();
  d.erase("links");
  d["hosts"]["front"]["netns"] = nullptr;
  d["hosts"]["front"]["address"] = "127.0.0.1";
  d["hosts"]["front"].erase("cpus");
  d["services"]["a"].erase("cpus");
  const Deployment p = parse_deployment(d, two_services(), "d.json");
  EXPECT_FALSE(p.host_of("a").netns.has_value());
  EXPECT_EQ(p.cpus_of("a"), "");
  EXPECT_TRUE(p.links.empty());
  EXPECT_TRUE(p.link_delays_for("front").empty());
}

TEST(Deployment, UnknownHostIsNamed) {
  json d = two_hosts();
  d["services"]["b"]["host"] = "storage";
  EXPECT_NE(error_of(d).find("services.b.host: unknown host 'storage'"), std::string::npos) << error_of(d);
  d = two_hosts();
  d["links"][0]["between"][1] = "storage";
  EXPECT_NE(error_of(d).find("links[0].between: unknown host 'storage'"), std::string::npos) << error_of(d);
}

TEST(Deployment, UnknownAndMissingServicesAreNamed) {
  json d = two_hosts();
  d["services"]["c"] = {{"host", "logic"}};
  EXPECT_NE(error_of(d).find("services.c: the topology 't' has no such service"), std::string::npos) << error_of(d);
  d = two_hosts();
  d["services"].erase("b");
  EXPECT_NE(error_of(d).find("service 'b' is not deployed"), std::string::npos) << error_of(d);
}

TEST(Deployment, TwoServicesOnOnePortOfOneHostAreRefused) {
  json d = two_hosts();
  d["services"]["b"] = {{"host", "front"}, {"port", 8080}};
  EXPECT_NE(error_of(d).find("both take 198.18.0.2:8080"), std::string::npos) << error_of(d);
  // The same port on two hosts is fine.
  d["services"]["b"]["host"] = "logic";
  EXPECT_EQ(error_of(d), "");
  // Two hosts that are one address in one namespace are one host.
  d["hosts"]["front"] = {{"netns", nullptr}, {"address", "127.0.0.1"}};
  d["hosts"]["logic"] = {{"netns", nullptr}, {"address", "127.0.0.1"}};
  d.erase("links");
  EXPECT_NE(error_of(d).find("both take 127.0.0.1:8080"), std::string::npos) << error_of(d);
}

TEST(Deployment, BadValuesAreRefusedNamingTheEntry) {
  auto refused = [](const json& d, const std::string& needle) {
    const std::string e = error_of(d);
    EXPECT_NE(e.find(needle), std::string::npos) << "wanted '" << needle << "', got '" << e << "'";
    EXPECT_EQ(e.rfind("d.json: ", 0), 0u) << e;
  };
  json d = two_hosts();
  d["links"][0]["delay_us"] = 10'000'001;
  refused(d, "links[0].delay_us: 10000001 is outside 0 … 10000000");
  d = two_hosts();
  d["links"][0]["delay_us"] = -1;
  refused(d, "links[0].delay_us");
  d = two_hosts();
  d["links"][0]["jitter_us"] = 101;
  refused(d, "links[0].jitter_us: 101 is outside 0 … 100");
  d = two_hosts();
  d["links"].push_back({{"between", {"logic", "front"}}, {"delay_us", 5}});
  refused(d, "given twice");
  d = two_hosts();
  d["links"][0]["between"] = {"front", "front"};
  refused(d, "two different hosts");
  d = two_hosts();
  d["hosts"]["logic"]["address"] = "192.0.2.1";
  refused(d, "refused");
  d = two_hosts();
  d["hosts"]["logic"]["address"] = "lab-host-2";
  refused(d, "not a numeric");
  d = two_hosts();
  d["hosts"]["logic"]["netns"] = "../etc";
  refused(d, "not a namespace name");
  d = two_hosts();
  d["hosts"]["logic"].erase("netns");
  refused(d, "'netns' is required");
  d = two_hosts();
  d["services"]["a"]["port"] = 65536;
  refused(d, "services.a.port");
  d = two_hosts();
  d["services"]["a"]["cpus"] = "zero";
  refused(d, "services.a.cpus");
  d = two_hosts();
  d["services"]["a"]["cpus"] = 1;
  refused(d, "services.a.cpus: expected a non-empty string");
  refused(json::array(), "expected a JSON object");
}

}  // namespace
}  // namespace tailscope::svc
