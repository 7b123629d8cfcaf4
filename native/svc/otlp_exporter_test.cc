#include "svc/otlp_exporter.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

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

TEST(OtlpEndpoint, RefusesEverythingElseNamingTheFlag) {
  for (const std::string url :
       {"https://127.0.0.1:4318", "127.0.0.1:4318", "http://192.0.2.1:4318", "http://198.20.0.1:4318",
        "http://198.17.255.255:4318", "http://example.com:4318", "http://127.0.0.1:0", "http://127.0.0.1:65536",
        "http://127.0.0.1:43x", "http://:4318", "http://127.0.0.1:4318/a b"}) {
    try {
      parse_otlp_endpoint(url, "--otlp-endpoint");
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
