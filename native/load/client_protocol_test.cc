#include "load/client_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tailscope::load {
namespace {

TEST(EchoClient, CountsResponsesAcrossArbitrarySplits) {
  LoadConfig config;
  config.payload_bytes = 10;
  auto client = make_client_protocol(config, 7);
  std::string sent;
  for (int i = 0; i < 3; ++i) client->append_request(i, sent);
  int responses = 0;
  for (char c : sent) ASSERT_TRUE(client->feed(std::string_view(&c, 1), [&](auto) { ++responses; }));
  EXPECT_EQ(responses, 3);
}

TEST(EchoClient, DetectsAFlippedByteAndExtraBytes) {
  LoadConfig config;
  config.payload_bytes = 16;
  auto client = make_client_protocol(config, 1);
  std::string sent;
  client->append_request(0, sent);
  std::string wrong = sent;
  wrong[5] ^= 1;
  EXPECT_FALSE(client->feed(wrong, [](auto) {}));
  EXPECT_NE(client->violation().find("differ"), std::string::npos);
  client->reset();
  EXPECT_FALSE(client->feed("unsolicited", [](auto) {}));
}

TEST(EchoPayload, DiffersPerConnectionAndRequest) {
  char a[32], b[32], c[32];
  fill_echo_payload(1, 0, a, sizeof a);
  fill_echo_payload(1, 1, b, sizeof b);
  fill_echo_payload(2, 0, c, sizeof c);
  EXPECT_NE(std::string(a, 32), std::string(b, 32));
  EXPECT_NE(std::string(a, 32), std::string(c, 32));
}

TEST(HttpClient, ReportsBadStatus) {
  LoadConfig config;
  config.protocol = LoadProtocol::kHttp;
  auto client = make_client_protocol(config, 0);
  std::vector<ClientProtocol::Verdict> verdicts;
  ASSERT_TRUE(client->feed("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 500 E\r\nContent-Length: 0\r\n\r\n",
                           [&](auto v) { verdicts.push_back(v); }));
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_EQ(verdicts[0], ClientProtocol::Verdict::kOk);
  EXPECT_EQ(verdicts[1], ClientProtocol::Verdict::kBadStatus);
}

// bytes_received counts the responses to requests in the window, so each
// response reports its own length, however it was split across reads.
TEST(HttpClient, ReportsEachResponsesLengthAcrossSplits) {
  LoadConfig config;
  config.protocol = LoadProtocol::kHttp;
  auto client = make_client_protocol(config, 0);
  const std::string first = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
  const std::string second = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  const std::string wire = first + second;
  std::vector<size_t> lengths;
  auto on_response = [&](ClientProtocol::Verdict, size_t, size_t bytes) { lengths.push_back(bytes); };
  ASSERT_TRUE(client->feed(std::string_view(wire).substr(0, 10), on_response));
  ASSERT_TRUE(client->feed(std::string_view(wire).substr(10), on_response));
  EXPECT_EQ(lengths, (std::vector<size_t>{first.size(), second.size()}));
  // A response cut by a reconnect does not lend its bytes to the next one.
  ASSERT_TRUE(client->feed(std::string_view(first).substr(0, 20), on_response));
  client->reset();
  ASSERT_TRUE(client->feed(second, on_response));
  EXPECT_EQ(lengths.back(), second.size());
}

}  // namespace
}  // namespace tailscope::load
