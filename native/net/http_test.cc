#include "net/http.h"

#include <gtest/gtest.h>

namespace tailscope::net {
namespace {

TEST(HttpRequestParser, ParsesKeepAliveGet) {
  HttpRequest r = parse_http_request("GET /x HTTP/1.1\r\nHost: a\r\n\r\nGET /y");
  ASSERT_EQ(r.status, HttpRequest::Status::kComplete);
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/x");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(r.consumed_bytes, 28u);
}

TEST(HttpRequestParser, WaitsForHeaderEndAndBody) {
  EXPECT_EQ(parse_http_request("GET / HTTP/1.1\r\nHost").status, HttpRequest::Status::kIncomplete);
  HttpRequest r = parse_http_request("POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nab");
  EXPECT_EQ(r.status, HttpRequest::Status::kIncomplete);
  r = parse_http_request("POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd");
  ASSERT_EQ(r.status, HttpRequest::Status::kComplete);
  EXPECT_EQ(r.body, "abcd");
}

TEST(HttpRequestParser, RejectsBareLfLinesAtOnce) {
  // Without this a bare-LF client waits forever for a "\r\n\r\n" that never comes.
  EXPECT_EQ(parse_http_request("GET / HTTP/1.1\n\n").error_status, 400);
  EXPECT_EQ(parse_http_request("GET / HTTP/1.1\n").error_status, 400);
  EXPECT_EQ(parse_http_request("GET / HTTP/1.1\r\nHost: a\n\r\n").error_status, 400);
  // LF in a body is data, and a CR not yet followed by its LF is just incomplete.
  EXPECT_EQ(parse_http_request("POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n\n\n").status,
            HttpRequest::Status::kComplete);
  EXPECT_EQ(parse_http_request("GET / HTTP/1.1\r").status, HttpRequest::Status::kIncomplete);
}

TEST(HttpRequestParser, RejectsBadInputWithStatus) {
  EXPECT_EQ(parse_http_request("\x01\x02garbage").error_status, 400);
  EXPECT_EQ(parse_http_request("GET / SPDY/9\r\n\r\n").error_status, 400);
  EXPECT_EQ(parse_http_request("GET / HTTP/2.0\r\n\r\n").error_status, 505);
  EXPECT_EQ(parse_http_request("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").error_status, 501);
  EXPECT_EQ(parse_http_request("GET / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n").error_status, 413);
  EXPECT_EQ(parse_http_request("GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n").error_status, 400);
  EXPECT_EQ(parse_http_request("GET / HTTP/1.1\r\nX: " + std::string(9000, 'a')).error_status, 431);
}

TEST(HttpRequestParser, ConnectionCloseAndHttp10) {
  EXPECT_FALSE(parse_http_request("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse_http_request("GET / HTTP/1.0\r\n\r\n").keep_alive);
  EXPECT_TRUE(parse_http_request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
}

TEST(HttpResponseReader, ReadsPipelinedResponsesSplitAnywhere) {
  std::string two = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 404 NF\r\nContent-Length: 0\r\n\r\n";
  for (size_t split = 1; split < two.size(); ++split) {
    HttpResponseReader reader;
    std::vector<int> statuses;
    for (std::string_view part : {std::string_view(two).substr(0, split), std::string_view(two).substr(split)}) {
      while (!part.empty()) {
        size_t used = 0;
        auto ev = reader.feed(part, &used);
        ASSERT_NE(ev, HttpResponseReader::Event::kError) << reader.error();
        if (ev == HttpResponseReader::Event::kResponse) statuses.push_back(reader.status());
        part.remove_prefix(used);
      }
    }
    EXPECT_EQ(statuses, (std::vector<int>{200, 404})) << "split at " << split;
  }
}

TEST(HttpResponseReader, SaysWhichResponseAnnouncedConnectionClose) {
  HttpResponseReader reader;
  size_t used = 0;
  std::string_view keep = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  ASSERT_EQ(reader.feed(keep, &used), HttpResponseReader::Event::kResponse);
  EXPECT_FALSE(reader.connection_close());
  std::string_view closing = "HTTP/1.1 200 OK\r\nconnection:  Close\r\nContent-Length: 0\r\n\r\n";
  ASSERT_EQ(reader.feed(closing, &used), HttpResponseReader::Event::kResponse);
  EXPECT_TRUE(reader.connection_close());
  ASSERT_EQ(reader.feed(keep, &used), HttpResponseReader::Event::kResponse);
  EXPECT_FALSE(reader.connection_close()) << "the flag belongs to one response";
}

TEST(HttpResponseReader, RejectsGarbage) {
  HttpResponseReader reader;
  size_t used = 0;
  EXPECT_EQ(reader.feed("SSH-2.0-OpenSSH\r\n\r\n", &used), HttpResponseReader::Event::kError);
}

}  // namespace
}  // namespace tailscope::net
