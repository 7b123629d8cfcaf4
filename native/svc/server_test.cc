// The HTTP front of both server shapes answers what it cannot serve with a
// status line and closes: bad requests (the shared net/http parser's verdict,
// bare-LF requests included) and requests left incomplete past the request
// timeout (slowloris). Good requests on other connections are still served.
#include "svc/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "net/socket.h"

namespace tailscope::svc {
namespace {

constexpr int64_t kShortRequestTimeoutNs = 200'000'000;

class HttpFront : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    listen_fd_ = net::make_listener("127.0.0.1", 0);
    route_ = HttpRoute{"/compose", "compose", {}};
    ListenSpec spec{listen_fd_, WireKind::kHttp, &route_, kShortRequestTimeoutNs};
    if (GetParam() == "thread-per-connection") {
      tpc_ = std::make_unique<ThreadPerConnectionServer>(
          spec, counters_, [](InboundRequest&& r) { r.conn->respond(r.id, RpcStatus::kOk, "done"); });
      tpc_->start();
    } else {
      loops_ = std::make_unique<EventLoopServer>(
          spec, 2, counters_, [](size_t, InboundRequest&& r) { r.conn->respond(r.id, RpcStatus::kOk, "done"); });
      loops_->start();
    }
  }
  void TearDown() override {
    if (tpc_) tpc_->stop();
    if (loops_) loops_->stop();
    ::close(listen_fd_);
  }

  // Sends `request` (in one write) and returns everything received until the
  // server closes the connection.
  std::string exchange(const std::string& request) {
    const int fd = net::start_connect("127.0.0.1", net::bound_port(listen_fd_));
    EXPECT_GE(fd, 0);
    net::set_blocking(fd);
    EXPECT_EQ(net::send_some(fd, request.data(), request.size()), static_cast<long>(request.size()));
    std::string reply;
    char buf[4096];
    for (long n; (n = net::recv_some(fd, buf, sizeof buf)) > 0;) reply.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return reply;
  }

  int listen_fd_ = -1;
  HttpRoute route_;
  ServiceCounters counters_;
  std::unique_ptr<ThreadPerConnectionServer> tpc_;
  std::unique_ptr<EventLoopServer> loops_;
};

TEST_P(HttpFront, GarbageGets400AndClose) {
  const std::string reply = exchange("\x01\x02 garbage\r\n\r\n");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 400 Bad Request\r\n")) << reply;
  EXPECT_NE(reply.find("Connection: close\r\n"), std::string::npos) << reply;
  EXPECT_EQ(counters_.malformed_frames.load(), 1);
}

TEST_P(HttpFront, BareLfRequestGets400AndClose) {
  const std::string reply = exchange("POST /compose HTTP/1.1\nHost: a\n\n");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 400 Bad Request\r\n")) << reply;
}

TEST_P(HttpFront, ParserVerdictsKeepTheirStatus) {
  EXPECT_TRUE(exchange("GET /compose HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").starts_with("HTTP/1.1 501 "));
  EXPECT_TRUE(exchange("GET /compose HTTP/2.0\r\n\r\n").starts_with("HTTP/1.1 505 "));
}

TEST_P(HttpFront, RequestsBeforeABadOneAreAnsweredFirst) {
  // Pipelined: a good request, then garbage. The good one's 200 leaves
  // first, then the 400, then the connection closes.
  const std::string reply = exchange("GET /compose HTTP/1.1\r\n\r\n\x01garbage\r\n\r\n");
  ASSERT_TRUE(reply.starts_with("HTTP/1.1 200 OK\r\n")) << reply;
  EXPECT_NE(reply.find("HTTP/1.1 400 Bad Request\r\n"), std::string::npos) << reply;
}

TEST_P(HttpFront, IncompleteRequestGets408AfterTheTimeout) {
  // Slowloris: a header that never ends. Without a request timeout the
  // server would wait forever (the ctest timeout would catch that).
  const std::string reply = exchange("POST /compose HTTP/1.1\r\nHost: a\r\nX-Slow: 1");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 408 Request Timeout\r\n")) << reply;
  EXPECT_EQ(counters_.malformed_frames.load(), 1);
}

TEST_P(HttpFront, GoodRequestIsServed) {
  const std::string reply = exchange("POST /compose HTTP/1.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200 OK\r\n")) << reply;
  EXPECT_TRUE(reply.ends_with("\r\n\r\ndone")) << reply;
  EXPECT_EQ(counters_.malformed_frames.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(BothShapes, HttpFront, ::testing::Values("thread-per-connection", "event-loops"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "event-loops" ? std::string("EventLoops")
                                                              : std::string("ThreadPerConnection");
                         });

}  // namespace
}  // namespace tailscope::svc
