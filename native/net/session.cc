#include "net/session.h"

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include "net/poller.h"
#include "net/socket.h"

namespace tailscope::net {

WireProtocol parse_wire_protocol(std::string_view text) {
  if (text == "echo") return WireProtocol::kEcho;
  if (text == "http") return WireProtocol::kHttp;
  throw std::invalid_argument("--protocol: '" + std::string(text) + "' is neither echo nor http");
}

std::string_view to_string(WireProtocol p) { return p == WireProtocol::kEcho ? "echo" : "http"; }

StreamSession::StreamSession(WireProtocol protocol, SessionLimits limits) : protocol_(protocol), limits_(limits) {}

size_t StreamSession::read_budget() const {
  if (close_after_flush_ || pending_bytes() >= limits_.max_pending_output_bytes) return 0;
  if (protocol_ == WireProtocol::kEcho) return limits_.max_pending_output_bytes - pending_bytes();
  const size_t max_in = limits_.http.max_header_bytes + limits_.http.max_body_bytes;
  return in_.size() >= max_in ? 0 : max_in - in_.size();
}

void StreamSession::on_received(const char* data, size_t n) {
  if (out_head_ == out_.size()) {
    out_.clear();
    out_head_ = 0;
  }
  if (protocol_ == WireProtocol::kEcho) {
    out_.append(data, n);
    return;
  }
  in_.append(data, n);
  process_http();
}

void StreamSession::process_http() {
  size_t used = 0;
  while (!close_after_flush_ && pending_bytes() < limits_.max_pending_output_bytes) {
    HttpRequest req = parse_http_request(std::string_view(in_).substr(used), limits_.http);
    if (req.status == HttpRequest::Status::kIncomplete) break;
    if (req.status == HttpRequest::Status::kError) {
      append_http_error_response(req.error_status, out_);
      close_after_flush_ = true;
      break;
    }
    append_http_echo_response(req, out_);
    used += req.consumed_bytes;
    if (!req.keep_alive) close_after_flush_ = true;
  }
  in_.erase(0, used);
  if (close_after_flush_) in_.clear();
}

void StreamSession::on_sent(size_t n) {
  out_head_ += n;
  if (out_head_ == out_.size()) {
    out_.clear();
    out_head_ = 0;
  } else if (out_head_ > out_.size() / 2) {
    out_.erase(0, out_head_);
    out_head_ = 0;
  }
  // Pipelined requests parked while output was full can proceed now.
  if (protocol_ == WireProtocol::kHttp && !in_.empty()) process_http();
}

IoVerdict read_ready(int fd, StreamSession& session) {
  char buffer[16384];
  for (int rounds = 0; rounds < 4; ++rounds) {  // bounded: one connection cannot starve the loop
    size_t budget = std::min(session.read_budget(), sizeof buffer);
    if (budget == 0) break;
    long r = recv_some(fd, buffer, budget);
    if (r > 0) {
      session.on_received(buffer, static_cast<size_t>(r));
      if (static_cast<size_t>(r) < budget) break;
      continue;
    }
    if (r == 0) {
      session.on_peer_closed();
      break;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return IoVerdict::kClose;  // ECONNRESET and friends
  }
  return write_ready(fd, session);
}

IoVerdict write_ready(int fd, StreamSession& session) {
  while (session.wants_write()) {
    std::string_view out = session.pending_output();
    long w = send_some(fd, out.data(), out.size());
    if (w > 0) {
      session.on_sent(static_cast<size_t>(w));
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return IoVerdict::kClose;
  }
  return session.finished() ? IoVerdict::kClose : IoVerdict::kOpen;
}

IoVerdict on_ready(int fd, uint32_t ready, StreamSession& session) {
  if (ready & kHangup) return IoVerdict::kClose;
  if (ready & kReadable) return read_ready(fd, session);
  if (ready & kWritable) return write_ready(fd, session);
  return IoVerdict::kOpen;
}

uint32_t interest_of(const StreamSession& session) {
  return (session.wants_read() ? kReadable : 0u) | (session.wants_write() ? kWritable : 0u);
}

IoVerdict serve_blocking_once(int fd, StreamSession& session, char* buffer, size_t buffer_bytes) {
  size_t budget = std::min(session.read_budget(), buffer_bytes);
  if (budget > 0) {
    long r = recv_some(fd, buffer, budget);
    if (r < 0) return IoVerdict::kClose;
    if (r == 0)
      session.on_peer_closed();
    else
      session.on_received(buffer, static_cast<size_t>(r));
  }
  while (session.wants_write()) {
    std::string_view out = session.pending_output();
    long w = send_some(fd, out.data(), out.size());
    if (w <= 0) return IoVerdict::kClose;
    session.on_sent(static_cast<size_t>(w));
  }
  return session.finished() ? IoVerdict::kClose : IoVerdict::kOpen;
}

}  // namespace tailscope::net
