#include "svc/otlp_exporter.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "core/clock.h"
#include "core/thread_name.h"
#include "net/allow_list.h"
#include "net/http.h"
#include "net/socket.h"
#include "trace/trace.h"
#include "trace/trace_writer.h"

namespace tailscope::svc {
namespace {

std::string hex16(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

trace::SpanKind kind_of(SpanRole role) {
  switch (role) {
    case SpanRole::kServer:
      return trace::SpanKind::kServer;
    case SpanRole::kClient:
      return trace::SpanKind::kClient;
    case SpanRole::kInternal:
      break;
  }
  return trace::SpanKind::kInternal;
}

// Waits until fd is ready for `events` or the deadline passes.
bool wait_ready(int fd, short events, int64_t deadline_ns) {
  for (;;) {
    const int64_t left_ns = deadline_ns - monotonic_ns();
    if (left_ns <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left_ns / 1'000'000)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

// The batch as OTLP JSON: spans grouped into their traces (the writer's unit).
std::string otlp_body(const std::vector<SpanRecord>& batch) {
  trace::NameTable names;
  std::map<std::pair<uint64_t, uint64_t>, trace::Trace> by_id;
  for (const auto& s : batch) {
    trace::Trace& t = by_id[{s.trace_id_high, s.trace_id_low}];
    if (t.trace_id.empty()) t.trace_id = hex16(s.trace_id_high) + hex16(s.trace_id_low);
    trace::Span sp;
    sp.span_id = t.store(hex16(s.span_id));
    if (s.parent_span_id) {
      sp.parent_span_id = t.store(hex16(s.parent_span_id));
      sp.parent_ref = trace::RefType::kChildOf;
    }
    sp.kind = kind_of(s.role);
    sp.error = s.error;
    sp.service = names.intern(s.service ? *s.service : "unknown_service");
    sp.operation = names.intern(s.operation ? *s.operation : "unknown");
    sp.start_ns = Tracer::to_unix_ns(s.start_ns);
    sp.duration_ns = s.end_ns - s.start_ns;
    sp.cache = s.cache;
    if (s.has_probe && s.probe.complete()) {
      sp.probe_scheduling_delay_ns = s.probe.scheduling_delay_ns();
      sp.probe_join_delay_ns = s.probe.join_delay_ns();
    }
    t.spans.push_back(sp);
  }
  std::vector<trace::Trace> traces;
  traces.reserve(by_id.size());
  for (auto& [_, t] : by_id) traces.push_back(std::move(t));
  return trace::otlp_json_document(traces, names);
}

}  // namespace

OtlpEndpoint parse_otlp_endpoint(const std::string& url, const std::string& flag, const net::NameLookup& lookup) {
  const std::string scheme = "http://";
  auto fail = [&](const std::string& why) { return std::invalid_argument(flag + " '" + url + "': " + why); };
  if (!url.starts_with(scheme)) throw fail("expected http://HOST:PORT (OTLP/HTTP; https is not supported)");
  OtlpEndpoint e;
  e.url = url;
  std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    e.path = rest.substr(slash);
    rest = rest.substr(0, slash);
    if (e.path == "/") e.path = "/v1/traces";
  }
  const size_t colon = rest.rfind(':');
  e.host = rest.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    int value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535)
      throw fail("the port must be an integer in 1 … 65535");
    e.port = value;
  }
  if (e.host == "localhost") e.host = "127.0.0.1";
  if (e.host.empty()) throw fail("no host");
  try {
    const net::ResolvedTarget resolved = net::resolve_allowed_target(e.host, "the host", lookup);
    e.address = resolved.address;
    e.rule = resolved.rule;
  } catch (const std::invalid_argument& error) {
    throw fail(error.what());
  }
  for (char c : e.path)
    if (c <= ' ' || c == 0x7f) throw fail("the path contains a space or control character");
  return e;
}

OtlpExporter::OtlpExporter(OtlpEndpoint endpoint, OtlpExporterOptions options)
    : endpoint_(std::move(endpoint)), options_(options) {
  const size_t capacity = std::bit_ceil(std::max<size_t>(options_.queue_capacity_spans, 2));
  slots_ = std::make_unique<Slot[]>(capacity);
  for (size_t i = 0; i < capacity; ++i) slots_[i].sequence.store(i, std::memory_order_relaxed);
  mask_ = capacity - 1;
  options_.max_batch_spans = std::max<size_t>(options_.max_batch_spans, 1);
  options_.max_attempts = std::max(options_.max_attempts, 1);
}

OtlpExporter::~OtlpExporter() { stop(); }

void OtlpExporter::offer(const SpanRecord& span) noexcept {
  // No "offered" counter: it would be one more read-modify-write on a shared
  // cache line per span; offered = enqueued (enqueue_pos_) + dropped when full.
  size_t pos = enqueue_pos_.load(std::memory_order_relaxed);
  for (;;) {
    Slot& slot = slots_[pos & mask_];
    const size_t seq = slot.sequence.load(std::memory_order_acquire);
    const auto diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
    if (diff == 0) {
      if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        slot.span = span;
        slot.sequence.store(pos + 1, std::memory_order_release);
        return;
      }
    } else if (diff < 0) {
      dropped_queue_full_.fetch_add(1, std::memory_order_relaxed);  // full: drop, never wait
      return;
    } else {
      pos = enqueue_pos_.load(std::memory_order_relaxed);
    }
  }
}

