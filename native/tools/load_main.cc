// tailscope-load: open-/closed-loop load generator (wrk2-style flags) for the
// echo, HTTP and tailscope RPC protocols. Prints one result document
// (docs/load-generator.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <iostream>
#include <sstream>

#include "core/affinity.h"
#include "core/clock.h"
#include "core/hlog.h"
#include "core/latency_summary.h"
#include "core/result_writer.h"
#include "core/stop_signals.h"
#include "load/client_protocol.h"
#include "load/request_log.h"
#include "load/run.h"
#include "net/allow_list.h"

using namespace tailscope;
using namespace tailscope::load;

namespace {

std::atomic<bool> g_interrupted{false};
void on_signal(int) { g_interrupted.store(true); }

// "http://127.0.0.1:8080/path" or "127.0.0.1:8080" → host, port, path.
void apply_target(const std::string& target, LoadConfig& config, bool* is_http) {
  std::string rest = target;
  *is_http = false;
  if (rest.starts_with("http://")) {
    rest = rest.substr(7);
    *is_http = true;
  } else if (rest.starts_with("tcp://")) {
    rest = rest.substr(6);
  }
  size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    config.http_path = rest.substr(slash);
    rest = rest.substr(0, slash);
  }
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("target '" + target + "' lacks a :PORT");
  config.host = rest.substr(0, colon);
  if (config.host.starts_with("[") && config.host.ends_with("]"))
    config.host = config.host.substr(1, config.host.size() - 2);
  config.port = static_cast<int>(parse_count("target port", rest.substr(colon + 1), 1, 65535));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tailscope-load: open-loop load generator measuring latency from the intended send time"};
  LoadConfig config;
  std::string out_path, artifacts_dir, hlog_path, target, cpus_text, protocol_text;
  // Every number is read as text and parsed by load/config.h, so each bad
  // value gets one kind of message (option, value, allowed range) and exit 1.
  std::string connections_text = "10", duration_text = "10s", rate_text = "0", warmup_text = "1s", timeout_text = "5s";
  std::string threads_text = "1", pipeline_text = "1", payload_text = "64", port_text, spin_text = "20",
              seed_text = "1", hlog_interval_text = "1", server_pid_text, start_at_text;
  std::string arrival_text = "fixed";
  std::string io_text = "epoll";  // measured no better on average: docs/load-generator.md, I/O paths
  std::vector<std::string> mix_specs;
  std::string mix_file, request_log_path, request_log_max_text;
  bool print_latency = false, allow_errors = false;
  int server_pid = 0;
  double spin_us = 20.0;
  app.add_option("target", target, "Optional wrk-style target: http://127.0.0.1:PORT/path or tcp://127.0.0.1:PORT");
  app.add_option("-t,--threads", threads_text, "Load threads (each with its own epoll loop), 1 … 256");
  app.add_option("-c,--connections", connections_text, "Connections in total (SI suffixes: 10k), 1 … 1M");
  app.add_option("-d,--duration", duration_text, "Measured duration, excluding warm-up (10s, 500ms, 2m), 1ms … 24h");
  app.add_option("-R,--rate", rate_text,
                 "Total requests/s (SI suffixes: 20k), up to 100M; 0 = closed loop as fast as possible");
  app.add_option("--warmup", warmup_text, "Warm-up before the measured window (not recorded), 0 … 24h");
  app.add_option("--arrival", arrival_text, "fixed or poisson inter-arrival times (open loop)");
  app.add_option("--pipeline", pipeline_text, "Requests in flight per connection (at most), 1 … 1024");
  app.add_option("--protocol", protocol_text,
                 "echo (RFC 862), http (HTTP/1.1 keep-alive GET) or rpc (tailscope RPC frames, docs/protocol.md)");
  app.add_option("--payload-bytes", payload_text, "Echo / rpc request payload, 1 … 1048576");
  app.add_option("--rpc-method", config.rpc_method, "rpc: the endpoint called (e.g. compose_post)");
  app.add_flag("--rpc-sampled", config.rpc_sampled,
               "rpc: send sampled trace contexts (random trace ids) so services record spans");
  app.add_flag("--traceparent", config.traceparent,
               "http: send a W3C traceparent header (fresh trace id, sampled) with every request");
  app.add_option("--request-log", request_log_path,
                 "With --traceparent: write each answered request of the window (trace id, intended send time, "
                 "latency) to this CSV file");
  app.add_option("--request-log-max-rows", request_log_max_text,
                 "Rows the request log keeps at most (the rest are counted, not kept), 1 … 100M; default 1M");
  app.add_option("--host", config.host,
                 "Server address or DNS name (resolved once at start; loopback, the lab subnet 198.18.0.0/15 or an "
                 "--allow-cidr block)");
  std::vector<std::string> allow_cidrs;
  app.add_option("--allow-cidr", allow_cidrs,
                 "A network the target lives in, added to the allow-list: a container network, a cluster's service "
                 "range; repeatable; /8 or narrower");
  app.add_option("--port", port_text, "Server port");
  app.add_option("--path", config.http_path, "HTTP request target");
  app.add_option("--mix", mix_specs,
                 "http: a weighted endpoint mix, PATH=WEIGHT, repeatable (each request picks its path by weight; "
                 "one histogram per endpoint)");
  app.add_option("--mix-file", mix_file, "http: the mix from a file, one PATH=WEIGHT per line ('#' comments)");
  app.add_option("--cpus", cpus_text, "CPU list the load threads are pinned to (round robin)");
  app.add_option("--timeout", timeout_text, "A request unanswered this long is a timeout error, 1ms … 1h");
  app.add_option("--spin-us", spin_text, "Pacing: sleep until this close to a send, then busy-poll, 0 … 10000");
  app.add_flag("--busy-poll", config.busy_poll,
               "Never sleep: spin on epoll (the load thread owns its core; removes its wake-up latency)");
  app.add_option("--io", io_text,
                 "How load threads move bytes: uring (multishot recv, one io_uring_enter per loop turn), epoll "
                 "(a send and a recv per request) or auto (uring when the kernel has it, else epoll; the document "
                 "says which and why); default epoll");
  app.add_option("--seed", seed_text, "Seed for Poisson gaps and start offsets, 0 … 2^53");
  app.add_option("--hlog", hlog_path, "Write interval histograms (.hlog, tags latency_intended/latency_actual)");
  app.add_option("--hlog-interval", hlog_interval_text, "Interval length in seconds, 0.01 … 3600");
  app.add_flag("--latency", print_latency, "Print the wrk2-style percentile spectrum to stderr");
  app.add_option("--server-pid", server_pid_text, "Sample this process's CPU, RSS, threads and fds during the window");
  app.add_flag("--allow-errors", allow_errors, "Exit 0 even when errors were counted (the document reports them)");
  app.add_option("--start-at", start_at_text,
                 "Start the request schedule at this Unix time (seconds, realtime clock), connecting before it: "
                 "load agents on several hosts start together, --hlog intervals begin on a known instant");
  app.add_option("--out", out_path, "Result document path (default: stdout)");
  app.add_option("--artifacts", artifacts_dir, "Folder for load.hlog (when --hlog is not given)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // CLI11's own codes (105, 109, ...) are not the documented ones: a bad flag is exit 1.
    std::cerr << "tailscope-load: error: " << e.what() << "\n";
    return 1;
  }

