#include "net/frame.h"

#include <gtest/gtest.h>

namespace tailscope::net {
namespace {

Frame request() {
  Frame f;
  f.kind = FrameKind::kRequest;
  f.request_id = 0x0102030405060708ULL;
  f.trace = TraceContext{0x1111, 0x2222, 0x3333, true};
  f.method = "compose_post";
  f.payload = std::string(100, 'x');
  return f;
}

TEST(Frame, RoundTripsEveryField) {
  std::string bytes;
  append_frame(request(), bytes);
  ASSERT_EQ(bytes.size(), kFrameHeaderBytes + 12 + 100);
  FrameParser p;
  p.feed(bytes.data(), bytes.size());
  Frame f;
  ASSERT_EQ(p.next(f), FrameParser::Result::kFrame);
  EXPECT_EQ(f.request_id, 0x0102030405060708ULL);
  EXPECT_EQ(f.method, "compose_post");
  EXPECT_EQ(f.payload, std::string(100, 'x'));
  EXPECT_TRUE(f.trace.sampled);
  EXPECT_EQ(f.trace.trace_id_high, 0x1111u);
  EXPECT_EQ(f.trace.trace_id_low, 0x2222u);
  EXPECT_EQ(f.trace.parent_span_id, 0x3333u);
  EXPECT_EQ(p.next(f), FrameParser::Result::kNeedMore);
}

TEST(Frame, LayoutIsBigEndianAsDocumented) {
  std::string bytes;
  append_frame(request(), bytes);
  EXPECT_EQ(static_cast<unsigned char>(bytes[3]), kFrameHeaderBytes - 4 + 12 + 100);  // length excludes itself
  EXPECT_EQ(bytes.substr(4, 2), "TS");
  EXPECT_EQ(bytes[6], 1);                               // version
  EXPECT_EQ(bytes[7], 0);                               // request
  EXPECT_EQ(static_cast<unsigned char>(bytes[15]), 8);  // request id, last byte
  EXPECT_EQ(bytes[18], 1);                              // sampled flag
  EXPECT_EQ(bytes[19], 12);                             // method length
  EXPECT_EQ(bytes.substr(48, 12), "compose_post");
}

TEST(Frame, ByteAtATimeAndManyPerBuffer) {
  std::string bytes;
  for (int i = 0; i < 3; ++i) append_frame(request(), bytes);
  FrameParser p;
  Frame f;
  int frames = 0;
  for (char c : bytes) {
    p.feed(&c, 1);
    while (p.next(f) == FrameParser::Result::kFrame) ++frames;
  }
  EXPECT_EQ(frames, 3);
  EXPECT_EQ(p.buffered_bytes(), 0u);
}

TEST(Frame, OversizedFrameIsRejectedFromItsLengthAlone) {
  FrameParser p(4096);
  const unsigned char len[4] = {0x00, 0x10, 0x00, 0x00};  // 1 MiB
  p.feed(reinterpret_cast<const char*>(len), 4);
  Frame f;
  EXPECT_EQ(p.next(f), FrameParser::Result::kError);
  EXPECT_NE(p.error().find("exceeds the maximum"), std::string::npos);
  EXPECT_EQ(p.buffered_bytes(), 0u);
  std::string small;
  EXPECT_THROW(append_frame(request(), small, 64), std::invalid_argument);
}

TEST(Frame, MalformedFramesAreErrors) {
  std::string good;
  append_frame(request(), good);
  auto expect_error = [](std::string bytes, const char* why) {
    FrameParser p;
    p.feed(bytes.data(), bytes.size());
    Frame f;
    EXPECT_EQ(p.next(f), FrameParser::Result::kError) << why;
    EXPECT_EQ(p.next(f), FrameParser::Result::kError) << "stays in error: " << why;
  };
  std::string b = good;
  b[4] = 'X';
  expect_error(b, "bad magic");
  b = good;
  b[6] = 9;
  expect_error(b, "bad version");
  b = good;
  b[7] = 5;
  expect_error(b, "bad kind");
  b = good;
  b[18] = 0x40;
  expect_error(b, "unknown flag");
  b = good;
  b[19] = 13;
  expect_error(b, "method length disagrees with frame length");
  b = good;
  b[17] = 1;
  expect_error(b, "request with a status");
  expect_error(std::string("\x00\x00\x00\x02TS", 6), "length shorter than header");
  expect_error("GET / HTTP/1.1\r\n\r\n", "HTTP on the RPC port");
}

TEST(Frame, ResponsesCarryStatusAndNoMethod) {
  Frame r;
  r.kind = FrameKind::kResponse;
  r.request_id = 7;
  r.status = RpcStatus::kTimeout;
  std::string bytes;
  append_frame(r, bytes);
  Frame out;
  size_t used = 0;
  std::string err;
  ASSERT_EQ(parse_frame(bytes, kDefaultMaxFrameBytes, out, &used, &err), FrameParser::Result::kFrame) << err;
  EXPECT_EQ(out.status, RpcStatus::kTimeout);
  EXPECT_EQ(used, kFrameHeaderBytes);
}

}  // namespace
}  // namespace tailscope::net
