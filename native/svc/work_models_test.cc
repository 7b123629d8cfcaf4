// The work stage in every concurrency model: a tiny graph whose services do
// DeathStarBench's work (text scan, unique id, post round trip) serves its
// requests with real work, and with `--work simulated` burns the busy loops
// the stages keep instead; the per-service work counters say which ran.
#include <gtest/gtest.h>
#include <unistd.h>

#include "svc/runtime.h"
#include "svc/testing/graph_harness.h"

namespace tailscope::svc {
namespace {

using nlohmann::json;

// The simulated busy loop is long (2 ms) beside the real work (µs), so which one ran shows in the CPU.
const char* kWorkGraph = R"({
  "name": "work-mini", "call_timeout_ms": 2000,
  "front": {"service": "front", "path": "/wrk2-api/post/compose", "endpoint": "compose"},
  "services": [
    {"name": "front", "endpoints": [{"name": "compose", "span": "/wrk2-api/post/compose", "stages": [
      {"call": {"service": "text", "endpoint": "compose_text", "span": "compose_text_client"}},
      {"work": {"kind": "post_serde", "bytes": 300}}]}]},
    {"name": "text", "endpoints": [{"name": "compose_text", "span": "compose_text_server", "stages": [
      {"work": {"kind": "text", "bytes": 600, "simulated_cpu": {"kind": "constant", "us": 2000}}},
      {"work": {"kind": "unique_id", "repeat": 3, "simulated_cpu": 2000}}]}]}
  ]})";

class WorkEveryModel : public ::testing::TestWithParam<std::string> {};

json serve_ten(const std::string& model, bool simulated, json* front_work) {
  RuntimeOptions options;
  options.simulated_work = simulated;
  testing::Graph g(model, options, kWorkGraph);
  const int fd = testing::connect_to(g.port("front"));
  EXPECT_GE(fd, 0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(testing::http_get(fd), 200) << model << " request " << i;
  ::close(fd);
  *front_work = g.instance("front").result()["work"];
  return g.instance("text").result()["work"];
}

TEST_P(WorkEveryModel, RealWorkServesAndSimulatedWorkBurnsTheKeptBusyLoop) {
  Tracer::configure(0.0);
  json front;
  const json real = serve_ten(GetParam(), false, &front);
  EXPECT_EQ(real["mode"], "real");
  EXPECT_EQ(real["stages"], 20);  // two work stages per request
  EXPECT_EQ(real["simulated_stages"], 0);
  EXPECT_GT(real["cpu_ns"].get<int64_t>(), 0);
  EXPECT_EQ(front["stages"], 10);

  const json simulated = serve_ten(GetParam(), true, &front);
  EXPECT_EQ(simulated["mode"], "simulated");
  EXPECT_EQ(simulated["stages"], 20);
  EXPECT_EQ(simulated["simulated_stages"], 20);
  // A burn is a CPU budget: the thread ran at least 2 ms per stage, whatever the scheduler did.
  EXPECT_GE(simulated["cpu_ns"].get<int64_t>(), 20 * 2'000'000);
  // The front's post_serde keeps no busy loop: it does its real work in both modes.
  EXPECT_EQ(front["mode"], "simulated");
  EXPECT_EQ(front["stages"], 10);
  EXPECT_EQ(front["simulated_stages"], 0);
}

INSTANTIATE_TEST_SUITE_P(Svc, WorkEveryModel,
                         ::testing::Values("std-async", "std-thread", "pool-blocking", "pool-callback", "coroutine"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace tailscope::svc
