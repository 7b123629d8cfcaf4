#include "svc/otlp_exporter.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tailscope::svc {
namespace {

TEST(OtlpEndpoint, DefaultsPortAndPathAndAcceptsLoopbackAndTheLabSubnet) {
  const auto a = parse_otlp_endpoint("http://127.0.0.1");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 4318);
  EXPECT_EQ(a.path, "/v1/traces");
  const auto b = parse_otlp_endpoint("http://198.19.255.254:9999/custom/traces");
  EXPECT_EQ(b.port, 9999);
  EXPECT_EQ(b.path, "/custom/traces");
  EXPECT_EQ(parse_otlp_endpoint("http://localhost:4318/").host, "127.0.0.1");
}

// A resolver that knows two names: no test sends a DNS query.
std::vector<std::string> fake_lookup(const std::string& name, std::string* error) {
  if (name == "jaeger.tailscope.svc.cluster.local") return {"198.19.130.7"};
  if (name == "example.com") return {"192.0.2.80"};
  *error = "Name or service not known";
  return {};
}

TEST(OtlpEndpoint, AcceptsANameThatResolvesInsideThePolicyAndKeepsItForTheHostHeader) {
  const auto e = parse_otlp_endpoint("http://jaeger.tailscope.svc.cluster.local:4318", "--otlp-endpoint", fake_lookup);
  EXPECT_EQ(e.host, "jaeger.tailscope.svc.cluster.local");
  EXPECT_EQ(e.address, "198.19.130.7");
  EXPECT_EQ(e.rule, "lab subnet 198.18.0.0/15");
  EXPECT_EQ(parse_otlp_endpoint("http://198.19.0.9:4318").address, "198.19.0.9");
}

TEST(OtlpEndpoint, RefusesANameThatDoesNotResolveOrResolvesOutsideThePolicy) {
  for (const auto& [url, why] : std::vector<std::pair<std::string, std::string>>{
           {"http://example.com:4318", "resolved to 192.0.2.80): refused"},
           {"http://no-such-collector:4318", "cannot resolve: Name or service not known"}}) {
    try {
      parse_otlp_endpoint(url, "--otlp-endpoint", fake_lookup);
      ADD_FAILURE() << url << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--otlp-endpoint '" + url + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

TEST(OtlpEndpoint, RefusesEverythingElseNamingTheFlag) {
  for (const std::string url :
       {"https://127.0.0.1:4318", "127.0.0.1:4318", "http://192.0.2.1:4318", "http://198.20.0.1:4318",
        "http://198.17.255.255:4318", "http://127.0.0.1:0", "http://127.0.0.1:65536", "http://127.0.0.1:43x",
        "http://:4318", "http://127.0.0.1:4318/a b"}) {
    try {
      parse_otlp_endpoint(url, "--otlp-endpoint", fake_lookup);
      ADD_FAILURE() << url << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--otlp-endpoint '" + url + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(OtlpExporter, AFullQueueDropsAndCountsAndNeverBlocks) {
  OtlpExporterOptions options;
  options.queue_capacity_spans = 8;
  // Not started: nothing drains the queue, as when the exporter thread is stuck on a stalled endpoint.
  OtlpExporter exporter(parse_otlp_endpoint("http://127.0.0.1:9"), options);
  SpanRecord span;
  span.trace_id_low = 1;
  span.span_id = 2;
  for (int i = 0; i < 20; ++i) exporter.offer(span);
  auto stats = exporter.stats();
  EXPECT_EQ(stats["spans_offered"], 20);
  EXPECT_EQ(stats["spans_dropped_queue_full"], 12);
  EXPECT_EQ(stats["queue_capacity_spans"], 8);
  exporter.stop();  // what is still queued at shutdown is dropped and counted
  stats = exporter.stats();
  EXPECT_EQ(stats["spans_dropped_shutdown"], 8);
  EXPECT_EQ(stats["spans_exported"], 0);
}

}  // namespace
}  // namespace tailscope::svc
