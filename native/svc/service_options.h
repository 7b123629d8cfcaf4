// What tailscope-svc's two service modes are told on the command line: one
// service in this process (--service, svc/service_process.h), or every
// service of a topology, one child process each, under the supervisor
// (--all, svc/supervisor.h), which passes the one-service form of these
// options on to each child.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "svc/runtime.h"

namespace tailscope::svc {

struct ServiceOptions {
  std::string topology;  // --topology FILE.json
  std::string service;   // --service NAME ("" with --all)
  bool all = false;      // --all: the supervisor
  std::string model = "coroutine";
  int port = -1;           // --port (--all: the front's); -1: the topology's, or ephemeral
  int listen_fd = -1;      // --listen-fd: a listener inherited from the supervisor
  std::string ports_text;  // --ports NAME=PORT,... (svc/peer_addresses.h)
  std::string traces_dir;  // --traces DIR ("" = no span files)
  std::string out;         // --out FILE ("" = stdout)
  double trace_sample = 0.0;
  double duration_s = 0.0;  // 0: until SIGINT/SIGTERM
  int64_t restart_ms = 1000;
  RuntimeOptions runtime;     // --workers, --loops, --queue, --connections
  double timeout_ms = 0;      // 0: the topology's call_timeout_ms
  double pool_idle_s = 10.0;  // --pool-idle-s: RuntimeOptions::pool_idle_timeout_ns
  // Placement and counters (docs/microservices.md, docs/prof.md).
  std::vector<std::string> placements;  // --placement NAME=CPULIST, repeatable (--all)
  std::string placement_mechanism = "affinity";
  std::string counters = "process";
  std::string cpus;           // --cpus LIST (single-service mode)
  std::string otlp_endpoint;  // live OTLP/HTTP export (otlp_exporter.h); "" = off
  size_t otlp_queue_spans = 1 << 16;
  // Addresses (docs/lab-hosts.md): where this service listens, where its peers are, link delays.
  std::string bind = "127.0.0.1";
  std::string peers_text, link_delay_text, deployment;
  std::vector<std::string> allow_cidrs;  // --allow-cidr CIDR, repeatable: added to the allow-list (net/allow_list.h)
  // Real stores (docs/stores.md).
  std::string stores = "auto";           // --stores real | simulated | auto
  std::vector<std::string> store_addrs;  // --store-addr SYSTEM=HOST:PORT, repeatable
  std::string store_cpus;                // --store-cpus LIST (--all)
  // Work stages (svc/work_stage.h): real work, or the busy loop each keeps in `simulated_cpu`.
  std::string work = "real";  // --work real | simulated
};

// Checks every option before any process or thread starts, so bad input
// exits 1 with nothing started and nothing written; throws
// std::invalid_argument naming the flag. `workers_given`: --workers was on
// the command line (it must then fit the machine, svc/thread_limit.h).
// The --allow-cidr blocks are declared here (net::declare_allowed_cidr), first:
// every address below is judged against the policy they complete.
void check_service_options(const ServiceOptions& options, bool workers_given);

}  // namespace tailscope::svc
