// Live span export: OTLP/HTTP JSON (POST /v1/traces) to a collector or Jaeger
// while the service runs, in addition to the span files written at shutdown.
//
// The handler side is Tracer::record() → OtlpExporter::offer(): one lock-free
// try-push into a bounded queue (Vyukov's bounded MPMC ring). A full queue
// drops the span and counts it — a handler never waits on export, however slow
// or dead the endpoint. One exporter thread drains the queue in batches
// (max_batch_spans, or whatever arrived within flush_interval), builds the
// OTLP JSON document with trace/'s writer and POSTs it with net/http's response
// parser. Refused connections, stalls (io_timeout) and 5xx/429 answers are
// retried a bounded number of times; then the batch is dropped and counted.
//
// Endpoint hosts obey the allow-list (loopback, the lab subnet 198.18.0.0/15,
// the blocks declared with --allow-cidr) — the project never sends a packet
// anywhere else: spans name services and timings of the machine under test,
// and a typo in a URL must not send them (or load) off the machine
// (net/allow_list.h; docs/lab-hosts.md, "The allow-list"). The host may be a
// DNS name (a collector's Kubernetes Service, a Jaeger container's name): it
// is resolved at start — a name that does not resolve, or resolves outside the
// policy, is an error then — and again before every POST (each POST is its own
// connection), so a collector restarted at a new address is found; the
// address dialled is the address the rule judged.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "net/allow_list.h"
#include "svc/tracer.h"

namespace tailscope::svc {

struct OtlpEndpoint {
  std::string host;     // as given: a numeric address or a DNS name (localhost is read as 127.0.0.1)
  std::string address;  // numeric: what `host` resolved to at parse time, allowed by the policy
  std::string rule;     // the allow-list rule that admitted `address`
  int port = 4318;
  std::string path = "/v1/traces";
  std::string url;
};

// Parses http://HOST[:PORT][/PATH] (default port 4318, default path
// /v1/traces) and resolves HOST (net::resolve_allowed_target). Throws
// std::invalid_argument naming `flag` and the URL when the URL is malformed,
// not http, or the host does not resolve to an address the allow-list admits.
OtlpEndpoint parse_otlp_endpoint(const std::string& url, const std::string& flag = "--otlp-endpoint",
                                 const net::NameLookup& lookup = net::system_lookup);

struct OtlpExporterOptions {
  size_t queue_capacity_spans = 1 << 16;  // rounded up to a power of two
  size_t max_batch_spans = 512;
  int64_t flush_interval_ns = 200'000'000;
  int max_attempts = 3;                       // per batch, the first try included
  int64_t retry_backoff_ns = 100'000'000;     // doubled after each failed attempt
  int64_t io_timeout_ns = 1'000'000'000;      // connect, and then the whole request/response
  int64_t shutdown_grace_ns = 2'000'000'000;  // stop(): time left to send what is queued
};

class OtlpExporter final : public SpanSink {
 public:
  OtlpExporter(OtlpEndpoint endpoint, OtlpExporterOptions options);
  ~OtlpExporter() override;
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  void offer(const SpanRecord& span) noexcept override;
  void start();
  // Sends what is queued (within shutdown_grace_ns; the rest is dropped and
  // counted), then joins the exporter thread. Call after every recording
  // thread has stopped.
  void stop();
  // Counters: spans offered / exported / dropped (queue full, export failed,
  // shutdown), batches, failed attempts, HTTP statuses, the last error.
  nlohmann::json stats() const;

 private:
  struct Slot {
    std::atomic<size_t> sequence;
    SpanRecord span;
  };
  bool try_pop(SpanRecord* out);
  void run();
  bool send_batch(const std::vector<SpanRecord>& batch);
  // One POST; returns the HTTP status, or -1 with *error set on an IO failure.
  int post_once(const std::string& body, std::string* error);

  OtlpEndpoint endpoint_;
  OtlpExporterOptions options_;
  std::unique_ptr<Slot[]> slots_;
  size_t mask_ = 0;
  alignas(64) std::atomic<size_t> enqueue_pos_{0};
  alignas(64) std::atomic<size_t> dequeue_pos_{0};

  std::atomic<int64_t> dropped_queue_full_{0};
  std::atomic<int64_t> exported_{0}, dropped_export_failed_{0}, dropped_shutdown_{0};
  std::atomic<int64_t> batches_ok_{0}, batches_failed_{0}, attempts_failed_{0};
  mutable std::mutex mu_;  // guards the fields below (exporter thread vs stats())
  std::map<int, int64_t> http_statuses_;
  std::string last_error_;
  bool stopping_ = false;
  int64_t stop_deadline_ns_ = 0;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace tailscope::svc
