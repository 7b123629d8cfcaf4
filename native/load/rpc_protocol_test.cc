#include "load/rpc_protocol.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <utility>
#include <vector>

#include "net/frame.h"

namespace tailscope::load {
namespace {

using net::Frame;
using net::FrameKind;
using net::FrameParser;
using net::RpcStatus;
using Verdict = ClientProtocol::Verdict;

LoadConfig rpc_config(std::string method = "compose_post", size_t payload_bytes = 16) {
  LoadConfig config;
  config.protocol = LoadProtocol::kRpc;
  config.rpc_method = std::move(method);
  config.payload_bytes = payload_bytes;
  return config;
}

std::vector<Frame> decode_all(const std::string& bytes) {
  FrameParser parser;
  parser.feed(bytes.data(), bytes.size());
  std::vector<Frame> frames;
  Frame f;
  while (parser.next(f) == FrameParser::Result::kFrame) frames.push_back(f);
  EXPECT_EQ(parser.buffered_bytes(), 0u) << parser.error();
  return frames;
}

std::string response(uint64_t id, RpcStatus status = RpcStatus::kOk, std::string payload = "r") {
  Frame f;
  f.kind = FrameKind::kResponse;
  f.request_id = id;
  f.status = status;
  f.payload = std::move(payload);
  std::string out;
  net::append_frame(f, out);
  return out;
}

struct Answer {
  Verdict verdict;
  size_t position;
};

TEST(RpcClient, EncodesRequestFramesThatTheServiceDecoderAccepts) {
  auto client = make_client_protocol(rpc_config(), 3);
  std::string sent;
  for (uint64_t seq = 0; seq < 3; ++seq) client->append_request(seq, sent);
  // Byte layout per docs/protocol.md: length = 44 + 12 + 16, "TS", version 1, request.
  ASSERT_GE(sent.size(), 8u);
  EXPECT_EQ(sent.substr(0, 8), std::string("\x00\x00\x00\x48"
                                           "TS\x01\x00",
                                           8));
  const std::vector<Frame> frames = decode_all(sent);
  ASSERT_EQ(frames.size(), 3u);
  for (uint64_t seq = 0; seq < 3; ++seq) {
    const Frame& f = frames[seq];
    EXPECT_EQ(f.kind, FrameKind::kRequest);
    EXPECT_EQ(f.request_id, seq);
    EXPECT_EQ(f.status, RpcStatus::kOk);
    EXPECT_EQ(f.method, "compose_post");
    EXPECT_EQ(f.payload.size(), 16u);
    EXPECT_FALSE(f.trace.sampled);  // not sampled unless --rpc-sampled, and no trace id
    EXPECT_EQ(f.trace.trace_id_high | f.trace.trace_id_low | f.trace.parent_span_id, 0u);
  }
  EXPECT_NE(frames[0].payload, frames[1].payload);  // per request, as echo
}

TEST(RpcClient, SampledRequestsCarryADistinctRootTraceEach) {
  LoadConfig config = rpc_config();
  config.rpc_sampled = true;
  auto client = make_client_protocol(config, 0);
  std::string sent;
  client->append_request(0, sent);
  client->append_request(1, sent);
  const std::vector<Frame> frames = decode_all(sent);
  ASSERT_EQ(frames.size(), 2u);
  for (const Frame& f : frames) {
    EXPECT_TRUE(f.trace.sampled);
    EXPECT_NE(f.trace.trace_id_low, 0u);
    EXPECT_EQ(f.trace.parent_span_id, 0u);  // a root: the load generator records no span of its own
  }
  EXPECT_NE(frames[0].trace.trace_id_low, frames[1].trace.trace_id_low);
}

TEST(RpcClient, MatchesOutOfOrderResponsesByRequestId) {
  auto client = make_client_protocol(rpc_config(), 0);
  std::string sent;
  for (uint64_t seq = 10; seq < 14; ++seq) client->append_request(seq, sent);
  std::vector<Answer> answers;
  auto record = [&](Verdict v, size_t position) { answers.push_back({v, position}); };
  // In flight, oldest first: 10 11 12 13.
  ASSERT_TRUE(client->feed(response(12), record));                        // → 10 11 13
  ASSERT_TRUE(client->feed(response(10, RpcStatus::kRejected), record));  // → 11 13
  ASSERT_TRUE(client->feed(response(13) + response(11), record));         // → 11, then none
  ASSERT_EQ(answers.size(), 4u);
  EXPECT_EQ(answers[0].position, 2u);
  EXPECT_EQ(answers[0].verdict, Verdict::kOk);
  EXPECT_EQ(answers[1].position, 0u);
  EXPECT_EQ(answers[1].verdict, Verdict::kBadStatus);
  EXPECT_EQ(answers[2].position, 1u);
  EXPECT_EQ(answers[3].position, 0u);
  // Answered ids are no longer in flight: a duplicate response is a violation.
  EXPECT_FALSE(client->feed(response(11), record));
  EXPECT_NE(client->violation().find("not in flight"), std::string::npos) << client->violation();
}

TEST(RpcClient, ReassemblesFramesAcrossArbitrarySplits) {
  auto client = make_client_protocol(rpc_config(), 0);
  std::string sent, received;
  for (uint64_t seq = 0; seq < 5; ++seq) {
    client->append_request(seq, sent);
    received += response(seq, seq == 3 ? RpcStatus::kTimeout : RpcStatus::kOk, std::string(seq * 40, 'x'));
  }
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{47}, size_t{49}, received.size()}) {
    auto fresh = make_client_protocol(rpc_config(), 0);
    std::string ignored;
    for (uint64_t seq = 0; seq < 5; ++seq) fresh->append_request(seq, ignored);
    std::vector<Answer> answers;
    for (size_t at = 0; at < received.size(); at += chunk)
      ASSERT_TRUE(fresh->feed(std::string_view(received).substr(at, chunk),
                              [&](Verdict v, size_t position) {
                                answers.push_back({v, position});
                              }))
          << "chunk " << chunk << ": " << fresh->violation();
    ASSERT_EQ(answers.size(), 5u) << "chunk " << chunk;
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(answers[i].position, 0u);
      EXPECT_EQ(answers[i].verdict, i == 3 ? Verdict::kBadStatus : Verdict::kOk) << "chunk " << chunk;
    }
  }
}

