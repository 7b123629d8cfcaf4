#include "svc/service_process.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/affinity.h"
#include "core/clock.h"
#include "core/proc_sampler.h"
#include "core/result_writer.h"
#include "core/rusage.h"
#include "core/stop_signals.h"
#include "net/socket.h"
#include "prof/placement.h"
#include "svc/link_delay.h"
#include "svc/otlp_exporter.h"
#include "svc/peer_addresses.h"
#include "svc/runtime.h"
#include "svc/tracer.h"

namespace tailscope::svc {

using nlohmann::json;

int run_service_process(const ServiceOptions& f, int argc, char** argv) {
  const Topology topology = load_topology_file(f.topology);
  const Service& service = topology.service(f.service);
  std::map<std::string, int> ports = parse_ports(f.ports_text);
  RuntimeOptions options = f.runtime;
  options.model = f.model;
  // --timeout-ms used to be parsed and passed to children but never applied: every call
  // waited the topology's call_timeout_ms.
  if (f.timeout_ms > 0) options.call_timeout_ns = static_cast<int64_t>(f.timeout_ms * 1e6);
  options.pool_idle_timeout_ns = static_cast<int64_t>(f.pool_idle_s * 1e9);
  json peers_json = json::object(), peers_resolved_json = json::object();
  for (const auto& [name, at] : parse_peers(f.peers_text)) {
    if (!topology.services.count(name))
      throw std::invalid_argument("--peers: the topology has no service '" + name + "'");
    if (ports.count(name)) throw std::invalid_argument("--peers: '" + name + "' is in --ports too: give it once");
    ports[name] = at.port;
    options.peer_hosts[name] = at.host;
    peers_json[name] = address_port_text(at.host, at.port);
    // What a name resolved to at start, and which rule let it through (a reconnect resolves again).
    peers_resolved_json[name] = {{"host", at.host}, {"address", at.address}, {"rule", at.rule}};
    if (at.host != at.address)
      std::cerr << "tailscope-svc: peer " << name << ": " << at.host << " resolved to " << at.address << " (" << at.rule
                << ")\n";
  }
  options.link_delays = LinkDelayTable::parse(f.link_delay_text);
  // One service starts no store: it reaches those --store-addr names (the
  // supervisor passes them). auto: real when addresses are given.
  json stores_json = json::object();
  for (const auto& a : f.store_addrs) {
    auto [system, address] = stores::parse_store_addr(a);
    options.store_addresses[system] = address;
    stores_json[stores::system_name(system)] = address_port_text(address.host, address.port);
  }
  options.real_stores = f.stores == "real" || (f.stores == "auto" && !options.store_addresses.empty());
  options.simulated_work = f.work == "simulated";
  int fd = f.listen_fd;
  bool own_fd = false;
  if (fd < 0) {
    const int port = f.port >= 0 ? f.port : service.port;
    fd = net::make_listener(f.bind, port);
    own_fd = true;
  }
  ports[f.service] = net::bound_port(fd);
  if (!f.cpus.empty()) {
    // Before any thread starts: every thread created from here on inherits it.
    std::vector<int> cpus;
    try {
      cpus = parse_cpu_list(f.cpus);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--cpus: ") + e.what());
    }
    prof::check_cpus_allowed(cpus, allowed_cpus(), "--cpus " + f.cpus);
    if (const int err = prof::set_process_affinity(cpus))
      throw std::runtime_error("--cpus " + f.cpus + ": sched_setaffinity: " + std::strerror(err));
  }
  Tracer::configure(f.trace_sample);
  // The stop signals and the sampling switch (tracer.h): taken by the wait below, never delivered.
  const sigset_t set = signal_set({SIGINT, SIGTERM, kPauseSamplingSignal, kResumeSamplingSignal});
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // every thread started from here on inherits the mask
  std::unique_ptr<SpanSpiller> spiller;       // spans go to disk during the run: memory stays bounded
  if (!f.traces_dir.empty()) spiller = std::make_unique<SpanSpiller>(f.traces_dir, f.service);
  ResourceSampler sampler(getpid(), 200);
  sampler.start();
  TimerService timers;
  std::unique_ptr<OtlpExporter> exporter;
  if (!f.otlp_endpoint.empty()) {
    OtlpExporterOptions export_options;
    export_options.queue_capacity_spans = f.otlp_queue_spans;
    exporter = std::make_unique<OtlpExporter>(parse_otlp_endpoint(f.otlp_endpoint), export_options);
  }
  ServiceInstance instance(topology, f.service, ports, options, fd, timers);
  if (exporter) {
    // Only now: nothing may hold a pointer to the exporter if the instance failed to build.
    exporter->start();
    Tracer::set_sink(exporter.get());
  }
  take_pending_sampling_signals();  // a pause sent while this service started holds from its first request
  instance.start();
  std::cout
      << json{{"listening", ports[f.service]}, {"address", f.bind}, {"service", f.service}, {"pid", getpid()}}.dump()
      << std::endl;
  const int64_t started = monotonic_ns();
  const int64_t deadline = f.duration_s > 0 ? started + static_cast<int64_t>(f.duration_s * 1e9) : 0;
  wait_for_stop_switching_sampling(set, deadline);
  instance.stop();
  timers.stop();
  sampler.stop();
  if (exporter) {
    Tracer::set_sink(nullptr);  // every recording thread has stopped
    exporter->stop();
  }
  const double ran_s = (monotonic_ns() - started) / 1e9;

  json doc = new_result_document("tailscope-svc", argc, argv);
  json result = instance.result();
  result["cpu"] = process_usage_json(read_process_usage());
  result["resources"] = sampler.summary();
  result["ran_s"] = ran_s;
  result["address"] = f.bind;
  result["port"] = ports[f.service];
  if (exporter) result["otlp_export"] = exporter->stats();
  doc["config"] = {{"topology", f.topology},
                   {"service", f.service},
                   {"model", options.model},
                   {"trace_sample", f.trace_sample},
                   {"call_timeout_ms", instance.runtime().call_timeout_ns() / 1e6},
                   {"port", ports[f.service]},
                   {"bind", f.bind},
                   {"peers", peers_json},
                   {"peers_resolved", peers_resolved_json},
                   {"stores", f.stores},
                   {"store_addresses", stores_json},
                   {"work", f.work},
                   {"link_delays", options.link_delays.to_json()},
                   {"workers", f.runtime.workers},
                   {"loops", f.runtime.loops},
                   {"pool_idle_s", f.pool_idle_s}};
  doc["services"] = {{f.service, result}};
  doc["measurements"] = json::array();
  doc["unavailable"] = json::array();
  if (!f.traces_dir.empty()) {
    // Every recording thread has stopped. The spans were spilled in binary
    // during the run and are encoded to NDJSON now (tracer.h, SpanSpiller).
    const SpanSpiller::Summary spilled = spiller->finish();
    doc["tracing"] = {{"spans", spilled.spans},
                      {"dropped_spans", Tracer::dropped()},
                      {"spans_encoded", spilled.spans_encoded},
                      {"encode_at_stop_ms", static_cast<double>(spilled.encode_at_stop_ns) / 1e6}};
  }
  write_result(doc, f.out);
  if (own_fd) ::close(fd);
  return 0;
}

}  // namespace tailscope::svc
