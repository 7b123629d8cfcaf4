#include "svc/stores/memcached_client.h"

#include <libmemcached/memcached.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>

#include "core/clock.h"
#include "net/socket.h"
#include "svc/stores/reconnect_backoff.h"

namespace tailscope::svc::stores {
namespace {

class LibmemcachedConnection final : public BlockingStoreConnection {
 public:
  LibmemcachedConnection(const StoreAddress& address, int64_t timeout_ns) : mc_(memcached_create(nullptr)) {
    const uint64_t timeout_ms = std::max<int64_t>(1, timeout_ns / 1'000'000);
    // Every wait libmemcached makes is bounded: connect, poll, and the socket send/receive timeouts (µs).
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, timeout_ms);
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, timeout_ms);
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_SND_TIMEOUT, timeout_ms * 1000);
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_RCV_TIMEOUT, timeout_ms * 1000);
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    // A dead server is not retried behind the caller's back: the call fails and the pool reconnects.
    memcached_behavior_set(mc_, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
    memcached_server_add(mc_, address.host.c_str(), static_cast<in_port_t>(address.port));
  }
  ~LibmemcachedConnection() override { memcached_free(mc_); }

  StoreResult run(const StoreRequest& r) override {
    memcached_return_t rc = MEMCACHED_FAILURE;
    if (r.op == StoreVerb::kGet) {
      size_t length = 0;
      uint32_t flags = 0;
      char* value = memcached_get(mc_, r.key.data(), r.key.size(), &length, &flags, &rc);
      free(value);  // libmemcached allocates with malloc
      if (rc == MEMCACHED_NOTFOUND) return {StoreStatus::kMiss, {}};
    } else if (r.op == StoreVerb::kSet) {
      const std::string value = store_payload(r.value_bytes);
      rc = memcached_set(mc_, r.key.data(), r.key.size(), value.data(), value.size(), 0, 0);
    } else {
      return {StoreStatus::kUnavailable, std::string("memcached has no op ") + store_verb_name(r.op)};
    }
    if (rc == MEMCACHED_SUCCESS) return {StoreStatus::kOk, {}};
    broken_ = true;
    return {StoreStatus::kUnavailable, memcached_strerror(mc_, rc)};
  }
  bool broken() const override { return broken_; }

 private:
  memcached_st* mc_;
  bool broken_ = false;
};

}  // namespace

MemcachedReply parse_memcached_reply(StoreVerb op, std::string_view in, size_t* consumed) {
  *consumed = 0;
  const size_t eol = in.find("\r\n");
  if (eol == std::string_view::npos)
    return in.size() > kMemcachedMaxLineBytes ? MemcachedReply{MemcachedReply::kProtocolError, "reply line too long"}
                                              : MemcachedReply{MemcachedReply::kIncomplete, {}};
  const std::string_view line = in.substr(0, eol);
  auto done = [&](MemcachedReply::Kind k, std::string why, size_t n) {
    *consumed = n;
    return MemcachedReply{k, std::move(why)};
  };
  if (line.starts_with(
          "SERVER_ERROR"))  // the server's own failure (out of memory, too large): the stream stays in step
    return done(MemcachedReply::kServerError, std::string(line), eol + 2);
  if (op == StoreVerb::kSet) {
    if (line == "STORED") return done(MemcachedReply::kOk, {}, eol + 2);
  } else if (op == StoreVerb::kGet) {
    if (line == "END") return done(MemcachedReply::kMiss, {}, eol + 2);
    if (line.starts_with("VALUE ")) {
      // VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n
      const size_t sp = line.rfind(' ');
      size_t bytes = 0;
      for (char ch : line.substr(sp + 1)) {
        if (ch < '0' || ch > '9' || bytes > kMemcachedMaxValueBytes)
          return {MemcachedReply::kProtocolError, "bad VALUE line"};
        bytes = bytes * 10 + static_cast<size_t>(ch - '0');
      }
      if (bytes > kMemcachedMaxValueBytes) return {MemcachedReply::kProtocolError, "value larger than 1 MiB"};
      static constexpr std::string_view kTail = "\r\nEND\r\n";
      const size_t total = eol + 2 + bytes + kTail.size();
      if (in.size() < total) return {MemcachedReply::kIncomplete, {}};
      if (in.substr(eol + 2 + bytes, kTail.size()) != kTail)
        return {MemcachedReply::kProtocolError, "VALUE not followed by END"};
      return done(MemcachedReply::kOk, {}, total);
    }
  }
  // ERROR, CLIENT_ERROR or anything unexpected: the stream can no longer be trusted.
  return {MemcachedReply::kProtocolError, std::string(line.substr(0, 120))};
}

namespace {

// memcached's text protocol as a non-blocking state machine on the loop:
// requests are appended to one output buffer and sent at the end of the
// loop's iteration (pipelined: several ops, one send), replies parsed in
// order from one input buffer. libmemcached's own non-blocking mode cannot
// be driven from an outside poller, hence our own client; it speaks only
// what the topologies use (get, set).
class MemcachedTextClient final : public AsyncStoreClient {
 public:
  MemcachedTextClient(const StoreAddress& address, LoopRegistration& reg) : address_(address), reg_(reg) {}
  ~MemcachedTextClient() override { close("store client closed"); }

