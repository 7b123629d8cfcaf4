#include "net/traceparent.h"

#include <gtest/gtest.h>

#include "net/http.h"

namespace tailscope::net {
namespace {

TEST(TraceParent, RoundTripsThroughTheHeaderText) {
  TraceParent p{0x4bf92f3577b34da6, 0xa3ce929d0e0e4736, 0x00f067aa0ba902b7, true};
  std::string text;
  append_traceparent(p, text);
  EXPECT_EQ(text, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  TraceParent back;
  ASSERT_TRUE(parse_traceparent(text, &back));
  EXPECT_EQ(back.trace_id_high, p.trace_id_high);
  EXPECT_EQ(back.trace_id_low, p.trace_id_low);
  EXPECT_EQ(back.parent_id, p.parent_id);
  EXPECT_TRUE(back.sampled);
  EXPECT_EQ(trace_id_hex(p.trace_id_high, p.trace_id_low), "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST(TraceParent, RefusesWhatTheSpecificationSaysToIgnore) {
  TraceParent p;
  EXPECT_FALSE(parse_traceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", &p)) << "upper case";
  EXPECT_FALSE(parse_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01", &p)) << "zero trace";
  EXPECT_FALSE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", &p)) << "zero parent";
  EXPECT_FALSE(parse_traceparent("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &p)) << "version ff";
  EXPECT_FALSE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", &p)) << "00 is exact";
  EXPECT_FALSE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", &p)) << "short";
  EXPECT_FALSE(parse_traceparent("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &p));
  EXPECT_TRUE(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-later", &p));
  EXPECT_FALSE(p.sampled);
}

TEST(TraceParent, TheHttpParserHandsTheHeaderOn) {
  const HttpRequest r = parse_http_request(
      "GET / HTTP/1.1\r\nHost: x\r\nTraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\n");
  ASSERT_EQ(r.status, HttpRequest::Status::kComplete);
  EXPECT_EQ(r.traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  EXPECT_TRUE(parse_http_request("GET / HTTP/1.1\r\n\r\n").traceparent.empty());
}

}  // namespace
}  // namespace tailscope::net
