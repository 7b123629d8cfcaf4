#include "svc/service_options.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "core/affinity.h"
#include "net/allow_list.h"
#include "prof/counters.h"
#include "prof/placement.h"
#include "svc/link_delay.h"
#include "svc/otlp_exporter.h"
#include "svc/peer_addresses.h"
#include "svc/stores/store_set.h"
#include "svc/thread_limit.h"
#include "svc/topology.h"

namespace tailscope::svc {
namespace {

// Threads a service process starts besides its pool: IO dispatchers, the
// timer, the resource sampler, channel readers (a few per downstream service).
constexpr int64_t kOwnThreadsPerProcess = 32;

// --workers N must fit the machine before any process or thread starts
// (thread_limit.h); under --all every service whose model is a pool gets N.
void check_workers(const ServiceOptions& o) {
  const Topology topology = load_topology_file(o.topology);
  int64_t pools = 0;
  for (const auto& [name, s] : topology.services) {
    if (!o.all && name != o.service) continue;
    const std::string model = s.model.empty() ? o.model : s.model;
    pools += model == "pool-blocking" || model == "pool-callback";
  }
  check_workers_fit(static_cast<int64_t>(o.runtime.workers), std::max<int64_t>(pools, 1), kOwnThreadsPerProcess);
}

}  // namespace

void check_service_options(const ServiceOptions& o, bool workers_given) {
  // CLI11's Range lets NaN through (every comparison with it is false).
  for (const auto& [name, v] : {std::pair{"--duration", o.duration_s}, std::pair{"--timeout-ms", o.timeout_ms},
                                std::pair{"--trace-sample", o.trace_sample}})
    if (!std::isfinite(v)) throw std::invalid_argument(std::string(name) + ": not a finite number");
  if (o.topology.empty()) throw std::invalid_argument("--topology FILE.json is required");
  if (o.all && !o.allow_cidrs.empty())
    throw std::invalid_argument("--allow-cidr is for one service (--service NAME): with --all every service runs here");
  for (const std::string& block : o.allow_cidrs) net::declare_allowed_cidr(net::parse_cidr(block, "--allow-cidr"));
  if (o.stores != "real" && o.stores != "simulated" && o.stores != "auto")
    throw std::invalid_argument("--stores: real, simulated or auto (got '" + o.stores + "')");
  for (const auto& a : o.store_addrs) stores::parse_store_addr(a);  // throws naming the item
  if (o.work != "real" && o.work != "simulated")
    throw std::invalid_argument("--work: real or simulated (got '" + o.work + "')");
  if (!o.store_cpus.empty()) {
    if (!o.all) throw std::invalid_argument("--store-cpus needs --all (the supervisor starts the stores)");
    try {
      parse_cpu_list(o.store_cpus);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--store-cpus: ") + e.what());
    }
  }
  if (!o.all && o.stores == "real" && o.store_addrs.empty())
    throw std::invalid_argument(
        "--stores real for one service needs --store-addr SYSTEM=HOST:PORT (it starts no store)");
  if (!o.otlp_endpoint.empty()) {
    parse_otlp_endpoint(o.otlp_endpoint);  // refuses a bad or non-lab endpoint before anything starts
    if (o.trace_sample <= 0)
      throw std::invalid_argument("--otlp-endpoint exports sampled spans: give --trace-sample > 0");
  }
  make_model(o.model);  // validates the name before anything starts
  if (o.all == !o.service.empty()) throw std::invalid_argument("give exactly one of --service NAME and --all");
  if (workers_given) check_workers(o);
  prof::parse_placement_mechanism(o.placement_mechanism);  // bad values fail before anything starts
  prof::parse_counter_mode(o.counters);
  if (!o.all && !o.placements.empty())
    throw std::invalid_argument("--placement needs --all (one service: --cpus LIST)");
  if (o.all && !o.cpus.empty()) throw std::invalid_argument("--cpus is for one service; with --all use --placement");
  // Addresses: every one passes the allow-list before anything starts.
  if (o.all) {
    for (const auto& [flag, text] : {std::pair{"--peers", &o.peers_text}, std::pair{"--link-delay", &o.link_delay_text},
                                     std::pair{"--ports", &o.ports_text}})
      if (!text->empty())
        throw std::invalid_argument(std::string(flag) +
                                    " is for one service; with --all the supervisor sets it (--deployment: from the "
                                    "file's hosts and links)");
    if (o.bind != "127.0.0.1")
      throw std::invalid_argument("--bind is for one service; with --all give a --deployment (its hosts' addresses)");
  } else {
    if (!o.deployment.empty()) throw std::invalid_argument("--deployment needs --all");
    if (canonical_address(o.bind).empty())
      throw std::invalid_argument("--bind: '" + o.bind + "' is not a numeric IPv4/IPv6 address");
    net::check_allowed_target(o.bind, "--bind");
    parse_peers(o.peers_text);
    LinkDelayTable::parse(o.link_delay_text);
  }
}

}  // namespace tailscope::svc