  void run(const StoreRequest& r, int64_t deadline_ns, StoreDone done) override {
    if (r.op != StoreVerb::kGet && r.op != StoreVerb::kSet)
      return done(unavailable(std::string("memcached has no op ") + store_verb_name(r.op)));
    if (state_ == State::kClosed && !connect(monotonic_ns())) return done(unavailable(connect_error_));
    if (r.op == StoreVerb::kGet) {
      out_ += "get " + r.key + "\r\n";
    } else {
      out_ += "set " + r.key + " 0 0 " + std::to_string(r.value_bytes) + "\r\n";
      out_ += store_payload(r.value_bytes);
      out_ += "\r\n";
    }
    in_flight_.push_back(Op{r.op, deadline_ns, std::move(done)});
  }

  void on_ready(size_t, uint32_t ready) override {
    if (state_ == State::kConnecting) {
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(reg_.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) {
        const std::string why = std::string("connect: ") + std::strerror(err);
        backoff_.failed(monotonic_ns(), why);
        return fail_all(why);
      }
      if (!(ready & net::kWritable)) return;
      state_ = State::kOpen;
      backoff_.connected();
    }
    if (state_ != State::kOpen) return;
    if (ready & (net::kReadable | net::kHangup)) read_some();
    if (state_ == State::kOpen && (ready & net::kWritable)) send_some();
  }

  int64_t service(int64_t now_ns) override {
    if (!in_flight_.empty() && in_flight_.front().deadline_ns <= now_ns) {
      if (state_ == State::kConnecting) {
        backoff_.failed(now_ns, "connect timed out");
        fail_all("connect timed out");
      } else {
        fail_all("no answer within the store timeout");  // the answers after it would be out of step
      }
    }
    if (state_ == State::kOpen) send_some();
    return in_flight_.empty() ? INT64_MAX : in_flight_.front().deadline_ns;
  }

  void close(const std::string& why) override {
    if (state_ != State::kClosed || !in_flight_.empty()) fail_all(why);
  }

 private:
  enum class State { kClosed, kConnecting, kOpen };
  struct Op {
    StoreVerb verb;
    int64_t deadline_ns;
    StoreDone done;
  };

  bool connect(int64_t now_ns) {
    if (!backoff_.may_connect(now_ns)) {
      connect_error_ = backoff_.backing_off();
      return false;
    }
    int fd = -1;
    try {
      fd = net::start_connect(address_.host, address_.port);
    } catch (const std::exception&) {  // an address the resolver refuses
      errno = EINVAL;
    }
    if (fd < 0) {
      connect_error_ = std::string("connect: ") + std::strerror(errno);
      backoff_.failed(now_ns, connect_error_);
      return false;
    }
    reg_.attach(fd, net::kWritable);  // writable: the connect finished (or failed: SO_ERROR says)
    state_ = State::kConnecting;
    return true;
  }

  void send_some() {
    while (sent_ < out_.size()) {
      const long n = net::send_some(reg_.fd(), out_.data() + sent_, out_.size() - sent_);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) return fail_all(std::string("send: ") + std::strerror(errno));
      sent_ += static_cast<size_t>(n);
    }
    if (sent_ == out_.size()) {
      out_.clear();
      sent_ = 0;
    }
    reg_.want(net::kReadable | (out_.empty() ? 0u : net::kWritable));
  }

  void read_some() {
    char buf[64 * 1024];
    for (int reads = 0; reads < 16; ++reads) {  // fairness: the loop has other sockets
      const long n = net::recv_some(reg_.fd(), buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n == 0) return fail_all("memcached closed the connection");
      if (n < 0) return fail_all(std::string("recv: ") + std::strerror(errno));
      in_.append(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < sizeof buf) break;
    }
    size_t pos = 0;
    while (pos < in_.size()) {
      if (in_flight_.empty()) return fail_all("memcached answered a request never sent");
      size_t used = 0;
      const MemcachedReply reply =
          parse_memcached_reply(in_flight_.front().verb, std::string_view(in_).substr(pos), &used);
      if (reply.kind == MemcachedReply::kIncomplete) break;
      if (reply.kind == MemcachedReply::kProtocolError) return fail_all("memcached protocol error: " + reply.error);
      pos += used;
      Op op = std::move(in_flight_.front());
      in_flight_.pop_front();
      op.done(reply.kind == MemcachedReply::kOk     ? StoreResult{StoreStatus::kOk, {}}
              : reply.kind == MemcachedReply::kMiss ? StoreResult{StoreStatus::kMiss, {}}
                                                    : unavailable(reply.error));
    }
    in_.erase(0, pos);
  }

  // Closes the connection and fails every op queued or in flight (their answers would be out of step).
  void fail_all(const std::string& why) {
    if (reg_.fd() >= 0) {
      const int fd = reg_.fd();
      reg_.detach();
      ::close(fd);
    }
    state_ = State::kClosed;
    out_.clear();
    in_.clear();
    sent_ = 0;
    std::deque<Op> failed;
    failed.swap(in_flight_);
    for (Op& op : failed) op.done(unavailable(why));
  }

  StoreAddress address_;
  LoopRegistration& reg_;
  State state_ = State::kClosed;
  std::string out_, in_;
  size_t sent_ = 0;
  std::deque<Op> in_flight_;  // in the order sent: memcached answers in order
  ReconnectBackoff backoff_{"memcached"};
  std::string connect_error_;  // why connect() returned false
};

}  // namespace

std::unique_ptr<BlockingStoreConnection> connect_memcached_blocking(const StoreAddress& address, int64_t timeout_ns) {
  return std::make_unique<LibmemcachedConnection>(address, timeout_ns);
}

std::unique_ptr<AsyncStoreClient> make_memcached_async(const StoreAddress& address, LoopRegistration& reg) {
  return std::make_unique<MemcachedTextClient>(address, reg);
}

}  // namespace tailscope::svc::stores