bool OtlpExporter::try_pop(SpanRecord* out) {
  size_t pos = dequeue_pos_.load(std::memory_order_relaxed);
  for (;;) {
    Slot& slot = slots_[pos & mask_];
    const size_t seq = slot.sequence.load(std::memory_order_acquire);
    const auto diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos + 1);
    if (diff == 0) {
      if (dequeue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        *out = slot.span;
        slot.sequence.store(pos + mask_ + 1, std::memory_order_release);
        return true;
      }
    } else if (diff < 0) {
      return false;
    } else {
      pos = dequeue_pos_.load(std::memory_order_relaxed);
    }
  }
}

void OtlpExporter::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    name_this_thread("svc-otlp");
    run();
  });
}

void OtlpExporter::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      if (!thread_.joinable()) return;
    } else {
      stopping_ = true;
      stop_deadline_ns_ = monotonic_ns() + options_.shutdown_grace_ns;
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Whatever is still queued (no thread ran, or the grace ran out) is dropped, and counted.
  SpanRecord s;
  while (try_pop(&s)) dropped_shutdown_.fetch_add(1, std::memory_order_relaxed);
}

void OtlpExporter::run() {
  std::vector<SpanRecord> batch;
  batch.reserve(options_.max_batch_spans);
  int64_t batch_started_ns = 0;
  for (;;) {
    SpanRecord s;
    while (batch.size() < options_.max_batch_spans && try_pop(&s)) {
      if (batch.empty()) batch_started_ns = monotonic_ns();
      batch.push_back(s);
    }
    bool stopping = false;
    int64_t deadline = 0;
    {
      std::lock_guard lock(mu_);
      stopping = stopping_;
      deadline = stop_deadline_ns_;
    }
    if (stopping && monotonic_ns() >= deadline) {
      dropped_shutdown_.fetch_add(static_cast<int64_t>(batch.size()), std::memory_order_relaxed);
      return;
    }
    const bool due = !batch.empty() && (batch.size() >= options_.max_batch_spans || stopping ||
                                        monotonic_ns() - batch_started_ns >= options_.flush_interval_ns);
    if (due) {
      send_batch(batch);
      batch.clear();
      continue;
    }
    if (stopping && batch.empty()) return;  // queue drained
    // Poll the queue every few ms: producers never signal (that would cost them a syscall).
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(5), [this] { return stopping_; });
  }
}

bool OtlpExporter::send_batch(const std::vector<SpanRecord>& batch) {
  const std::string body = otlp_body(batch);
  int64_t backoff_ns = options_.retry_backoff_ns;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    {
      std::lock_guard lock(mu_);
      if (stopping_ && monotonic_ns() >= stop_deadline_ns_) {
        // The shutdown grace is over: this batch is a shutdown loss, not an export failure.
        dropped_shutdown_.fetch_add(static_cast<int64_t>(batch.size()), std::memory_order_relaxed);
        return false;
      }
    }
    std::string error;
    const int status = post_once(body, &error);
    {
      std::lock_guard lock(mu_);
      if (status > 0) ++http_statuses_[status];
      if (status >= 200 && status < 300) {
        exported_.fetch_add(static_cast<int64_t>(batch.size()), std::memory_order_relaxed);
        batches_ok_.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
      last_error_ = status > 0 ? "HTTP " + std::to_string(status) : error;
    }
    attempts_failed_.fetch_add(1, std::memory_order_relaxed);
    // A 4xx other than 429 says the request itself is wrong: sending it again cannot help.
    if (status >= 400 && status < 500 && status != 429) break;
    if (attempt == options_.max_attempts) break;
    std::unique_lock lock(mu_);
    const int64_t wake = monotonic_ns() + backoff_ns;
    if (stopping_ && wake > stop_deadline_ns_) break;  // no retry fits in the shutdown grace
    cv_.wait_for(lock, std::chrono::nanoseconds(backoff_ns));
    backoff_ns *= 2;
  }
  batches_failed_.fetch_add(1, std::memory_order_relaxed);
  dropped_export_failed_.fetch_add(static_cast<int64_t>(batch.size()), std::memory_order_relaxed);
  return false;
}

