#include "load/endpoint_mix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace tailscope::load {
namespace {

EndpointMix hotel_mix() {
  return EndpointMix::parse("--mix", {"/hotels=60", "/recommendations=39", "/user=0.5", "/reservation=0.5"});
}

// Each endpoint's count over n draws is binomial(n, share): within 5 standard
// deviations it fails by chance with probability < 1e-6 (and the seed is fixed).
void expect_binomial(const EndpointMix& mix, const std::vector<int64_t>& counts, int64_t n) {
  for (size_t i = 0; i < mix.size(); ++i) {
    const double p = mix.share(i);
    const double mean = static_cast<double>(n) * p;
    const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(counts[i]), mean, 5 * sd) << mix.endpoints()[i].path;
  }
}

TEST(EndpointMix, PicksInProportionToTheWeights) {
  const EndpointMix mix = hotel_mix();
  std::mt19937_64 rng(7);
  std::vector<int64_t> counts(mix.size());
  constexpr int64_t kDraws = 400'000;
  for (int64_t i = 0; i < kDraws; ++i) ++counts[mix.pick(rng)];
  expect_binomial(mix, counts, kDraws);
  EXPECT_GT(counts[2], 0);  // the 0.5 % endpoints are reached at all
  EXPECT_GT(counts[3], 0);
}

TEST(EndpointMix, RecorderWritesTheChosenRequestAndCountsPerEndpoint) {
  const EndpointMix mix = EndpointMix::parse("--mix", {"/a=1", "/b=3"});
  std::vector<EndpointLatencies> latencies;
  EndpointMixRecorder recorder(mix, "127.0.0.1", 1, 0, latencies);
  ASSERT_EQ(latencies.size(), 2u);
  std::vector<int64_t> counts(2);
  constexpr int64_t kDraws = 40'000;
  for (int64_t i = 0; i < kDraws; ++i) {
    std::string out;
    const uint32_t e = recorder.append_request(out);
    ASSERT_LT(e, 2u);
    // The request line names the chosen endpoint's path.
    EXPECT_EQ(out.rfind(e == 0 ? "GET /a HTTP/1.1\r\n" : "GET /b HTTP/1.1\r\n", 0), 0u) << out;
    ++counts[e];
    recorder.on_sent(e);
    recorder.on_response(e, 1000 + e, 500, i % 3);
  }
  expect_binomial(mix, counts, kDraws);
  EXPECT_EQ(latencies[0].sent_in_window, counts[0]);
  EXPECT_EQ(latencies[1].completed_in_window, counts[1]);
  EXPECT_EQ(latencies[1].intended.total_count(), counts[1]);
  EXPECT_EQ(latencies[0].intended.max(), 1000);
  ASSERT_EQ(latencies[1].intervals.size(), 3u);

  // Merged over workers: counts add up.
  std::vector<EndpointLatencies> merged;
  merge_endpoint_latencies(merged, latencies);
  merge_endpoint_latencies(merged, latencies);
  EXPECT_EQ(merged[0].completed_in_window, 2 * counts[0]);
  EXPECT_EQ(merged[1].intervals[2]->intended.total_count(), 2 * latencies[1].intervals[2]->intended.total_count());
}

TEST(EndpointMix, WorkersDrawDifferentReproducibleStreams) {
  EXPECT_NE(EndpointMixRecorder::worker_seed(1, 0), EndpointMixRecorder::worker_seed(1, 1));
  EXPECT_EQ(EndpointMixRecorder::worker_seed(5, 2), EndpointMixRecorder::worker_seed(5, 2));
  const EndpointMix mix = hotel_mix();
  auto draws = [&](int worker) {
    std::vector<EndpointLatencies> l;
    EndpointMixRecorder r(mix, "h", 9, worker, l);
    std::string seq;
    for (int i = 0; i < 64; ++i) {
      std::string out;
      seq += std::to_string(r.append_request(out));
    }
    return seq;
  };
  EXPECT_EQ(draws(0), draws(0));
  EXPECT_NE(draws(0), draws(1));
}

TEST(EndpointMix, DocumentStatesSharesAndWhatIsUnavailable) {
  const EndpointMix mix = EndpointMix::parse("--mix", {"/a=3", "/b=1"});
  std::vector<EndpointLatencies> latencies(2);
  latencies[0].sent_in_window = 3;
  latencies[0].completed_in_window = 1;
  latencies[0].intended.record(10);
  latencies[0].actual.record(5);
  latencies[1].sent_in_window = 1;
  const nlohmann::json doc = endpoints_document(mix, latencies, 2.0, 4, 2);
  ASSERT_EQ(doc["endpoints"].size(), 2u);
  EXPECT_DOUBLE_EQ(doc["endpoints"][0]["share_intended"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(doc["endpoints"][0]["share_sent"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(doc["endpoints"][0]["achieved_per_s"].get<double>(), 0.5);
  EXPECT_EQ(doc["endpoints"][0]["hlog_tags"][0], "latency_intended@/a");
  EXPECT_TRUE(doc["endpoints"][1]["latency_intended"].is_null());
  EXPECT_TRUE(doc["endpoints"][1].contains("unavailable"));
  EXPECT_EQ(doc["worker_seeds"].size(), 2u);
}

TEST(EndpointMix, RefusesBadSpecsNamingThem) {
  auto message = [](const std::vector<std::string>& specs) {
    try {
      EndpointMix::parse("--mix", specs);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({}).find("at least one"), std::string::npos);
  EXPECT_NE(message({"/a"}).find("'/a': expected PATH=WEIGHT"), std::string::npos);
  EXPECT_NE(message({"a=1"}).find("must start with '/'"), std::string::npos);
  EXPECT_NE(message({"/a=0"}).find("must be > 0"), std::string::npos);
  EXPECT_NE(message({"/a=-1"}).find("weight"), std::string::npos);
  EXPECT_NE(message({"/a=x"}).find("weight"), std::string::npos);
  EXPECT_NE(message({"/a=1e9"}).find("out of range"), std::string::npos);
  EXPECT_NE(message({"/a b=1"}).find("printable ASCII"), std::string::npos);
  EXPECT_NE(message({"/a,b=1"}).find("printable ASCII"), std::string::npos);
  EXPECT_NE(message({"/a=1", "/a=2"}).find("appears twice"), std::string::npos);
  EXPECT_EQ(message({"/q?x=1=2"}), "accepted");  // the last '=' splits
  std::vector<std::string> many;
  for (size_t i = 0; i <= kMaxMixEndpoints; ++i)
    many.push_back(std::string("/").append(std::to_string(i)).append("=1"));
  EXPECT_NE(message(many).find("at most"), std::string::npos);
}

TEST(EndpointMix, ReadsAMixFile) {
  const std::string path = ::testing::TempDir() + "/mix.txt";
  {
    std::ofstream f(path);
    f << "# hotel reservation\n/hotels=60\n\n/recommendations 39   # spaces work too\n";
  }
  const auto specs = EndpointMix::read_specs_file(path);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[1], "/recommendations=39");
  {
    std::ofstream f(path);
    f << "# nothing\n";
  }
  EXPECT_THROW(EndpointMix::read_specs_file(path), std::invalid_argument);
  std::remove(path.c_str());
  EXPECT_THROW(EndpointMix::read_specs_file(path), std::invalid_argument);
}

}  // namespace
}  // namespace tailscope::load
