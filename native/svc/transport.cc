#include "svc/transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "core/clock.h"
#include "core/latency_summary.h"
#include "net/http.h"
#include "net/traceparent.h"

namespace tailscope::svc {

nlohmann::json QueueWaitHistogram::to_json() const {
  std::lock_guard lock(mu_);
  return histogram_.total_count() ? latency_summary(histogram_) : nlohmann::json(nullptr);
}

nlohmann::json ServiceCounters::to_json() const {
  nlohmann::json out = {{"requests", requests.load()},
                        {"ok", ok.load()},
                        {"errors", errors.load()},
                        {"rejections", rejections.load()},
                        {"timeouts", timeouts.load()},
                        {"downstream_failures", downstream_failures.load()},
                        {"calls", calls.load()},
                        {"malformed_frames", malformed_frames.load()},
                        {"connections_accepted", connections_accepted.load()},
                        {"http_requests", http_requests.load()},
                        {"pings", pings.load()},
                        {"async_threads", async_threads.load()}};
  if (nlohmann::json wait = queue_wait.to_json(); !wait.is_null()) out["queue_wait"] = std::move(wait);
  return out;
}

int http_status_for(RpcStatus s) {
  switch (s) {
    case RpcStatus::kOk:
      return 200;
    case RpcStatus::kUnknownMethod:
      return 404;
    case RpcStatus::kBadRequest:
      return 400;
    case RpcStatus::kRejected:
      return 503;
    case RpcStatus::kTimeout:
      return 504;
    case RpcStatus::kUnavailable:
      return 502;
    case RpcStatus::kInternal:
      return 500;
  }
  return 500;
}

namespace {
const char* reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Error";
  }
}
}  // namespace

ServerConnection::ServerConnection(int fd, WireKind kind, const HttpRoute* route, ServiceCounters& counters,
                                   size_t max_frame_bytes)
    : fd_(fd), kind_(kind), route_(route), counters_(counters), frames_(max_frame_bytes) {}

ServerConnection::~ServerConnection() { ::close(fd_); }

void ServerConnection::close() {
  if (!closed_.exchange(true)) ::shutdown(fd_, SHUT_RDWR);
}

bool ServerConnection::parse_rpc(std::vector<InboundRequest>& out) {
  net::FrameView f;
  for (;;) {
    const auto r = frames_.next(f);
    if (r == FrameParser::Result::kNeedMore) return true;
    if (r == FrameParser::Result::kError || f.kind != FrameKind::kRequest) return false;
    if (f.method == kPingMethod) {  // answered here, by whichever thread reads: the transport alone
      counters_.pings.fetch_add(1, std::memory_order_relaxed);
      respond(f.request_id, RpcStatus::kOk, {});
      continue;
    }
    InboundRequest req;
    req.conn = shared_from_this();
    req.id = f.request_id;
    req.method.assign(f.method);
    req.trace = f.trace;
    req.payload.assign(f.payload);
    req.received_ns = monotonic_ns();
    out.push_back(std::move(req));
  }
}

bool ServerConnection::parse_http(std::vector<InboundRequest>& out) {
  size_t used = 0;
  while (used < http_in_.size()) {
    const net::HttpRequest r = net::parse_http_request(std::string_view(http_in_).substr(used));
    if (r.status == net::HttpRequest::Status::kIncomplete) break;
    if (r.status == net::HttpRequest::Status::kError) {
      // The shared parser's verdict (400, 413, 431, 501, 505) as a status
      // line, as the echo servers' HTTP mode answers: a client learns why.
      // Counted before the answer, which may close the connection at once.
      counters_.malformed_frames.fetch_add(1, std::memory_order_relaxed);
      answer_http_error(r.error_status);
      http_in_.clear();
      http_partial_since_ns_ = 0;
      return false;
    }
    used += r.consumed_bytes;
    const uint64_t seq = http_next_seq_++;
    if (!r.keep_alive) {
      std::lock_guard lock(write_mu_);
      http_close_after_ = std::min(http_close_after_, seq);
    }
    std::string_view path = r.target.substr(0, r.target.find('?'));
    const std::string* endpoint = route_ == nullptr ? nullptr : route_->endpoint_for(path);
    if (endpoint == nullptr || (r.method != "GET" && r.method != "POST")) {
      respond(seq, RpcStatus::kUnknownMethod, "");
      continue;
    }
    counters_.http_requests.fetch_add(1, std::memory_order_relaxed);
    InboundRequest req;
    req.conn = shared_from_this();
    req.id = seq;
    req.method = *endpoint;
    req.payload = std::string(r.body);
    req.from_http = true;
    net::TraceParent parent;
    if (!r.traceparent.empty() && net::parse_traceparent(r.traceparent, &parent)) {
      req.trace = {parent.trace_id_high, parent.trace_id_low, parent.parent_id, parent.sampled};
      req.trace_from_header = true;
    }
    req.received_ns = monotonic_ns();
    out.push_back(std::move(req));
    if (!r.keep_alive) break;
  }
  http_in_.erase(0, used);
  // The request-read clock starts with a request's first byte.
  if (http_in_.empty())
    http_partial_since_ns_ = 0;
  else if (used > 0 || http_partial_since_ns_ == 0)
    http_partial_since_ns_ = monotonic_ns();
  return true;
}