int OtlpExporter::post_once(const std::string& body, std::string* error) {
  // While stopping, no exchange outlives the shutdown grace: the process must exit in bounded time.
  int64_t cap_ns = std::numeric_limits<int64_t>::max();
  {
    std::lock_guard lock(mu_);
    if (stopping_) cap_ns = stop_deadline_ns_;
  }
  const int64_t connect_deadline = std::min(cap_ns, monotonic_ns() + options_.io_timeout_ns);
  // A name is looked up again for every POST (a collector restarted elsewhere is found); one that
  // stops resolving, or now resolves outside the policy, fails this attempt — never a connect to it.
  std::string address = endpoint_.address;
  if (!net::is_numeric_address(endpoint_.host)) {
    try {
      address = net::resolve_allowed_target(endpoint_.host, "the host").address;
    } catch (const std::invalid_argument& e) {
      *error = "connect to " + endpoint_.url + ": " + e.what();
      return -1;
    }
  }
  const int fd = net::start_connect(address, endpoint_.port);
  if (fd < 0) {
    *error = "connect to " + endpoint_.url + ": " + std::strerror(errno);
    return -1;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (!wait_ready(fd, POLLOUT, connect_deadline)) {
    *error = "connect to " + endpoint_.url + ": no answer within the timeout";
    return -1;
  }
  int so_error = 0;
  socklen_t len = sizeof so_error;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
  if (so_error != 0) {
    *error = "connect to " + endpoint_.url + ": " + std::strerror(so_error);
    return -1;
  }
  const int64_t deadline = std::min(cap_ns, monotonic_ns() + options_.io_timeout_ns);
  std::string request =
      "POST " + endpoint_.path + " HTTP/1.1\r\nHost: " + endpoint_.host + ":" + std::to_string(endpoint_.port) +
      "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n";
  request += body;
  size_t sent = 0;
  while (sent < request.size()) {
    if (!wait_ready(fd, POLLOUT, deadline)) {
      *error = "sending to " + endpoint_.url + ": stalled past the timeout";
      return -1;
    }
    const long n = net::send_some(fd, request.data() + sent, request.size() - sent);
    if (n < 0 && errno != EAGAIN) {
      *error = "sending to " + endpoint_.url + ": " + std::strerror(errno);
      return -1;
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  net::HttpResponseReader reader(net::HttpLimits{8192, 1 << 20});
  char buf[4096];
  for (;;) {
    if (!wait_ready(fd, POLLIN, deadline)) {
      *error = "waiting for " + endpoint_.url + ": no response within the timeout";
      return -1;
    }
    const long n = net::recv_some(fd, buf, sizeof buf);
    if (n < 0 && errno == EAGAIN) continue;
    if (n <= 0) {
      if (reader.status() > 0) return reader.status();  // a body cut by Connection: close
      *error = "reading from " + endpoint_.url + ": connection closed before a response";
      return -1;
    }
    size_t used = 0;
    const auto event = reader.feed(std::string_view(buf, static_cast<size_t>(n)), &used);
    if (event == net::HttpResponseReader::Event::kResponse) return reader.status();
    if (event == net::HttpResponseReader::Event::kError) {
      if (reader.status() > 0) return reader.status();  // the status line was fine; the rest does not matter
      *error = "malformed response from " + endpoint_.url + ": " + reader.error();
      return -1;
    }
  }
}

nlohmann::json OtlpExporter::stats() const {
  std::lock_guard lock(mu_);
  nlohmann::json statuses = nlohmann::json::object();
  for (const auto& [code, n] : http_statuses_) statuses[std::to_string(code)] = n;
  return {{"endpoint", endpoint_.url},
          // What the host resolved to at start and the rule that admitted it (a name is looked up
          // again before every POST; this is the first answer, the one judged before anything ran).
          {"endpoint_resolved", {{"host", endpoint_.host}, {"address", endpoint_.address}, {"rule", endpoint_.rule}}},
          {"spans_offered", static_cast<int64_t>(enqueue_pos_.load()) + dropped_queue_full_.load()},
          {"spans_exported", exported_.load()},
          {"spans_dropped_queue_full", dropped_queue_full_.load()},
          {"spans_dropped_export_failed", dropped_export_failed_.load()},
          {"spans_dropped_shutdown", dropped_shutdown_.load()},
          {"batches_exported", batches_ok_.load()},
          {"batches_failed", batches_failed_.load()},
          {"attempts_failed", attempts_failed_.load()},
          {"http_statuses", statuses},
          {"queue_capacity_spans", mask_ + 1},
          {"last_error", last_error_.empty() ? nlohmann::json(nullptr) : nlohmann::json(last_error_)}};
}

}  // namespace tailscope::svc
