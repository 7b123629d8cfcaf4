#include "svc/topology.h"

#include <gtest/gtest.h>

namespace tailscope::svc {
namespace {

using nlohmann::json;

json two_services() {
  return json::parse(R"({
    "name": "t", "front": {"service": "a", "path": "/x", "endpoint": "run"},
    "services": [
      {"name": "a", "endpoints": [{"name": "run", "stages": [
        {"cpu": 5},
        {"group": {"calls": [{"name": "b1", "service": "b", "endpoint": "get"},
                             {"name": "b2", "service": "b", "endpoint": "get", "launch": "deferred"}],
                   "join": ["b2", "b1"]}}]}]},
      {"name": "b", "endpoints": [{"name": "get", "stages": [
        {"store": {"span": "s", "latency": {"kind": "lognormal", "median_us": 60, "sigma": 0.4},
                   "hit_ratio": 0.5, "on_miss": [{"cpu": 1}]}}]}]}
    ]})");
}

std::string error_of(const json& doc) {
  try {
    parse_topology(doc, "t.json");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Topology, ParsesStagesGroupsAndJoinOrder) {
  Topology t = parse_topology(two_services());
  const Endpoint& e = t.service("a").endpoints.at("run");
  ASSERT_EQ(e.stages.size(), 2u);
  EXPECT_EQ(e.server_span, "run_server");
  const CallGroup& g = e.stages[1].group;
  EXPECT_EQ(g.calls[1].launch, CallSpec::Launch::kDeferred);
  EXPECT_EQ(g.join_order, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(t.start_order(), (std::vector<std::string>{"b", "a"}));
  ASSERT_TRUE(t.front);
  EXPECT_EQ(t.front->path, "/x");
}

TEST(Topology, UnknownServiceIsNamed) {
  json d = two_services();
  d["services"][0]["endpoints"][0]["stages"][1]["group"]["calls"][0]["service"] = "nope";
  EXPECT_NE(error_of(d).find("unknown service 'nope'"), std::string::npos) << error_of(d);
}

TEST(Topology, MissingEndpointIsNamed) {
  json d = two_services();
  d["services"][0]["endpoints"][0]["stages"][1]["group"]["calls"][0]["endpoint"] = "put";
  EXPECT_NE(error_of(d).find("service 'b' has no endpoint 'put'"), std::string::npos) << error_of(d);
}

TEST(Topology, CycleIsShownAsAPath) {
  json d = two_services();
  d["services"][1]["endpoints"][0]["stages"].push_back({{"call", {{"service", "a"}, {"endpoint", "run"}}}});
  const std::string e = error_of(d);
  EXPECT_NE(e.find("call cycle"), std::string::npos) << e;
  EXPECT_NE(e.find("a.run → b.get → a.run"), std::string::npos) << e;
}

TEST(Topology, BadInputsHaveClearErrors) {
  json d = two_services();
  d["services"][0]["endpoints"][0]["stages"][0] = {{"sleep", 1}};
  EXPECT_NE(error_of(d).find("unknown stage 'sleep'"), std::string::npos);
  d = two_services();
  d["services"][0]["endpoints"][0]["stages"][1]["group"]["join"] = {"b1"};
  EXPECT_NE(error_of(d).find("join must name every call"), std::string::npos);
  d = two_services();
  d["services"][1]["endpoints"][0]["stages"][0]["store"]["latency"] = {{"kind", "pareto"}};
  EXPECT_NE(error_of(d).find("unknown distribution kind 'pareto'"), std::string::npos);
  d = two_services();
  d["front"]["endpoint"] = "missing";
  EXPECT_NE(error_of(d).find("has no endpoint 'missing'"), std::string::npos);
  d = two_services();
  d["services"].push_back(d["services"][1]);
  EXPECT_NE(error_of(d).find("defined twice"), std::string::npos);
  EXPECT_THROW(load_topology_file("/nonexistent/t.json"), std::invalid_argument);
}

TEST(Distribution, SamplesStayInRangeAndAreCapped) {
  LatencyDistribution d = parse_distribution(json{{"kind", "lognormal"}, {"median_us", 100}, {"sigma", 1.0}}, "d");
  for (int i = 0; i < 10000; ++i) {
    const int64_t v = d.sample_ns();
    ASSERT_GE(v, 0);
    ASSERT_LE(v, 20 * 100'000);
  }
  LatencyDistribution u = parse_distribution(json{{"kind", "uniform"}, {"min_us", 5}, {"max_us", 6}}, "u");
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(u.sample_ns() >= 5000 && u.sample_ns() <= 6000);
  EXPECT_EQ(parse_distribution(json(7), "c").sample_ns(), 7000);
}

}  // namespace
}  // namespace tailscope::svc
