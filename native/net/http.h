// Minimal HTTP/1.1 for the echo servers (`--protocol http`, so wrk can drive
// them) and the load generator's http protocol: request parsing and the
// response parser of the client. Keep-alive and pipelining; no chunked bodies.
//
// Both parsers treat input as hostile: a header block larger than
// max_header_bytes or a body larger than max_body_bytes is an error decided
// after looking at a bounded number of bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tailscope::net {

struct HttpLimits {
  size_t max_header_bytes = 8192;
  size_t max_body_bytes = 65536;
};

struct HttpRequest {
  enum class Status { kIncomplete, kComplete, kError };
  Status status = Status::kIncomplete;
  size_t consumed_bytes = 0;  // header + body, when kComplete
  std::string_view method, target, body;
  bool keep_alive = true;
  std::string_view traceparent;  // the W3C header's value, unparsed (net/traceparent.h)
  int error_status = 0;          // 400, 431, 413, 501, 505 when kError
};

// Parses the request at the start of `buffer`. Views point into `buffer`.
HttpRequest parse_http_request(std::string_view buffer, const HttpLimits& limits = {});

// Appends the echo server's response: 200 with the request body (or, for a
// body-less request, the target) as text/plain; HEAD gets headers only.
void append_http_echo_response(const HttpRequest& request, std::string& out);
// Appends an error response (status line, Connection: close, empty body).
void append_http_error_response(int status, std::string& out);

// Client side: parses a stream of responses.
class HttpResponseReader {
 public:
  explicit HttpResponseReader(HttpLimits limits = {}) : limits_(limits) {}
  enum class Event { kNeedMore, kResponse, kError };
  // Consumes bytes from `data`; returns kResponse (status() valid) after one
  // whole response, kNeedMore when all of data was consumed without finishing
  // one, kError on a malformed response. `used` = bytes consumed this call.
  Event feed(std::string_view data, size_t* used);
  int status() const { return status_; }
  // The last whole response said `Connection: close`: the server closes the
  // connection after it, so nothing more may be sent on it (RFC 9112 §9.6).
  bool connection_close() const { return connection_close_; }
  const std::string& error() const { return error_; }

 private:
  HttpLimits limits_;
  std::string header_;
  size_t body_left_ = 0;
  bool in_body_ = false;
  int status_ = 0;
  bool connection_close_ = false;
  std::string error_;
};

// The GET request the load generator sends.
std::string http_get_request(std::string_view host, std::string_view path);

}  // namespace tailscope::net