  try {
    config.threads = static_cast<int>(parse_count("-t", threads_text, 1, 256));
    config.pipeline = static_cast<int>(parse_count("--pipeline", pipeline_text, 1, 1024));
    config.payload_bytes = static_cast<size_t>(parse_count("--payload-bytes", payload_text, 1, 1 << 20));
    if (!port_text.empty()) config.port = static_cast<int>(parse_count("--port", port_text, 1, 65535));
    spin_us = parse_number_in("--spin-us", spin_text, 0, 10'000);
    config.seed = static_cast<uint64_t>(parse_count("--seed", seed_text, 0, int64_t{1} << 53));
    config.hlog_interval_s = parse_number_in("--hlog-interval", hlog_interval_text, 0.01, 3600);
    // Agents on several lab hosts share one clock (namespaces do not virtualise it), so a common
    // Unix time aligns their warm-up and measured windows; a time already past starts at once.
    double start_at_s = 0;
    if (!start_at_text.empty()) {
      const double now_s = static_cast<double>(realtime_ns()) / 1e9;
      start_at_s = parse_number_in("--start-at", start_at_text, now_s - 3600, now_s + 3600);
    }
    if (!server_pid_text.empty())
      server_pid = static_cast<int>(parse_count("--server-pid", server_pid_text, 1, 1 << 22));
    bool target_is_http = false;
    if (!target.empty()) apply_target(target, config, &target_is_http);
    config.protocol = parse_load_protocol(!protocol_text.empty() ? protocol_text : (target_is_http ? "http" : "echo"));
    if (config.protocol == LoadProtocol::kRpc) {
      make_client_protocol(config, 0);  // validates --rpc-method and the frame size before any connection
    } else if (!config.rpc_method.empty() || config.rpc_sampled) {
      throw std::invalid_argument("--rpc-method / --rpc-sampled apply only to --protocol rpc");
    }
    if (config.traceparent && config.protocol != LoadProtocol::kHttp)
      throw std::invalid_argument("--traceparent applies only to --protocol http (rpc: --rpc-sampled)");
    if (!request_log_path.empty() && !config.traceparent)
      throw std::invalid_argument("--request-log needs --traceparent (its rows are keyed by trace id)");
    if (!request_log_max_text.empty())
      config.request_log_max_rows = parse_count("--request-log-max-rows", request_log_max_text, 1, 100'000'000);
    if (!mix_specs.empty() && !mix_file.empty()) throw std::invalid_argument("give --mix or --mix-file, not both");
    if (!mix_file.empty()) mix_specs = EndpointMix::read_specs_file(mix_file);
    if (!mix_specs.empty()) {
      if (config.protocol != LoadProtocol::kHttp)
        throw std::invalid_argument("--mix / --mix-file apply only to --protocol http");
      if (config.http_path != "/")
        throw std::invalid_argument("--mix names every request path; drop --path " + config.http_path +
                                    " (or the target's path)");
      config.mix = EndpointMix::parse(mix_file.empty() ? "--mix" : "--mix-file " + mix_file, mix_specs);
    }
    if (config.port <= 0)
      throw std::invalid_argument("no server port: give --port PORT or a target such as tcp://127.0.0.1:PORT");
    for (const std::string& block : allow_cidrs) net::declare_allowed_cidr(net::parse_cidr(block, "--allow-cidr"));
    // Resolved once: every connection dials the address the allow-list judged (no packet to a refused one).
    const net::ResolvedTarget resolved = net::resolve_allowed_target(config.host, "--host");
    config.address = resolved.address;
    if (config.address != config.host)
      std::cerr << "tailscope-load: --host " << config.host << " resolved to " << config.address << " ("
                << resolved.rule << ")\n";
    config.connections = static_cast<int>(parse_count("-c", connections_text, 1, kMaxConnections));
    config.duration_s = parse_duration_in("-d", duration_text, kMinDurationS, kMaxDurationS);
    config.warmup_s = parse_duration_in("--warmup", warmup_text, 0, kMaxDurationS);
    config.rate_per_s = parse_rate_per_s("-R", rate_text);
    config.timeout_ns = static_cast<int64_t>(parse_duration_in("--timeout", timeout_text, 0.001, kMaxTimeoutS) * 1e9);
    config.spin_ns = static_cast<int64_t>(spin_us * 1e3);
    check_load_config(config);
    if (arrival_text == "poisson")
      config.arrival = Arrival::kPoisson;
    else if (arrival_text != "fixed")
      throw std::invalid_argument("--arrival: '" + arrival_text + "' is neither fixed nor poisson");
    if (!cpus_text.empty()) config.cpus = parse_cpu_list(cpus_text);
    config.io = parse_load_io(io_text);
    // Threads are pinned round robin: more threads than listed CPUs share
    // cores, which adds context switches and no cycles (the echo study used
    // to pin -t N to one CPU). Allowed, but said, and recorded below.
    int threads_per_cpu = 1;
    if (!config.cpus.empty()) {
      const auto cpus = static_cast<int>(config.cpus.size());
      threads_per_cpu = (std::min(config.threads, config.connections) + cpus - 1) / cpus;
      if (threads_per_cpu > 1)
        std::cerr << "tailscope-load: note: " << config.threads << " load threads on " << cpus
                  << " CPU(s) (--cpus): " << threads_per_cpu << " threads share a core\n";
    }
    if (!hlog_path.empty() || !artifacts_dir.empty()) config.record_intervals = true;
    if (hlog_path.empty() && !artifacts_dir.empty()) {
      ensure_directory(artifacts_dir);
      hlog_path = artifacts_dir + "/load.hlog";
    }

    install_stop_handler(on_signal);

    nlohmann::json doc = new_result_document("tailscope-load", argc, argv);
    doc["config"] = {{"host", config.host},
                     {"address", config.address.empty() ? config.host : config.address},
                     {"port", config.port},
                     {"threads", config.threads},
                     {"connections", config.connections},
                     {"duration_s", config.duration_s},
                     {"warmup_s", config.warmup_s},
                     {"rate_per_s", config.rate_per_s},
                     {"arrival", arrival_text},
                     {"pipeline", config.pipeline},
                     {"protocol", std::string(to_string(config.protocol))},
                     {"payload_bytes", config.payload_bytes},
                     {"cpus", format_cpu_list(config.cpus)},
                     {"timeout_s", static_cast<double>(config.timeout_ns) / 1e9},
                     {"spin_us", spin_us},
                     {"busy_poll", config.busy_poll},
                     {"io", io_text},
                     {"seed", config.seed}};
    doc["config"]["threads_per_cpu"] = config.cpus.empty() ? nlohmann::json(nullptr) : nlohmann::json(threads_per_cpu);
    if (config.protocol == LoadProtocol::kRpc) {
      doc["config"]["rpc_method"] = config.rpc_method;
      doc["config"]["rpc_sampled"] = config.rpc_sampled;
    }
    doc["config"]["traceparent"] = config.traceparent;
    if (!config.mix.empty()) {
      nlohmann::json mix = nlohmann::json::array();
      for (const MixEndpoint& e : config.mix.endpoints()) mix.push_back({{"path", e.path}, {"weight", e.weight}});
      doc["config"]["mix"] = mix;
    }
    doc["measurements"] = nlohmann::json::array();
    doc["unavailable"] = nlohmann::json::array();
    if (start_at_s > 0) config.start_at_realtime_ns = static_cast<int64_t>(start_at_s * 1e9);
    MergedResult result = run_load(config, g_interrupted, server_pid);
    // The run's instants are on the monotonic clock; this offset places them on the realtime clock
    // (for the hlog's StartTime and --start-at's lateness) without counting the connect phase twice.
    const int64_t monotonic_to_realtime_ns = realtime_ns() - monotonic_ns();
    if (start_at_s > 0) {
      doc["config"]["start_at_s"] = start_at_s;
      // How late the first request's intended time fell after --start-at: 0 when connecting took less
      // than the lead, else the connect phase overran it.
      doc["config"]["start_late_s"] = static_cast<double>(result.start_late_ns) / 1e9;
    }
    fill_document(doc, config, result);
    if (!config.mix.empty())
      doc["endpoints"] = endpoints_document(config.mix, result.totals.endpoints, result.measured_s, config.seed,
                                            std::min(config.threads, config.connections));

    if (!hlog_path.empty()) {
      std::ostringstream text;
      HlogWriter hlog(text);
      hlog.write_header(static_cast<double>(result.measure_start_ns + monotonic_to_realtime_ns) / 1e9,
                        config.mix.empty()
                            ? "tailscope-load interval histograms (ns), tags latency_intended / latency_actual"
                            : "tailscope-load interval histograms (ns), tags latency_intended / "
                              "latency_actual (all requests) and <tag>@PATH per --mix endpoint");
      for (size_t k = 0; k < result.intervals.size(); ++k) {
        const double t0 = static_cast<double>(k) * config.hlog_interval_s;
        hlog.write_interval(t0, config.hlog_interval_s, result.intervals[k].intended, "latency_intended");
        hlog.write_interval(t0, config.hlog_interval_s, result.intervals[k].actual, "latency_actual");
        for (size_t e = 0; e < config.mix.size(); ++e) {
          const auto& per = result.totals.endpoints[e].intervals;
          if (k >= per.size() || !per[k]) continue;  // nothing of this endpoint completed in this interval
          const MixEndpoint& endpoint = config.mix.endpoints()[e];
          hlog.write_interval(t0, config.hlog_interval_s, per[k]->intended,
                              endpoint_hlog_tag("latency_intended", endpoint));
          hlog.write_interval(t0, config.hlog_interval_s, per[k]->actual,
                              endpoint_hlog_tag("latency_actual", endpoint));
        }
      }
      write_file_atomic(hlog_path, text.str());
      doc["artifacts"] = {{"hlog", hlog_path}};
    }
    if (!request_log_path.empty()) {
      const auto rows = static_cast<int64_t>(result.totals.request_log.size());
      write_file_atomic(request_log_path,
                        request_log_csv(std::move(result.totals.request_log), monotonic_to_realtime_ns));
      doc["load"]["request_log"] = {{"path", request_log_path},
                                    {"schema", kRequestLogSchema},
                                    {"rows", rows},
                                    {"dropped_over_limit", result.totals.request_log_dropped},
                                    {"max_rows", config.request_log_max_rows}};
      if (!doc.contains("artifacts")) doc["artifacts"] = nlohmann::json::object();
      doc["artifacts"]["request_log"] = request_log_path;
    }
    if (print_latency) {
      std::cerr << "  Latency Distribution (HdrHistogram - Recorded Latency, from the intended send time)\n"
                << result.totals.intended.percentile_spectrum_text(1000.0) << "\n"
                << percentile_interval_text(latency_summary(result.totals.intended), {"99", "99.9"}) << "\n"
                << "  " << result.totals.completed_in_window << " requests in " << result.measured_s << "s, "
                << doc["load"]["achieved_per_s"].get<double>() << " requests/s\n";
    }
    write_result(doc, out_path);
    if (g_interrupted.load()) return 130;
    if (!result.complete) {
      std::cerr << "tailscope-load: run incomplete: " << result.aborted_reason << " (partial results written)\n";
      return kExitErrors;
    }
    bool failed = false;
    if (result.totals.errors.total() > 0 && !allow_errors) {
      std::cerr << "tailscope-load: " << result.totals.errors.total() << " errors: " << doc["load"]["errors"].dump()
                << (result.totals.first_violation.empty() ? "" : " (first: " + result.totals.first_violation + ")")
                << "\n";
      failed = true;
    }
    // A run that measured nothing is not a success (-R 0.001 used to exit 0
    // with an empty window); --allow-errors accepts it like errors, since a
    // study sweeping into overload still wants the document.
    if (result.totals.completed_in_window == 0 && !allow_errors) {
      std::cerr << "tailscope-load: no request completed in the measured window: nothing was measured\n";
      failed = true;
    }
    if (failed) return kExitErrors;
  } catch (const std::exception& e) {
    std::cerr << "tailscope-load: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
