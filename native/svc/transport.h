// The server side of the transport, shared by every concurrency model: a
// connection speaks either RPC frames (frame.h) or, at the graph's front,
// HTTP/1.1 (keep-alive); both become InboundRequests, and a response goes
// back through ServerConnection::respond from whichever thread finished the
// request. Only *who* reads connections and runs handlers differs between
// models (server.h offers the two shapes: thread per connection, event loops).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/hdr_histogram.h"
#include "net/frame.h"
#include "svc/link_delay.h"
#include "svc/timer_service.h"

namespace tailscope::svc {

// The runtime speaks the RPC frame of net/frame.h (the load generator speaks
// it too, which is why the codec lives in net/); its names are svc's vocabulary.
using net::append_frame;
using net::Frame;
using net::FrameKind;
using net::FrameParser;
using net::kDefaultMaxFrameBytes;
using net::RpcStatus;
using net::status_name;
using net::TraceContext;

// The pool models' queue wait: from a request's parse (InboundRequest::received_ns)
// to a pool thread picking it up — the "limbo" in which a request waits for a
// pool whose threads are all blocked (docs/collapse-study.md). Pool threads
// record concurrently, hence the lock; models without a queue record nothing
// and the document then has no `queue_wait`.
class QueueWaitHistogram {
 public:
  void record(int64_t wait_ns) {
    std::lock_guard lock(mu_);
    histogram_.record(wait_ns < 0 ? 0 : wait_ns);
  }
  nlohmann::json to_json() const;  // latency_summary, or null when nothing was recorded
 private:
  mutable std::mutex mu_;
  HdrHistogram histogram_ = HdrHistogram::for_latency_ns();
};
// Every service answers this method at once, on the thread that read it, with
// kOk and an empty payload: no endpoint, no stages, no model. What a call of
// it costs is the transport alone (docs/protocol.md; the transport benchmark
// and the socialnet study's in-run baseline use it).
inline constexpr std::string_view kPingMethod = "__ping";

// Per-service counters, all monotonic, read at shutdown for the result document.
struct ServiceCounters {
  std::atomic<int64_t> requests{0};             // requests received (parsed)
  std::atomic<int64_t> ok{0};                   // answered kOk
  std::atomic<int64_t> errors{0};               // answered with any other status
  std::atomic<int64_t> rejections{0};           // refused by a full queue (answered kRejected)
  std::atomic<int64_t> timeouts{0};             // downstream calls that timed out
  std::atomic<int64_t> downstream_failures{0};  // downstream calls answered non-ok or unavailable
  std::atomic<int64_t> calls{0};                // downstream calls made
  std::atomic<int64_t> malformed_frames{0};     // connections closed for a malformed frame or HTTP request
  std::atomic<int64_t> connections_accepted{0};
  std::atomic<int64_t> http_requests{0};
  QueueWaitHistogram queue_wait;          // pool models only
  std::atomic<int64_t> pings{0};          // kPingMethod requests answered (not in `requests`)
  std::atomic<int64_t> async_threads{0};  // threads started for async calls (std-async, std-thread)
  nlohmann::json to_json() const;
};

enum class WireKind { kRpc, kHttp };

struct HttpRoute {
  std::string path;      // e.g. /wrk2-api/post/compose (query string ignored)
  std::string endpoint;  // the endpoint it runs
  // Further path → endpoint pairs (topology front.routes), looked up after `path`.
  std::vector<std::pair<std::string, std::string>> more;
  // The endpoint `request_path` runs, or nullptr (404).
  const std::string* endpoint_for(std::string_view request_path) const {
    if (request_path == path) return &endpoint;
    for (const auto& [p, e] : more)
      if (request_path == p) return &e;
    return nullptr;
  }
};

class ServerConnection;

struct InboundRequest {
  std::shared_ptr<ServerConnection> conn;
  uint64_t id = 0;     // RPC request id, or the HTTP request's sequence number on its connection
  std::string method;  // endpoint name
  // HTTP requests: all zero — the front starts the trace — unless a valid W3C
  // traceparent came with it; then its trace id and parent id (continued).
  TraceContext trace;
  bool trace_from_header = false;
  std::string payload;
  bool from_http = false;
  int64_t received_ns = 0;
};

class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  ServerConnection(int fd, WireKind kind, const HttpRoute* route, ServiceCounters& counters,
                   size_t max_frame_bytes = kDefaultMaxFrameBytes);
  ~ServerConnection();  // closes the fd: only when nobody can still answer on it
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  int fd() const { return fd_; }
  // Read side (one thread at a time): parses what arrived; each complete
  // request goes to `sink`. Returns false when the input was malformed (it is
  // counted here): the caller stops reading. The connection ends itself — a
  // bad RPC frame closes it at once (no answer is possible); a bad HTTP
  // request is answered with its 4xx/5xx status line after the responses
  // owed before it, and the connection closes once that is sent.
  template <class Sink>
  bool on_bytes(const char* data, size_t n, Sink&& sink);

