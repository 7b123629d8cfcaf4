#include "load/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <thread>

#include "core/clock.h"
#include "core/latency_summary.h"
#include "core/proc_sampler.h"
#include "core/result_writer.h"
#include "net/socket.h"

namespace tailscope::load {

LoadIoPlan plan_load_io(LoadIo requested) {
  LoadIoPlan plan;
  plan.document = {{"requested", std::string(to_string(requested))}};
  if (requested == LoadIo::kEpoll) {
    plan.document["used"] = "epoll";
    plan.document["reason"] = "requested (--io epoll)";
    return plan;
  }
  const std::string unavailable = probe_uring_load_plan(&plan.uring);
  if (!unavailable.empty()) {
    if (requested == LoadIo::kUring) throw std::runtime_error("--io uring: unavailable on this kernel: " + unavailable);
    plan.document["used"] = "epoll";
    plan.document["reason"] = "io_uring unavailable: " + unavailable;
    return plan;
  }
  plan.used = LoadIo::kUring;
  plan.document["used"] = "uring";
  plan.document["reason"] =
      requested == LoadIo::kUring ? "requested (--io uring)" : "auto: io_uring with multishot recv is available";
  plan.document["ring_setup"] = plan.uring.setup_text;
  plan.document["registered_files"] = plan.uring.registered_files;
  if (!plan.uring.registered_files) plan.document["registered_files_reason"] = plan.uring.registered_files_reason;
  return plan;
}

MergedResult run_load(const LoadConfig& config, const std::atomic<bool>& interrupted, pid_t server_pid) {
  // Each connection is one fd; keep headroom for epoll, pipes, /proc reads.
  const int64_t fd_limit = net::raise_fd_limit(config.connections + 256);
  if (fd_limit < config.connections + 64)
    throw std::runtime_error("-c " + std::to_string(config.connections) +
                             " needs more file descriptors than RLIMIT_NOFILE allows (" + std::to_string(fd_limit) +
                             "); raise the hard limit (ulimit -Hn)");
  const LoadIoPlan io = plan_load_io(config.io);
  RunClock clock;
  const int threads = std::min(config.threads, config.connections);
  std::vector<std::unique_ptr<LoadWorker>> workers;
  int first = 0;
  for (int t = 0; t < threads; ++t) {
    const int count = config.connections / threads + (t < config.connections % threads ? 1 : 0);
    workers.push_back(std::make_unique<LoadWorker>(config, t, first, count, clock, &monotonic_ns,
                                                   io.used == LoadIo::kUring ? &io.uring : nullptr));
    first += count;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> failures(workers.size());
  for (size_t t = 0; t < workers.size(); ++t) {
    pool.emplace_back([&, t] {
      try {
        workers[t]->run();
      } catch (...) {
        failures[t] = std::current_exception();
        clock.stop.store(true);
      }
    });
  }
  MergedResult merged;
  merged.io = io.document;
  auto sleep_ms = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  emit_progress("tailscope-load", "connect", 0.0, {{"connections", config.connections}});
  while (clock.workers_connected.load() < static_cast<int>(workers.size()) && !clock.stop.load()) {
    if (interrupted.load()) clock.stop.store(true);
    sleep_ms(1);
  }
  int64_t start = monotonic_ns() + 5'000'000;
  if (config.start_at_realtime_ns > 0) {
    // The realtime instant on the monotonic clock the schedule runs on: with the schedule on a known
    // instant, a caller can act on the --hlog interval boundaries while the run goes on (the tracing
    // study switches sampling on them) and agents on several hosts send their first requests together.
    const int64_t at = config.start_at_realtime_ns - realtime_ns() + monotonic_ns();
    merged.start_late_ns = std::max<int64_t>(start - at, 0);
    start = std::max(start, at);
  }
  merged.start_ns = start;
  merged.measure_start_ns = clock.measure_start_ns = start + static_cast<int64_t>(config.warmup_s * 1e9);
  merged.measure_end_ns = clock.measure_end_ns = clock.measure_start_ns + static_cast<int64_t>(config.duration_s * 1e9);
  clock.start_ns.store(start, std::memory_order_release);

  std::unique_ptr<ResourceSampler> server_sampler, generator_sampler;
  bool sampling = false;
  int64_t no_connection_since = 0;
  int64_t last_progress = 0;
  while (!clock.stop.load()) {
    const int64_t now = monotonic_ns();
    if (now >= clock.measure_end_ns) break;
    if (!sampling && now >= clock.measure_start_ns) {
      sampling = true;
      if (server_pid > 0) {
        server_sampler = std::make_unique<ResourceSampler>(server_pid, 100);
        server_sampler->start();
      }
      generator_sampler = std::make_unique<ResourceSampler>(getpid(), 100);
      generator_sampler->start();
    }
    if (interrupted.load()) {
      merged.complete = false;
      merged.aborted_reason = "interrupted by a signal";
      clock.stop.store(true);
      break;
    }
    // The server went away: every connection down for a whole second.
    if (clock.live_connections.load() == 0) {
      if (no_connection_since == 0)
        no_connection_since = now;
      else if (now - no_connection_since > 1'000'000'000) {
        merged.complete = false;
        merged.aborted_reason = "every connection lost for more than 1 s (server gone?)";
        clock.stop.store(true);
        break;
      }
    } else {
      no_connection_since = 0;
    }
    if (now - last_progress >= 1'000'000'000) {
      last_progress = now;
      const bool warm = now < clock.measure_start_ns;
      const double total = static_cast<double>(clock.measure_end_ns - start);
      emit_progress("tailscope-load", warm ? "warmup" : "measure",
                    static_cast<double>(std::max<int64_t>(now - start, 0)) / total,
                    {{"live_connections", clock.live_connections.load()}});
    }
    sleep_ms(5);
  }
  const int64_t stopped = std::min(monotonic_ns(), clock.measure_end_ns);
  for (std::thread& t : pool) t.join();
  merged.finished_ns = monotonic_ns();
  for (auto& f : failures)
    if (f) std::rethrow_exception(f);
  if (server_sampler) {
    server_sampler->stop();
    merged.server_resources = server_sampler->summary();
    merged.server_resources["pid"] = server_pid;
  }
  if (generator_sampler) {
    generator_sampler->stop();
    merged.generator_resources = generator_sampler->summary();
  }
  merged.measured_s = std::max(0.0, static_cast<double>(stopped - clock.measure_start_ns) / 1e9);

  WorkerResult& t = merged.totals;
  for (auto& w : workers) {
    WorkerResult& r = w->result();
    t.intended.merge(r.intended);
    t.actual.merge(r.actual);
    t.send_lag.merge(r.send_lag);
    t.sent_in_window += r.sent_in_window;
    t.completed_in_window += r.completed_in_window;
    t.server_backlog_sends += r.server_backlog_sends;
    t.skipped_while_disconnected += r.skipped_while_disconnected;
    t.unsent_in_window += r.unsent_in_window;
    t.bytes_sent += r.bytes_sent;
    t.bytes_received += r.bytes_received;
    t.connections_established += r.connections_established;
    t.loop_ns += r.loop_ns;
    t.idle_loop_ns += r.idle_loop_ns;
    t.syscalls += r.syscalls;
    if (r.loop_ns > 0)
      merged.busy_share_per_thread.push_back(1.0 -
                                             static_cast<double>(r.idle_loop_ns) / static_cast<double>(r.loop_ns));
    t.errors.add(r.errors);
    t.server_closes.add(r.server_closes);
    t.request_log.insert(t.request_log.end(), r.request_log.begin(), r.request_log.end());
    t.request_log_dropped += r.request_log_dropped;
    if (t.first_violation.empty()) t.first_violation = r.first_violation;
    if (t.first_connect_error.empty()) t.first_connect_error = r.first_connect_error;
    merge_endpoint_latencies(t.endpoints, r.endpoints);
    for (size_t k = 0; k < r.intervals.size(); ++k) {
      if (merged.intervals.size() <= k) merged.intervals.resize(k + 1);
      if (r.intervals[k]) {
        merged.intervals[k].intended.merge(r.intervals[k]->intended);
        merged.intervals[k].actual.merge(r.intervals[k]->actual);
      }
    }
  }
  emit_progress("tailscope-load", "done", 1.0);
  return merged;
}

void fill_document(nlohmann::json& doc, const LoadConfig& config, const MergedResult& result) {
  const WorkerResult& t = result.totals;
  const double seconds = result.measured_s > 0 ? result.measured_s : config.duration_s;
  const double achieved = static_cast<double>(t.completed_in_window) / seconds;
  const double sent_rate = static_cast<double>(t.sent_in_window) / seconds;
  const int64_t p99 = t.intended.value_at_percentile(99.0);
  const int64_t lag_p99 = t.send_lag.value_at_percentile(99.0);
  const bool rate_shortfall = config.open_loop() && achieved < 0.99 * config.rate_per_s;
  // The server held requests back (errors, unanswered requests, sends
  // delayed by a busy connection): a rate shortfall is then the server's,
  // not evidence against the generator.
  const bool server_held_back =
      t.errors.total() > 0 || t.server_backlog_sends > 0 || t.completed_in_window < t.sent_in_window;
  // Without a latency there is nothing for the send lag to dominate.
  const bool lag_dominates = t.send_lag.total_count() > 0 && t.intended.total_count() > 0 &&
                             static_cast<double>(lag_p99) > 0.10 * static_cast<double>(p99);
  const bool generator_bottleneck = lag_dominates || (rate_shortfall && !server_held_back);
  const std::string mode = config.open_loop() ? "open" : "closed";
  nlohmann::json pinning = {{"policy", config.cpus.empty() ? "unpinned" : "pinned"}};
  if (!config.cpus.empty()) pinning["load_cpus"] = config.cpus;

  nlohmann::json errors = {{"connect", t.errors.connect},
                           {"read", t.errors.read},
                           {"write", t.errors.write},
                           {"timeout", t.errors.timeout},
                           {"echo_mismatch", t.errors.echo_mismatch},
                           {"bad_status", t.errors.bad_status},
                           {"bad_frame", t.errors.bad_frame}};
  nlohmann::json load = {
      {"mode", mode},
      {"requested_per_s", config.open_loop() ? nlohmann::json(config.rate_per_s) : nlohmann::json(nullptr)},
      {"achieved_per_s", achieved},
      {"sent_per_s", sent_rate},
      {"duration_s", seconds},
      {"warmup_s", config.warmup_s},
      {"requests_completed", t.completed_in_window},
      {"requests_sent", t.sent_in_window},
      {"bytes_sent", t.bytes_sent},
      {"bytes_received", t.bytes_received},
      {"connections", config.connections},
      {"connections_established", t.connections_established},
      {"errors", errors},
      {"errors_total", t.errors.total()},
      {"complete", result.complete},
      {"generator_bottleneck", generator_bottleneck},
      {"self_check",
       {{"rate_shortfall", rate_shortfall},
        {"server_held_back", server_held_back},
        {"send_lag_p99_ns", lag_p99},
        {"latency_p99_ns", p99},
        {"send_lag_over_10pct_of_p99", lag_dominates},
        {"server_backlog_sends", t.server_backlog_sends},
        {"unsent_in_window", t.unsent_in_window},
        {"skipped_while_disconnected", t.skipped_while_disconnected},
        {"note",
         "send lag = actual - max(intended, moment the connection became free): the generator's own delay. "
         "server_backlog_sends counts requests that left late because the connection still waited for a "
         "response (server-side queueing, charged to latency_intended, not to send lag)."}}},
  };
  load["server_closes"] = {
      {"idle", t.server_closes.idle},
      {"connection_close", t.server_closes.connection_close},
      {"requests_resent", t.server_closes.requests_resent},
      {"what",
       "connections the server closed as HTTP servers do, each followed by a reconnect, not errors: idle = with "
       "nothing in flight (keep-alive idle timeout); connection_close = after a response saying Connection: close; "
       "requests_resent = sent once more on a new connection because a reused one closed before any byte of their "
       "response (latency_intended includes the reconnect)"}};
  load["io"] = result.io;
  // The generator's own cost, so a study can tell who limited a point: the
  // share of its loop time that found work (a thread near 1 was the limit)
  // and its system calls per completed request (io_uring batches them).
  nlohmann::json busy = {{"per_thread", result.busy_share_per_thread}};
  if (result.busy_share_per_thread.empty()) {
    busy["max"] = nullptr;
    busy["mean"] = nullptr;
    busy["reason"] = "no loop turn began inside the measured window";
  } else {
    double sum = 0, peak = 0;
    for (double b : result.busy_share_per_thread) {
      sum += b;
      peak = std::max(peak, b);
    }
    busy["max"] = peak;
    busy["mean"] = sum / static_cast<double>(result.busy_share_per_thread.size());
  }
  busy["what"] =
      "per load thread: 1 - (loop time in turns that neither sent nor received) / (loop time), measured window";
  load["generator_busy_share"] = busy;
  load["generator_syscalls"] = t.syscalls;
  load["generator_syscalls_per_request"] =
      t.completed_in_window > 0
          ? nlohmann::json(static_cast<double>(t.syscalls) / static_cast<double>(t.completed_in_window))
          : nlohmann::json(nullptr);
  if (!result.aborted_reason.empty()) load["aborted_reason"] = result.aborted_reason;
  if (!t.first_violation.empty()) load["first_violation"] = t.first_violation;
  if (!t.first_connect_error.empty()) load["first_connect_error"] = t.first_connect_error;
  doc["load"] = load;
  if (!result.server_resources.is_null()) doc["server_resources"] = result.server_resources;
  if (!result.generator_resources.is_null()) doc["generator_resources"] = result.generator_resources;

  nlohmann::json observed = {{"mode", mode},
                             {"requested_per_s", load["requested_per_s"]},
                             {"achieved_per_s", achieved},
                             {"connections", config.connections},
                             {"errors_total", t.errors.total()},
                             {"generator_bottleneck", load["generator_bottleneck"]}};
  if (!result.server_resources.is_null()) observed["server"] = result.server_resources;
  struct Row {
    const char* name;
    const char* what;
    const HdrHistogram* h;
  };
  const Row rows[] = {
      {"latency_intended", "intended send time → last byte of the response received (coordinated omission corrected)",
       &t.intended},
      {"latency_actual", "actual send() time → last byte of the response received (uncorrected, as wrk/Fortio)",
       &t.actual},
      {"send_lag", "actual send() time − max(intended time, connection free): the generator's own lateness",
       &t.send_lag},
  };
  for (const Row& row : rows) {
    if (row.h->total_count() == 0) {
      doc["unavailable"].push_back(
          {{"name", row.name}, {"variant", mode}, {"reason", "no request completed in the measured window"}});
      continue;
    }
    doc["measurements"].push_back({{"name", row.name},
                                   {"variant", mode},
                                   {"what", row.what},
                                   {"pinning", pinning},
                                   {"observed", observed},
                                   {"latency", latency_summary(*row.h)},
                                   {"cdf", latency_cdf(*row.h)},
                                   {"hlog_tag", row.name}});
  }
}

}  // namespace tailscope::load
