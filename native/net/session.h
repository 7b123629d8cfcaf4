// What a server does with the bytes of one connection, independent of how
// the bytes are moved (the concurrency model): RFC 862 echo or HTTP/1.1.
//
// Memory per connection is bounded: the session stops accepting input
// (read_budget() == 0) while max_pending_output_bytes wait to be sent, so a
// client that sends but never reads costs at most that much, and the model
// stops reading from it (TCP flow control then pushes back on the client).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/http.h"

namespace tailscope::net {

enum class WireProtocol { kEcho, kHttp };

// "echo" / "http"; throws std::invalid_argument naming the text otherwise.
WireProtocol parse_wire_protocol(std::string_view text);
std::string_view to_string(WireProtocol p);

struct SessionLimits {
  size_t max_pending_output_bytes = 64 * 1024;
  HttpLimits http;
};

class StreamSession {
 public:
  explicit StreamSession(WireProtocol protocol, SessionLimits limits = {});

  // Bytes the session will take now; 0 means "stop reading until output drains".
  size_t read_budget() const;
  // Takes bytes received from the peer (n <= read_budget()).
  void on_received(const char* data, size_t n);
  // The peer half-closed: echo what is pending, then close.
  void on_peer_closed() { close_after_flush_ = true; }

  std::string_view pending_output() const { return std::string_view(out_).substr(out_head_); }
  void on_sent(size_t n);

  // True once everything owed to the peer is sent and the session is over
  // (HTTP error or Connection: close, or the peer half-closed).
  bool finished() const { return close_after_flush_ && pending_output().empty(); }
  bool wants_write() const { return !pending_output().empty(); }
  bool wants_read() const { return !close_after_flush_ && read_budget() > 0; }

 private:
  void process_http();
  size_t pending_bytes() const { return out_.size() - out_head_; }

  WireProtocol protocol_;
  SessionLimits limits_;
  std::string in_;  // HTTP only: bytes of requests not yet answered
  std::string out_;
  size_t out_head_ = 0;
  bool close_after_flush_ = false;
};

// Readiness-based I/O on a non-blocking socket (the epoll/poll models): reads
// while the session takes bytes, then writes what it can.
enum class IoVerdict { kOpen, kClose };
IoVerdict read_ready(int fd, StreamSession& session);
IoVerdict write_ready(int fd, StreamSession& session);
// One readiness event (net/poller.h bits) → read, write or close, written
// once for every readiness-based model: kHangup closes; kReadable reads (and
// writes what that produced); kWritable writes.
IoVerdict on_ready(int fd, uint32_t ready, StreamSession& session);
// The poller interest that follows the session: readable while it takes
// input, writable while output is pending.
uint32_t interest_of(const StreamSession& session);

// Blocking I/O on a blocking socket (thread-per-connection): one read, the
// whole response written. kClose on EOF, error or a finished session.
IoVerdict serve_blocking_once(int fd, StreamSession& session, char* buffer, size_t buffer_bytes);

}  // namespace tailscope::net
