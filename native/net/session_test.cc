#include "net/session.h"

#include <gtest/gtest.h>

namespace tailscope::net {
namespace {

TEST(StreamSession, EchoesBytesAndBoundsPendingOutput) {
  SessionLimits limits;
  limits.max_pending_output_bytes = 1024;
  StreamSession s(WireProtocol::kEcho, limits);
  std::string data(1024, 'x');
  ASSERT_EQ(s.read_budget(), 1024u);
  s.on_received(data.data(), data.size());
  EXPECT_EQ(s.pending_output(), data);
  EXPECT_EQ(s.read_budget(), 0u) << "a client that never reads must stop being read";
  EXPECT_FALSE(s.wants_read());
  s.on_sent(1000);
  EXPECT_EQ(s.read_budget(), 1000u);
}

TEST(StreamSession, HalfCloseFlushesThenFinishes) {
  StreamSession s(WireProtocol::kEcho);
  s.on_received("abc", 3);
  s.on_peer_closed();
  EXPECT_FALSE(s.finished());
  s.on_sent(3);
  EXPECT_TRUE(s.finished());
}

TEST(StreamSession, HttpPipelinedRequestsAnsweredInOrder) {
  StreamSession s(WireProtocol::kHttp);
  std::string req = "GET /a HTTP/1.1\r\n\r\nGET /bb HTTP/1.1\r\n\r\n";
  s.on_received(req.data(), req.size());
  std::string out(s.pending_output());
  EXPECT_NE(out.find("Content-Length: 2\r\n\r\n/a"), std::string::npos);
  EXPECT_NE(out.find("Content-Length: 3\r\n\r\n/bb"), std::string::npos);
  EXPECT_FALSE(s.finished());
}

TEST(StreamSession, HttpGarbageGets400AndCloses) {
  StreamSession s(WireProtocol::kHttp);
  std::string junk = "\x16\x03\x01 hello";
  s.on_received(junk.data(), junk.size());
  EXPECT_TRUE(std::string(s.pending_output()).starts_with("HTTP/1.1 400"));
  EXPECT_FALSE(s.wants_read());
  s.on_sent(s.pending_output().size());
  EXPECT_TRUE(s.finished());
}

TEST(StreamSession, HttpOversizedHeaderIsBounded) {
  StreamSession s(WireProtocol::kHttp);
  std::string start = "GET / HTTP/1.1\r\nX: ";
  s.on_received(start.data(), start.size());
  std::string filler(4096, 'a');
  for (int i = 0; i < 10 && s.wants_read(); ++i) s.on_received(filler.data(), std::min(filler.size(), s.read_budget()));
  EXPECT_TRUE(std::string(s.pending_output()).starts_with("HTTP/1.1 431"));
}

}  // namespace
}  // namespace tailscope::net
