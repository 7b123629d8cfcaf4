// tailscope-svc: runs services of a topology under one concurrency model.
//
//   tailscope-svc --topology g.json --service text-service --model coroutine --port 9001 --ports a=9002,...
//   tailscope-svc --topology g.json --all --model pool-callback --port 8080 --traces DIR --out result.json
//   tailscope-svc --merge-traces DIR
//   tailscope-svc --topology g.json --all --deployment d.json   (services on lab hosts; docs/lab-hosts.md)
//   tailscope-svc --check-topology g.json
//   tailscope-svc --ping PORT                                   (the transport alone)
//   tailscope-svc --list-models                                 (the --model names, one per line)
//
// This file parses the flags and chooses the mode; each mode lives in svc/:
// one service (service_process.h), the supervisor of all (supervisor.h), the
// ping client (ping_client.h), the topology check and the trace merge.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>

#include "core/result_writer.h"
#include "svc/link_delay.h"
#include "svc/ping_client.h"
#include "svc/runtime.h"
#include "svc/service_options.h"
#include "svc/service_process.h"
#include "svc/span_spill.h"
#include "svc/supervisor.h"
#include "svc/topology.h"
#include "svc/tracer.h"

namespace {

using namespace tailscope;
using namespace tailscope::svc;

// Every flag: the service modes' options, and those of the one-shot modes.
struct Flags : ServiceOptions {
  std::string merge_dir;                 // --merge-traces DIR
  std::string spill_path;                // --decode-spill FILE
  std::string check_path, check_origin;  // --check-topology FILE, --origin NAME
  PingOptions ping;                      // --ping PORT and --ping-*
  std::string ping_host = "127.0.0.1";
  bool list_models = false;
};

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"tailscope-svc: the microservice runtime (one service, or the whole graph with --all)"};
  app.add_option("--topology", f.topology, "Topology JSON (convert YAML with python -m tailscope.topology)");
  app.add_option("--service", f.service, "Run this service");
  app.add_flag("--all", f.all, "Run every service, one process each, supervised");
  app.add_option("--model", f.model, "std-async | std-thread | pool-blocking | pool-callback | coroutine");
  app.add_flag("--list-models", f.list_models, "Print the concurrency model names, one per line, and exit");
  app.add_option("--port", f.port, "Listen port (--all: the front's); default: topology port or ephemeral")
      ->check(CLI::Range(0, 65535));
  app.add_option("--ports", f.ports_text, "Downstream ports NAME=PORT,... on 127.0.0.1 (single-service mode)");
  app.add_option(
      "--peers", f.peers_text,
      "Downstream services at NAME=HOST:PORT,... (HOST numeric, [V6], or a DNS name resolved at start and on "
      "every reconnect; loopback, 198.18.0.0/15 or an --allow-cidr block; "
      "single-service mode)");
  app.add_option("--allow-cidr", f.allow_cidrs,
                 "A network this deployment's peers live in, added to the allow-list (loopback and 198.18.0.0/15): "
                 "a container network, a cluster's pod or service range; repeatable; /8 or narrower "
                 "(single-service mode)");
  app.add_option("--bind", f.bind, "Listen address (single-service mode; loopback or 198.18.0.0/15)");
  app.add_option("--link-delay", f.link_delay_text,
                 "Link-delay shim: hold frames to/from ADDR by DELAY_US (+ uniform 0 … JITTER_US), "
                 "ADDR=DELAY_US[:JITTER_US],... (single service, --ping)");
  app.add_option("--deployment", f.deployment,
                 "--all: run each service on its host (JSON: hosts, links, services; docs/lab-hosts.md)");
  app.add_option("--listen-fd", f.listen_fd, "Inherited listening socket (set by --all)");
  auto* workers = app.add_option("--workers", f.runtime.workers,
                                 "pool-blocking / pool-callback processing threads (1 … the machine's thread limit)");
  app.add_option("--loops", f.runtime.loops, "coroutine: event loops (default: online CPUs); pools: IO dispatchers")
      ->check(CLI::Range(1, 256));
  app.add_option("--queue", f.runtime.queue_capacity, "Bounded queue / in-flight limit per loop (then: reject)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--connections", f.runtime.channel_connections, "Multiplexed connections per downstream service")
      ->check(CLI::Range(1, 64));
  app.add_option("--timeout-ms", f.timeout_ms, "Per-call timeout (default: the topology's call_timeout_ms)")
      ->check(CLI::Range(1.0, 600000.0));
  app.add_option("--pool-idle-s", f.pool_idle_s,
                 "std-async / std-thread: close a pooled downstream connection idle this long (0: keep them all)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--trace-sample", f.trace_sample, "Fraction of requests traced (0 = tracing off)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--otlp-endpoint", f.otlp_endpoint,
                 "Also send spans live as OTLP/HTTP JSON to http://HOST:PORT[/v1/traces] (HOST numeric or a DNS name, "
                 "resolved at start and before every POST; loopback, 198.18.0.0/15 or an --allow-cidr block)");
  app.add_option("--otlp-queue-spans", f.otlp_queue_spans,
                 "--otlp-endpoint: bounded export queue per service; a full queue drops spans (counted)")
      ->check(CLI::Range(size_t{16}, size_t{1} << 22));
  app.add_option("--traces", f.traces_dir, "Write span files here on shutdown (--all: merged Jaeger + OTLP JSON)");
  app.add_option("--out", f.out, "Result document (default: stdout)");
  app.add_option("--duration", f.duration_s, "Stop after this many seconds (default: run until SIGINT/SIGTERM)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--restart-ms", f.restart_ms, "--all: restart a dead service after this long (0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}));
  app.add_option(
      "--placement", f.placements,
      "--all: pin a service, NAME=CPULIST (repeatable, e.g. frontend=0-1,3); wins over the topology's cpus:");
  app.add_option(
      "--placement-mechanism", f.placement_mechanism,
      "--all: affinity (inherited from the forked child, default) or cgroup (a cgroup v2 cpuset per service)");
  app.add_option(
      "--counters", f.counters,
      "--all: off | process (perf_event group per service, opened before exec, default) | cpu (per placed CPU)");
  app.add_option("--stores", f.stores,
                 "real | simulated | auto: store stages with an op run against real memcached/Redis/PostgreSQL, or "
                 "wait their simulated latency (auto: real when the servers are installed, --all; a single service: "
                 "real when --store-addr is given). docs/stores.md")
      ->check(CLI::IsMember({"real", "simulated", "auto"}));
  app.add_option("--store-addr", f.store_addrs,
                 "Where a store is, SYSTEM=HOST:PORT (repeatable; SYSTEM memcached, redis, mongodb; loopback or "
                 "198.18.0.0/15)");
  app.add_option("--store-cpus", f.store_cpus, "--all: pin the store servers to these CPUs (store_servers wins)");
  app.add_option("--work", f.work,
                 "real | simulated: work stages run their real work (default), or the busy loop each keeps in "
                 "simulated_cpu (a stage without one runs its real work). docs/microservices.md")
      ->check(CLI::IsMember({"real", "simulated"}));
  app.add_option("--cpus", f.cpus, "Single-service mode: pin every thread of the service to these CPUs");
  app.add_option("--merge-traces", f.merge_dir, "Merge DIR/*.spans.jsonl into Jaeger + OTLP JSON and exit");
  app.add_option("--decode-spill", f.spill_path,
                 "Convert the binary span spill a killed service left (DIR/.NAME.spans.spill.tmp.XXXXXX) to "
                 "DIR/NAME.spans.jsonl and exit");
  app.add_option("--check-topology", f.check_path,
                 "Validate a topology JSON (FILE, or - for stdin): print it normalised on stdout and exit 0, or the "
                 "error on stderr and exit 1. python -m tailscope.topology validates through this");
  app.add_option("--origin", f.check_origin, "--check-topology: the name errors give the input (default: FILE)");
  app.add_option("--ping", f.ping.port, "Ping client: __ping calls to the service on --ping-host:PORT, then exit")
      ->check(CLI::Range(1, 65535));
  app.add_option("--ping-host", f.ping_host, "--ping: the service's address (default 127.0.0.1; or 198.18.0.0/15)");
  app.add_option("--ping-calls", f.ping.calls, "--ping: measured calls")->check(CLI::Range(1, 100'000'000));
  app.add_option("--ping-warmup", f.ping.warmup_calls, "--ping: calls before measuring")
      ->check(CLI::Range(0, 100'000'000));
  app.add_option("--ping-concurrency", f.ping.concurrency, "--ping: calls in flight at once")
      ->check(CLI::Range(1, 4096));
  app.add_option("--ping-pid", f.ping.server_pid, "--ping: the service's pid, to measure its CPU too")
      ->check(CLI::Range(1, 1 << 22));
  CLI11_PARSE(app, argc, argv);
  if (f.list_models) {
    for (const std::string& name : model_names()) std::cout << name << '\n';
    return 0;
  }
  try {
    if (f.ping.port > 0) {  // the transport alone
      f.ping.host = f.ping_host;
      f.ping.link_delays = LinkDelayTable::parse(f.link_delay_text);
      f.ping.connections = f.runtime.channel_connections;
      if (f.timeout_ms > 0) f.ping.timeout_ns = static_cast<int64_t>(f.timeout_ms * 1e6);
      write_result(ping_result_document(f.ping, argc, argv), f.out);
      return 0;
    }
    if (!f.check_path.empty()) {
      std::cout << check_topology_input(f.check_path, f.check_origin).dump(1) << std::endl;
      return 0;
    }
    if (!f.spill_path.empty()) {
      std::cout << decode_span_spill_file(f.spill_path).dump() << std::endl;
      return 0;
    }
    if (!f.merge_dir.empty()) {
      std::cout << merge_span_files(f.merge_dir).dump() << std::endl;
      return 0;
    }
    check_service_options(f, workers->count() > 0);
    return f.all ? run_supervisor(f, argc, argv) : run_service_process(f, argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "tailscope-svc: " << e.what() << std::endl;
    return 1;
  }
}