  // Read side, HTTP: the monotonic time since which a request has been only
  // partly received (0: none pending). A client that trickles a request
  // (slowloris) must not hold a connection forever: see expire_request().
  int64_t partial_request_since_ns() const { return http_partial_since_ns_; }
  // Read side: when a request has been partly received for timeout_ns or
  // more at now_ns, answers 408 (after the responses owed before it), counts
  // it as malformed and returns true: the caller stops reading.
  bool expire_request(int64_t now_ns, int64_t timeout_ns);

  // Any thread. HTTP responses leave in request order (keep-alive clients
  // match responses by order); RPC responses leave as they finish.
  void respond(uint64_t id, RpcStatus status, std::string_view payload);
  // Stops both directions; the fd stays open until the last reference goes.
  void close();
  // The link-delay shim (svc/link_delay.h), RPC connections only: from now
  // on each response frame is held until its deadline and then sent by the
  // process's TimerService thread (a callback per held frame that sends what
  // is due), so no handler thread waits. Call before the first request is read.
  void set_link_delay(LinkDelay delay, TimerService& timers);
  bool closed() const { return closed_.load(std::memory_order_acquire); }

 private:
  bool parse_rpc(std::vector<InboundRequest>& out);
  bool parse_http(std::vector<InboundRequest>& out);
  // Answers the next request slot with an HTTP error and ends the connection after it.
  void answer_http_error(int status);
  // Holds the response for request `seq` and sends every response now due, in order.
  void hold_and_flush_locked(uint64_t seq, std::string text);
  void send_locked(std::string_view bytes);
  // The timer's side of the shim: sends every held frame now due.
  void release_delayed();

  int fd_;
  WireKind kind_;
  const HttpRoute* route_;
  ServiceCounters& counters_;
  FrameParser frames_;
  std::string http_in_;
  uint64_t http_next_seq_ = 0;         // read side
  int64_t http_partial_since_ns_ = 0;  // read side
  std::mutex write_mu_;
  uint64_t http_next_out_ = 0;                 // guarded by write_mu_
  std::map<uint64_t, std::string> http_held_;  // finished out of order
  uint64_t http_close_after_ = UINT64_MAX;     // a request without keep-alive ends the connection
  std::unique_ptr<DelayedFrames> delayed_;     // the shim; null: zero delay. Guarded by write_mu_
  TimerService* timers_ = nullptr;
  std::atomic<bool> closed_{false};
};

template <class Sink>
bool ServerConnection::on_bytes(const char* data, size_t n, Sink&& sink) {
  std::vector<InboundRequest> out;
  bool ok;
  if (kind_ == WireKind::kRpc) {
    frames_.feed(data, n);
    ok = parse_rpc(out);
  } else {
    http_in_.append(data, n);
    ok = parse_http(out);
  }
  for (auto& r : out) sink(std::move(r));
  if (!ok && kind_ == WireKind::kRpc) {  // (HTTP counts before it answers: parse_http)
    counters_.malformed_frames.fetch_add(1, std::memory_order_relaxed);
    close();
  }
  return ok;
}

// HTTP status a front answers for an RPC status (5xx whenever the graph failed).
int http_status_for(RpcStatus s);

// How long the HTTP front waits for the rest of a partly received request
// before it answers 408 and closes (a connection idle between requests is
// not timed: keep-alive clients of an open-loop run may pause for long).
inline constexpr int64_t kDefaultHttpRequestTimeoutNs = 10'000'000'000;

}  // namespace tailscope::svc
