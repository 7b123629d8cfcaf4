// The getrusage reader: the JSON section keeps its keys and its arithmetic
// (documents written before the reader moved here must compare equal), and
// CPU time grows with work done.
#include "core/rusage.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace tailscope {
namespace {

TEST(ProcessUsage, JsonHasExactlyTheKeysThePythonSideReads) {
  const nlohmann::json doc = process_usage_json(read_process_usage());
  std::set<std::string> keys;
  for (const auto& [key, _] : doc.items()) keys.insert(key);
  EXPECT_EQ(keys, (std::set<std::string>{"user_s", "sys_s", "max_rss_bytes", "voluntary_ctx_switches",
                                         "involuntary_ctx_switches"}));
  EXPECT_TRUE(doc["user_s"].is_number_float());
  EXPECT_TRUE(doc["max_rss_bytes"].is_number_integer());
  EXPECT_TRUE(doc["voluntary_ctx_switches"].is_number_integer());
}

TEST(ProcessUsage, SecondsAreWholeSecondsPlusMicrosecondsAsTimevalSpellsThem) {
  ProcessUsage u;
  u.user_us = 3'000'007;
  u.sys_us = 999'999;
  u.max_rss_bytes = 4096;
  u.voluntary_ctx_switches = 5;
  u.involuntary_ctx_switches = 6;
  const nlohmann::json doc = process_usage_json(u);
  EXPECT_EQ(doc["user_s"].get<double>(), 3.0 + 7 / 1e6);
  EXPECT_EQ(doc["sys_s"].get<double>(), 0.0 + 999'999 / 1e6);
  EXPECT_EQ(doc.dump(), R"({"involuntary_ctx_switches":6,"max_rss_bytes":4096,"sys_s":0.999999,"user_s":3.000007,)"
                        R"("voluntary_ctx_switches":5})");
  EXPECT_EQ(u.cpu_ns(), 4'000'006'000);
}

TEST(ProcessUsage, CpuTimeGrowsWithWork) {
  const int64_t before_ns = process_cpu_ns();
  volatile uint64_t sink = 0;
  // The kernel accounts in ticks: spin until one has been counted.
  while (process_cpu_ns() == before_ns) sink = sink + 1;
  EXPECT_GT(process_cpu_ns(), before_ns);
  EXPECT_GT(read_process_usage().max_rss_bytes, 0);
}

}  // namespace
}  // namespace tailscope