bool ServerConnection::expire_request(int64_t now_ns, int64_t timeout_ns) {
  if (kind_ != WireKind::kHttp || http_partial_since_ns_ == 0 || now_ns - http_partial_since_ns_ < timeout_ns)
    return false;
  counters_.malformed_frames.fetch_add(1, std::memory_order_relaxed);
  answer_http_error(408);
  http_in_.clear();
  http_partial_since_ns_ = 0;
  return true;
}

void ServerConnection::answer_http_error(int status) {
  const uint64_t seq = http_next_seq_++;
  std::string text;
  net::append_http_error_response(status, text);
  std::lock_guard lock(write_mu_);
  http_close_after_ = std::min(http_close_after_, seq);
  hold_and_flush_locked(seq, std::move(text));
}

void ServerConnection::send_locked(std::string_view bytes) {
  size_t off = 0;
  const int64_t give_up = monotonic_ns() + 2'000'000'000;
  while (off < bytes.size() && !closed()) {
    const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && monotonic_ns() < give_up) {
      // The peer is slow to read: wait for room, bounded, so a stuck client cannot hold a worker forever.
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    close();
    return;
  }
}

void ServerConnection::respond(uint64_t id, RpcStatus status, std::string_view payload) {
  if (closed()) return;
  if (kind_ == WireKind::kRpc) {
    // Encoded into a buffer each thread reuses: no allocation per response.
    thread_local std::string bytes;
    bytes.clear();
    net::FrameView f{FrameKind::kResponse, id, status, {}, {}, payload};
    try {
      append_frame(f, bytes);
    } catch (const std::invalid_argument&) {
      f.payload = {};
      f.status = RpcStatus::kInternal;
      bytes.clear();
      append_frame(f, bytes);
    }
    std::lock_guard lock(write_mu_);
    if (delayed_) {
      const int64_t deadline = delayed_->hold(bytes, monotonic_ns());
      // Weak: a connection closed meanwhile is gone, and so are its held answers.
      timers_->schedule(deadline, [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->release_delayed();
      });
      return;
    }
    send_locked(bytes);
    return;
  }
  const int code = http_status_for(status);
  std::string body = code == 200 ? std::string(payload) : std::string(status_name(status)) + "\n";
  std::string text = "HTTP/1.1 " + std::to_string(code) + " " + reason(code) +
                     "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  std::lock_guard lock(write_mu_);
  if (id >= http_close_after_) text += "Connection: close\r\n";
  text += "\r\n";
  text += body;
  hold_and_flush_locked(id, std::move(text));
}

void ServerConnection::set_link_delay(LinkDelay delay, TimerService& timers) {
  if (kind_ != WireKind::kRpc || delay.zero()) return;
  std::lock_guard lock(write_mu_);
  delayed_ = std::make_unique<DelayedFrames>(delay);
  timers_ = &timers;
}

void ServerConnection::release_delayed() {
  thread_local std::string due;  // the timer thread's, reused
  due.clear();
  std::lock_guard lock(write_mu_);
  if (delayed_->release_due(monotonic_ns(), due) > 0 && !closed()) send_locked(due);
}

void ServerConnection::hold_and_flush_locked(uint64_t seq, std::string text) {
  http_held_.emplace(seq, std::move(text));
  while (!http_held_.empty() && http_held_.begin()->first == http_next_out_) {
    send_locked(http_held_.begin()->second);
    http_held_.erase(http_held_.begin());
    if (http_next_out_ == http_close_after_) {
      close();
      return;
    }
    ++http_next_out_;
  }
}

}  // namespace tailscope::svc
