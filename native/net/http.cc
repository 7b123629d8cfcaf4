#include "net/http.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace tailscope::net {
namespace {

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool parse_size(std::string_view s, size_t* out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc{};
}

HttpRequest error(int status) {
  HttpRequest r;
  r.status = HttpRequest::Status::kError;
  r.error_status = status;
  r.keep_alive = false;
  return r;
}

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

// A line ended by LF alone: HTTP/1.1 lines end in CRLF, and a request that
// uses bare LF would otherwise wait for a "\r\n\r\n" that never comes.
bool has_bare_lf(std::string_view head) {
  for (size_t i = head.find('\n'); i != std::string_view::npos; i = head.find('\n', i + 1))
    if (i == 0 || head[i - 1] != '\r') return true;
  return false;
}

}  // namespace

HttpRequest parse_http_request(std::string_view buffer, const HttpLimits& limits) {
  const size_t end = buffer.find("\r\n\r\n");
  if (has_bare_lf(end == std::string_view::npos ? buffer : buffer.substr(0, end + 4))) return error(400);
  if (end == std::string_view::npos) {
    if (buffer.size() >= limits.max_header_bytes) return error(431);
    // A request line that cannot be HTTP is rejected before the limit, so
    // garbage costs little.
    for (size_t i = 0; i < buffer.size() && buffer[i] != ' '; ++i)
      if (!is_token_char(buffer[i]) && !(buffer[i] == '\r' || buffer[i] == '\n')) return error(400);
    return {};
  }
  if (end + 4 > limits.max_header_bytes) return error(431);
  std::string_view head = buffer.substr(0, end);
  size_t line_end = head.find("\r\n");
  std::string_view request_line = head.substr(0, line_end);
  HttpRequest req;
  size_t sp1 = request_line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp2 == std::string_view::npos || sp2 == sp1 + 1) return error(400);
  req.method = request_line.substr(0, sp1);
  req.target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = request_line.substr(sp2 + 1);
  for (char c : req.method)
    if (!is_token_char(c)) return error(400);
  for (char c : req.target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return error(400);
  if (version == "HTTP/1.1")
    req.keep_alive = true;
  else if (version == "HTTP/1.0")
    req.keep_alive = false;
  else if (version.starts_with("HTTP/"))
    return error(505);
  else
    return error(400);

  size_t content_length = 0;
  bool have_length = false;
  std::string_view rest = line_end == std::string_view::npos ? std::string_view{} : head.substr(line_end + 2);
  while (!rest.empty()) {
    size_t e = rest.find("\r\n");
    std::string_view line = rest.substr(0, e);
    rest = e == std::string_view::npos ? std::string_view{} : rest.substr(e + 2);
    size_t colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos) return error(400);
    std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
    for (char c : name)
      if (!is_token_char(c)) return error(400);
    if (iequals(name, "content-length")) {
      size_t n = 0;
      if (!parse_size(value, &n) || (have_length && n != content_length)) return error(400);
      content_length = n;
      have_length = true;
    } else if (iequals(name, "transfer-encoding")) {
      return error(501);
    } else if (iequals(name, "connection")) {
      if (iequals(value, "close"))
        req.keep_alive = false;
      else if (iequals(value, "keep-alive"))
        req.keep_alive = true;
    } else if (iequals(name, "traceparent")) {
      req.traceparent = value;
    }
  }
  if (content_length > limits.max_body_bytes) return error(413);
  const size_t total = end + 4 + content_length;
  if (buffer.size() < total) return {};  // body still arriving (bounded by max_body_bytes)
  req.body = buffer.substr(end + 4, content_length);
  req.consumed_bytes = total;
  req.status = HttpRequest::Status::kComplete;
  return req;
}

void append_http_echo_response(const HttpRequest& request, std::string& out) {
  std::string_view body = request.body.empty() ? request.target : request.body;
  out += "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ";
  out += std::to_string(body.size());
  out += request.keep_alive ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n";
  if (request.method != "HEAD") out.append(body);
}

void append_http_error_response(int status, std::string& out) {
  out += "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
         "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
}

HttpResponseReader::Event HttpResponseReader::feed(std::string_view data, size_t* used) {
  *used = 0;
  while (*used < data.size()) {
    if (in_body_) {
      size_t take = std::min(body_left_, data.size() - *used);
      body_left_ -= take;
      *used += take;
      if (body_left_ == 0) {
        in_body_ = false;
        return Event::kResponse;
      }
      continue;
    }
    // Accumulate the header block; look for its end across feeds.
    const size_t before = header_.size();
    const size_t take = std::min(data.size() - *used, limits_.max_header_bytes - before);
    header_.append(data.substr(*used, take));
    size_t end = header_.find("\r\n\r\n", before >= 3 ? before - 3 : 0);
    if (end == std::string::npos) {
      *used += take;
      if (header_.size() >= limits_.max_header_bytes) {
        error_ = "response header larger than " + std::to_string(limits_.max_header_bytes) + " bytes";
        return Event::kError;
      }
      return Event::kNeedMore;
    }
    *used += end + 4 - before;
    std::string_view head(header_.data(), end);
    if (!head.starts_with("HTTP/1.") || head.size() < 12 || head[8] != ' ') {
      error_ = "malformed status line";
      return Event::kError;
    }
    status_ = 0;
    connection_close_ = false;
    for (int i = 9; i < 12; ++i) {
      if (head[i] < '0' || head[i] > '9') {
        error_ = "malformed status code";
        return Event::kError;
      }
      status_ = status_ * 10 + (head[i] - '0');
    }
    size_t content_length = 0;
    bool have_length = false;
    size_t pos = head.find("\r\n");
    while (pos != std::string_view::npos) {
      size_t next = head.find("\r\n", pos + 2);
      std::string_view line =
          head.substr(pos + 2, next == std::string_view::npos ? std::string_view::npos : next - pos - 2);
      size_t colon = line.find(':');
      if (colon != std::string_view::npos) {
        std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
        if (iequals(name, "content-length")) {
          if (!parse_size(value, &content_length) || content_length > limits_.max_body_bytes) {
            error_ = "bad Content-Length";
            return Event::kError;
          }
          have_length = true;
        } else if (iequals(name, "connection")) {
          connection_close_ = iequals(value, "close");
        } else if (iequals(name, "transfer-encoding")) {
          error_ = "chunked responses are not supported";
          return Event::kError;
        }
      }
      pos = next;
    }
    header_.clear();
    if (!have_length && status_ != 204 && status_ != 304) {
      error_ = "response without Content-Length";
      return Event::kError;
    }
    if (content_length == 0) return Event::kResponse;
    body_left_ = content_length;
    in_body_ = true;
  }
  return Event::kNeedMore;
}

std::string http_get_request(std::string_view host, std::string_view path) {
  std::string r = "GET ";
  r.append(path);
  r += " HTTP/1.1\r\nHost: ";
  r.append(host);
  r += "\r\n\r\n";
  return r;
}

}  // namespace tailscope::net