// Each malformed input closes the connection; the violation says why.
TEST(RpcClient, RejectsMalformedFrames) {
  const std::string ok = response(0);
  std::string bad_magic = ok;
  bad_magic[4] = 'X';
  std::string oversized = ok;
  oversized.replace(0, 4, std::string("\x00\x20\x00\x00", 4));  // 2 MiB > the 1 MiB maximum
  std::string bad_status = ok;
  bad_status[17] = 7;  // codes above 6 are malformed
  std::string bad_length = ok;
  bad_length[3] = static_cast<char>(bad_length[3] + 1);
  std::string request_frame;
  Frame req;
  req.request_id = 0;
  req.method = "compose_post";
  net::append_frame(req, request_frame);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {bad_magic, "bad magic"},
      {oversized, "exceeds the maximum"},
      {bad_status, "unknown status"},
      {bad_length, "disagrees"},
      {request_frame, "request frame"},
      {response(99), "not in flight"},
      {"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "exceeds the maximum"},  // "HTTP" as a length
  };
  for (const auto& [bytes, why] : cases) {
    auto client = make_client_protocol(rpc_config(), 0);
    std::string sent;
    client->append_request(0, sent);
    int responses = 0;
    EXPECT_FALSE(client->feed(bytes, [&](Verdict, size_t) { ++responses; })) << why;
    EXPECT_EQ(responses, 0) << why;
    EXPECT_NE(client->violation().find(why), std::string::npos) << client->violation();
    EXPECT_EQ(client->violation().rfind("rpc: ", 0), 0u) << client->violation();
  }
}

TEST(RpcClient, OversizedLengthIsRejectedFromTheLengthFieldAlone) {
  auto client = make_client_protocol(rpc_config(), 0);
  std::string sent;
  client->append_request(0, sent);
  // Four bytes are enough to refuse: nothing of the body is awaited or buffered.
  EXPECT_TRUE(client->feed(std::string("\x7f\xff", 2), [](Verdict, size_t) {}));
  EXPECT_FALSE(client->feed(std::string("\xff\xff", 2), [](Verdict, size_t) {}));
}

TEST(RpcClient, ResetForgetsRequestsInFlightAndPartialFrames) {
  auto client = make_client_protocol(rpc_config(), 0);
  std::string sent;
  client->append_request(0, sent);
  const std::string r0 = response(0);
  ASSERT_TRUE(client->feed(std::string_view(r0).substr(0, 20), [](Verdict, size_t) {}));
  client->reset();  // reconnect: request 0 died with its connection
  client->append_request(1, sent);
  int answered = 0;
  ASSERT_TRUE(client->feed(response(1), [&](Verdict v, size_t position) {
    EXPECT_EQ(v, Verdict::kOk);
    EXPECT_EQ(position, 0u);
    ++answered;
  })) << client->violation();
  EXPECT_EQ(answered, 1);
  EXPECT_FALSE(client->feed(r0, [](Verdict, size_t) {}));  // a late answer to request 0
}

TEST(RpcClient, RefusesAMissingMethodOrAnOversizedRequest) {
  EXPECT_THROW(make_client_protocol(rpc_config(""), 0), std::invalid_argument);
  EXPECT_THROW(make_client_protocol(rpc_config(std::string(256, 'm')), 0), std::invalid_argument);
  EXPECT_THROW(make_client_protocol(rpc_config("m", net::kDefaultMaxFrameBytes), 0), std::invalid_argument);
  EXPECT_NO_THROW(make_client_protocol(rpc_config("m", net::kDefaultMaxFrameBytes - 49), 0));
}

TEST(LoadProtocol, ParsesTheThreeNames) {
  EXPECT_EQ(parse_load_protocol("rpc"), LoadProtocol::kRpc);
  EXPECT_EQ(to_string(parse_load_protocol("echo")), "echo");
  EXPECT_EQ(to_string(parse_load_protocol("http")), "http");
  EXPECT_THROW(parse_load_protocol("thrift"), std::invalid_argument);
}

}  // namespace
}  // namespace tailscope::load
