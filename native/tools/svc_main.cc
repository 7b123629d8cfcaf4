// tailscope-svc: runs services of a topology under one concurrency model.
//
//   tailscope-svc --topology g.json --service text-service --model coroutine --port 9001 --ports a=9002,...
//   tailscope-svc --topology g.json --all --model pool-callback --port 8080 --traces DIR --out result.json
//   tailscope-svc --merge-traces DIR
//   tailscope-svc --list-models   (the --model names, one per line)
//   tailscope-svc --topology g.json --all --deployment d.json   (services on lab hosts; docs/lab-hosts.md)
//
// --all is a supervisor: it opens one loopback listener per service, starts
// one child process per service (this executable with --service and the
// inherited listener), prints {"listening": FRONT_PORT, "ports": {...},
// "pids": {...}} once every child is up, restarts a child that dies (after
// --restart-ms, on the same listener, so callers reconnect), and on
// SIGINT/SIGTERM (or after --duration) stops all children, merges their
// result documents and span files, and writes one result document.
//
// With --deployment each service runs on its host: the supervisor creates the
// service's listener *inside* the host's network namespace (setns there and
// back, on its one thread) so the port — ephemeral or not — is known before
// any child starts and survives a restart, exactly as without a deployment;
// the child then enters the same namespace (setns after fork, before exec) so
// its outgoing calls leave from that host. Entering in the child alone would
// lose the first property; creating the listener alone would send the calls
// from the supervisor's namespace.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "core/affinity.h"
#include "core/clock.h"
#include "core/proc_sampler.h"
#include "core/result_writer.h"
#include "core/rusage.h"
#include "core/stop_signals.h"
#include "net/allow_list.h"
#include "net/socket.h"
#include "prof/counters.h"
#include "prof/placement.h"
#include "svc/deployment.h"
#include "svc/link_delay.h"
#include "svc/otlp_exporter.h"
#include "svc/ping_client.h"
#include "svc/runtime.h"
#include "svc/thread_limit.h"
#include "svc/tracer.h"

namespace {

using nlohmann::json;
using namespace tailscope;
using namespace tailscope::svc;

struct Flags {
  std::string topology, service, model = "coroutine", ports_text, traces_dir, out, merge_dir, parts_dir;
  std::string check_path, check_origin;
  bool all = false;
  int port = -1, listen_fd = -1;
  double trace_sample = 0.0, duration_s = 0.0;
  int64_t restart_ms = 1000;
  RuntimeOptions runtime;
  double timeout_ms = 0;
  double pool_idle_s = 10.0;  // --pool-idle-s: RuntimeOptions::pool_idle_timeout_ns
  // Placement and counters (docs/microservices.md, docs/prof.md).
  std::vector<std::string> placements;  // --placement NAME=CPULIST, repeatable (--all)
  std::string placement_mechanism = "affinity";
  std::string counters = "process";
  std::string cpus;  // --cpus LIST (single-service mode)
  PingOptions ping;
  std::string otlp_endpoint;  // live OTLP/HTTP export (otlp_exporter.h); "" = off
  size_t otlp_queue_spans = 1 << 16;
  // Addresses (docs/lab-hosts.md): where this service listens, where its peers are, link delays.
  std::string bind = "127.0.0.1";
  std::string peers_text, link_delay_text, deployment;
  std::string ping_host = "127.0.0.1";
};

// "ADDR:PORT" or "[V6ADDR]:PORT" → (canonical address, port); `what` names the input in errors.
std::pair<std::string, int> parse_address_port(const std::string& text, const std::string& what) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument(what + ": expected ADDR:PORT, got '" + text + "'");
  std::string address = text.substr(0, colon);
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']')
    address = address.substr(1, address.size() - 2);
  const std::string port = text.substr(colon + 1);
  int value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535)
    throw std::invalid_argument(what + ": '" + text + "': the port must be an integer in 1 … 65535");
  if (canonical_address(address).empty())
    throw std::invalid_argument(what + ": '" + address + "' is not a numeric IPv4/IPv6 address");
  net::check_allowed_target(address, what);
  return {canonical_address(address), value};
}

std::string address_port_text(const std::string& address, int port) {
  std::string out;
  const bool v6 = address.find(':') != std::string::npos;
  if (v6) out += '[';
  out += address;
  if (v6) out += ']';
  out += ':';
  out += std::to_string(port);
  return out;
}

// --peers NAME=ADDR:PORT,... → name → (address, port).
std::map<std::string, std::pair<std::string, int>> parse_peers(const std::string& text) {
  std::map<std::string, std::pair<std::string, int>> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::invalid_argument("--peers: expected NAME=ADDR:PORT, got '" + item + "'");
    const std::string name = item.substr(0, eq);
    if (out.count(name)) throw std::invalid_argument("--peers: '" + name + "' is given twice");
    out[name] = parse_address_port(item.substr(eq + 1), "--peers " + name);
  }
  return out;
}

std::map<std::string, int> parse_ports(const std::string& text) {
  std::map<std::string, int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("--ports: expected NAME=PORT, got '" + item + "'");
    const std::string port = item.substr(eq + 1);
    int value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535)
      throw std::invalid_argument("--ports: '" + item + "': the port must be an integer in 1 … 65535");
    out[item.substr(0, eq)] = value;
  }
  return out;
}

// Threads a service process starts besides its pool: IO dispatchers, the
// timer, the resource sampler, channel readers (a few per downstream service).
constexpr int64_t kOwnThreadsPerProcess = 32;

// --workers N must fit the machine before any process or thread starts
// (thread_limit.h); under --all every service whose model is a pool gets N.
void check_workers(const Flags& f) {
  const Topology topology = load_topology_file(f.topology);
  int64_t pools = 0;
  for (const auto& [name, s] : topology.services) {
    if (!f.all && name != f.service) continue;
    const std::string model = s.model.empty() ? f.model : s.model;
    pools += model == "pool-blocking" || model == "pool-callback";
  }
  check_workers_fit(static_cast<int64_t>(f.runtime.workers), std::max<int64_t>(pools, 1), kOwnThreadsPerProcess);
}

// ---- Per-service placement and counters (--all). Kept apart from the
// supervisor's own logic: spawn() calls them at three points (in the child
// before exec, in the parent after fork, and on each tick).

// What the supervisor applies to and learns about one service.
struct ServiceProfile {
  std::vector<int> cpus;  // empty: no placement
  prof::ThreadAffinityObserver observer;
  std::vector<prof::CounterSet> counter_sets;  // one per incarnation (process mode) or one (cpu mode)
  std::string counters_reason;                 // why counting could not start, "" if it did
};

struct Profiling {
  prof::PlacementMechanism mechanism = prof::PlacementMechanism::kAffinity;
  prof::CounterMode counter_mode = prof::CounterMode::kProcess;
  std::vector<prof::EventSpec> events;
  int pipeline_width = 4;
  std::optional<prof::CgroupCpuset> cgroup;
  std::map<std::string, ServiceProfile> services;
};

// Validates every placement and counter flag before any process starts: bad
// input exits 1 with nothing started and nothing written.
// A deployment's cpus (the service's, else its host's) take the place of the
// topology's; --placement still wins over both.
Profiling prepare_profiling(const Flags& f, const Topology& topology, const Deployment* deployment) {
  Profiling p;
  p.mechanism = prof::parse_placement_mechanism(f.placement_mechanism);
  p.counter_mode = prof::parse_counter_mode(f.counters);
  std::map<std::string, std::string> topology_cpus;
  std::set<std::string> names;
  for (const auto& [name, s] : topology.services) {
    names.insert(name);
    const std::string cpus = deployment && !deployment->cpus_of(name).empty() ? deployment->cpus_of(name) : s.cpus;
    if (!cpus.empty()) topology_cpus[name] = cpus;
  }
  const auto placed = prof::resolve_placements(f.placements, topology_cpus, names, allowed_cpus());
  for (const auto& name : names) p.services[name].cpus = placed.count(name) ? placed.at(name) : std::vector<int>{};
  if (p.mechanism == prof::PlacementMechanism::kCgroup && !placed.empty()) {
    p.cgroup.emplace(prof::CgroupCpuset::create("tailscope-svc-" + std::to_string(getpid())));
    for (const auto& [name, cpus] : placed) p.cgroup->add_service(name, cpus);
  }
  if (p.counter_mode != prof::CounterMode::kOff) {
    const prof::CpuIdentity cpu = prof::read_cpu_identity();
    p.events = prof::event_table(cpu, prof::core_pmu_dir(), p.counter_mode == prof::CounterMode::kCpu);
    p.pipeline_width = prof::default_pipeline_width(cpu);
  }
  return p;
}

// In the forked child, before exec, while it has one thread: the affinity set
// here is inherited by every thread and process the service creates later.
void apply_placement_in_child(const Profiling& p, const ServiceProfile& s) {
  if (s.cpus.empty() || p.mechanism != prof::PlacementMechanism::kAffinity) return;
  if (prof::set_process_affinity(s.cpus) != 0) _exit(125);
}

// In the parent, after fork and before the child may exec: cgroup membership
// and the counter group (inherit + enable_on_exec), so no thread escapes.
void attach_profiling(Profiling& p, const std::string& service, pid_t pid) {
  ServiceProfile& s = p.services[service];
  if (p.cgroup && !s.cpus.empty()) p.cgroup->attach(service, pid);
  if (p.counter_mode == prof::CounterMode::kProcess) {
    s.counter_sets.push_back(prof::CounterSet::for_process(pid, p.events, true));
  } else if (p.counter_mode == prof::CounterMode::kCpu && s.counter_sets.empty()) {
    if (s.cpus.empty())
      s.counters_reason = "--counters cpu counts the CPUs a service is placed on; this service has no placement";
    else
      s.counter_sets.push_back(prof::CounterSet::for_cpus(s.cpus, p.events));
  }
}

// The per-service `placement` and `counters` sections of the --all document.
void add_profiling_sections(const Profiling& p, const std::string& service, json& out) {
  const ServiceProfile& s = p.services.at(service);
  out["placement"] = s.observer.to_json(s.cpus, prof::to_string(p.mechanism));
  json counters;
  if (p.counter_mode == prof::CounterMode::kOff) {
    counters = prof::counters_unavailable_json(p.counter_mode, "--counters off");
  } else if (s.counter_sets.empty()) {
    counters = prof::counters_unavailable_json(p.counter_mode, s.counters_reason);
  } else {
    std::vector<std::vector<prof::EventReading>> parts;
    for (const auto& set : s.counter_sets) parts.push_back(set.read());
    counters = prof::counters_json(p.counter_mode, prof::sum_readings(parts), p.pipeline_width);
    if (p.counter_mode == prof::CounterMode::kCpu)
      counters["note"] = "per-CPU counts include everything that ran on " + format_cpu_list(s.cpus);
  }
  // The service's own request counters live in the same object; these keys are new.
  if (!out.contains("counters") || !out["counters"].is_object()) out["counters"] = json::object();
  for (const auto& [key, value] : counters.items()) out["counters"][key] = value;
}

int run_one(const Flags& f, int argc, char** argv) {
  const Topology topology = load_topology_file(f.topology);
  const Service& service = topology.service(f.service);
  std::map<std::string, int> ports = parse_ports(f.ports_text);
  RuntimeOptions options = f.runtime;
  options.model = f.model;
  // --timeout-ms used to be parsed and passed to children but never applied: every call
  // waited the topology's call_timeout_ms.
  if (f.timeout_ms > 0) options.call_timeout_ns = static_cast<int64_t>(f.timeout_ms * 1e6);
  options.pool_idle_timeout_ns = static_cast<int64_t>(f.pool_idle_s * 1e9);
  json peers_json = json::object();
  for (const auto& [name, at] : parse_peers(f.peers_text)) {
    if (!topology.services.count(name))
      throw std::invalid_argument("--peers: the topology has no service '" + name + "'");
    if (ports.count(name)) throw std::invalid_argument("--peers: '" + name + "' is in --ports too: give it once");
    ports[name] = at.second;
    options.peer_hosts[name] = at.first;
    peers_json[name] = address_port_text(at.first, at.second);
  }
  options.link_delays = LinkDelayTable::parse(f.link_delay_text);
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
  const sigset_t set = signal_set({SIGINT, SIGTERM});
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
  instance.start();
  std::cout
      << json{{"listening", ports[f.service]}, {"address", f.bind}, {"service", f.service}, {"pid", getpid()}}.dump()
      << std::endl;
  const int64_t started = monotonic_ns();
  const int sig = wait_for_stop(set, f.duration_s > 0 ? started + static_cast<int64_t>(f.duration_s * 1e9) : 0);
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
                   {"link_delays", options.link_delays.to_json()},
                   {"workers", f.runtime.workers},
                   {"loops", f.runtime.loops},
                   {"pool_idle_s", f.pool_idle_s}};
  doc["services"] = {{f.service, result}};
  doc["measurements"] = json::array();
  doc["unavailable"] = json::array();
  if (!f.traces_dir.empty()) {
    const int64_t spans = spiller->finish();  // every recording thread has stopped
    doc["tracing"] = {{"spans", spans}, {"dropped_spans", Tracer::dropped()}};
  }
  write_result(doc, f.out);
  if (own_fd) ::close(fd);
  (void)sig;
  return 0;
}

struct Child {
  std::string service;
  int listen_fd = -1;
  pid_t pid = -1;
  int64_t died_ns = 0;
  int restarts = 0;
  // Where it runs (--deployment; otherwise 127.0.0.1 in this namespace).
  std::string address = "127.0.0.1";
  std::string host;       // "" without a deployment
  std::string netns;      // "" = this namespace
  int netns_fd = -1;      // /run/netns/NAME, open (O_CLOEXEC); -1 = stay here
  std::string peer_args;  // --peers text ("" = --ports)
  LinkDelayTable link_delays;
};

pid_t spawn(const Flags& f, const Child& c, const std::string& ports_text, const std::string& self,
            Profiling& profiling) {
  const bool placed_peers = !c.peer_args.empty();
  std::vector<std::string> args = {self,
                                   "--topology",
                                   f.topology,
                                   "--service",
                                   c.service,
                                   "--model",
                                   f.model,
                                   "--listen-fd",
                                   std::to_string(c.listen_fd),
                                   "--bind",
                                   c.address,
                                   placed_peers ? "--peers" : "--ports",
                                   placed_peers ? c.peer_args : ports_text,
                                   "--trace-sample",
                                   std::to_string(f.trace_sample),
                                   "--out",
                                   f.parts_dir + "/" + c.service + ".result.json"};
  if (!f.traces_dir.empty()) args.insert(args.end(), {"--traces", f.traces_dir + "/parts"});
  if (f.runtime.workers) args.insert(args.end(), {"--workers", std::to_string(f.runtime.workers)});
  if (f.runtime.loops) args.insert(args.end(), {"--loops", std::to_string(f.runtime.loops)});
  args.insert(args.end(), {"--queue", std::to_string(f.runtime.queue_capacity), "--connections",
                           std::to_string(f.runtime.channel_connections)});
  if (f.timeout_ms > 0) args.insert(args.end(), {"--timeout-ms", std::to_string(f.timeout_ms)});
  args.insert(args.end(), {"--pool-idle-s", std::to_string(f.pool_idle_s)});
  if (!c.link_delays.empty()) args.insert(args.end(), {"--link-delay", c.link_delays.to_flag()});
  prof::ChildStartGate gate;  // the child execs only once its counters and cgroup are in place
  if (!f.otlp_endpoint.empty())
    args.insert(args.end(),
                {"--otlp-endpoint", f.otlp_endpoint, "--otlp-queue-spans", std::to_string(f.otlp_queue_spans)});
  const pid_t pid = fork();
  if (pid == 0) {
    if (!gate.wait_in_child()) _exit(126);
    // Into the service's lab host: every socket it opens from now on (its
    // calls to peers) belongs to that namespace. Its listener already does.
    if (c.netns_fd >= 0 && ::setns(c.netns_fd, CLONE_NEWNET) != 0) _exit(124);
    apply_placement_in_child(profiling, profiling.services.at(c.service));
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    ::fcntl(c.listen_fd, F_SETFD, 0);  // this child's listener survives exec; the others do not
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, STDOUT_FILENO);  // the readiness line is the parent's to print
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(self.c_str(), argv.data());
    _exit(127);
  }
  if (pid > 0) {
    try {
      attach_profiling(profiling, c.service, pid);
    } catch (...) {
      ::kill(pid, SIGKILL);  // never an orphan: the gate is closed, the child would exit anyway
      ::waitpid(pid, nullptr, 0);
      throw;
    }
    gate.release();
  }
  return pid;
}

// /run/netns/NAME, opened (O_CLOEXEC); the error names the host and says what to do.
int open_netns(const std::string& host, const std::string& netns) {
  const std::string path = "/run/netns/" + netns;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::invalid_argument("deployment host '" + host + "': network namespace " + path + ": " +
                                std::strerror(errno) + " (make the lab hosts first: tailscope hosts up)");
  return fd;
}

// Runs fn with this thread inside the namespace behind ns_fd (-1: here) and
// comes back. A socket keeps the namespace it was created in.
int in_netns(int ns_fd, const std::string& name, const std::function<int()>& fn) {
  if (ns_fd < 0) return fn();
  const int home = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) throw std::runtime_error(std::string("/proc/self/ns/net: ") + std::strerror(errno));
  if (::setns(ns_fd, CLONE_NEWNET) != 0) {
    const int err = errno;
    ::close(home);
    throw std::runtime_error("entering network namespace '" + name + "': " + std::strerror(err) +
                             (err == EPERM ? " (lab hosts need root)" : ""));
  }
  struct Back {
    int fd;
    ~Back() {
      if (::setns(fd, CLONE_NEWNET) != 0) std::abort();  // never go on in the wrong namespace
      ::close(fd);
    }
  } back{home};
  return fn();
}

// How often the supervisor looks at its children between signals: the
// placement observer's sampling period and a dead child's detection delay.
constexpr int64_t kSupervisorTickNs = 200'000'000;

int run_all(const Flags& flags, int argc, char** argv) {
  Flags f = flags;
  const Topology topology = load_topology_file(f.topology);
  std::optional<Deployment> deployment;
  std::map<std::string, int> netns_fds;  // namespace name → open fd
  if (!f.deployment.empty()) {
    deployment = load_deployment_file(f.deployment, topology);
    for (const auto& [_, h] : deployment->hosts)
      if (h.netns && !netns_fds.count(*h.netns)) netns_fds[*h.netns] = open_netns(h.name, *h.netns);
  }
  Profiling profiling = prepare_profiling(f, topology, deployment ? &*deployment : nullptr);
  std::vector<Child> children;
  std::map<std::string, int> ports;
  for (const auto& name : topology.start_order()) {
    Child c;
    c.service = name;
    const bool front = topology.front && topology.front->service == name;
    int port = front && f.port >= 0 ? f.port : 0;
    if (deployment) {
      const DeploymentHost& h = deployment->host_of(name);
      c.host = h.name;
      c.address = h.address;
      if (h.netns) {
        c.netns = *h.netns;
        c.netns_fd = netns_fds.at(c.netns);
      }
      if (deployment->services.at(name).port > 0) port = deployment->services.at(name).port;
      c.link_delays = deployment->link_delays_for(h.name);
    }
    c.listen_fd = in_netns(c.netns_fd, c.netns, [&] { return net::make_listener(c.address, port); });
    ports[name] = net::bound_port(c.listen_fd);
    children.push_back(c);
  }
  std::string ports_text;
  for (const auto& [n, p] : ports) ports_text += (ports_text.empty() ? "" : ",") + n + "=" + std::to_string(p);
  json addresses = json::object();
  for (const auto& c : children) addresses[c.service] = c.address;
  if (deployment) {
    // Every service calls its peers where they are: ADDR:PORT of their hosts.
    std::string peers;
    for (const auto& c : children)
      peers += (peers.empty() ? "" : ",") + c.service + "=" + address_port_text(c.address, ports[c.service]);
    for (auto& c : children) c.peer_args = peers;
  }
  // Only now, when nothing can fail on bad input any more: the scratch folder.
  char tmpl[] = "/tmp/tailscope-svc-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("cannot create a temporary directory");
  f.parts_dir = tmpl;
  if (!f.traces_dir.empty()) ensure_directory(f.traces_dir + "/parts");
  const sigset_t set = signal_set({SIGINT, SIGTERM, SIGCHLD});
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) throw std::runtime_error("cannot find /proc/self/exe");
  self[len] = '\0';
  for (auto& c : children) c.pid = spawn(f, c, ports_text, self, profiling);
  // Ready: every listener exists already, so callers can connect at once.
  json pids = json::object();
  for (const auto& c : children) pids[c.service] = c.pid;
  const int front_port = topology.front ? ports[topology.front->service] : -1;
  const json front_address = topology.front ? json(addresses[topology.front->service]) : json();
  std::cout << json{{"listening", front_port},
                    {"front_address", front_address},
                    {"ports", ports},
                    {"addresses", addresses},
                    {"pids", pids},
                    {"pid", getpid()}}
                   .dump()
            << std::endl;
  const int64_t started = monotonic_ns();
  const int64_t deadline = f.duration_s > 0 ? started + static_cast<int64_t>(f.duration_s * 1e9) : 0;
  json restarts = json::array();
  for (;;) {
    const int sig = wait_for_stop(set, deadline, kSupervisorTickNs);
    // Every tick: which CPUs each thread may use (short-lived std::async threads included).
    for (const auto& c : children)
      if (c.pid > 0) profiling.services[c.service].observer.sample(c.pid);
    // Reap and restart children that died (a fault injected by a test, a crash).
    int status = 0;
    pid_t dead;
    while ((dead = ::waitpid(-1, &status, WNOHANG)) > 0)
      for (auto& c : children)
        if (c.pid == dead) {
          c.pid = -1;
          c.died_ns = monotonic_ns();
          restarts.push_back({{"service", c.service},
                              {"at_s", (c.died_ns - started) / 1e9},
                              {"status", WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                                             : "exit " + std::to_string(WEXITSTATUS(status))}});
        }
    if (sig == SIGINT || sig == SIGTERM || (deadline && monotonic_ns() >= deadline)) break;
    for (auto& c : children)
      if (c.pid < 0 && f.restart_ms > 0 && monotonic_ns() - c.died_ns >= f.restart_ms * 1'000'000) {
        c.pid = spawn(f, c, ports_text, self, profiling);
        ++c.restarts;
      }
  }
  // Stop: SIGTERM everyone, wait up to 5 s, then SIGKILL the stragglers.
  for (auto& c : children)
    if (c.pid > 0) ::kill(c.pid, SIGTERM);
  const int64_t kill_at = monotonic_ns() + 5'000'000'000;
  for (auto& c : children) {
    while (c.pid > 0) {
      int status = 0;
      const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
      if (r == c.pid || r < 0) {
        c.pid = -1;
        break;
      }
      if (monotonic_ns() > kill_at) ::kill(c.pid, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const double ran_s = (monotonic_ns() - started) / 1e9;
  json doc = new_result_document("tailscope-svc", argc, argv);
  doc["config"] = {{"topology", f.topology},
                   {"mode", "all"},
                   {"model", f.model},
                   {"trace_sample", f.trace_sample},
                   {"front_port", front_port},
                   {"front_address", front_address},
                   {"ports", ports},
                   {"addresses", addresses},
                   {"workers", f.runtime.workers},
                   {"loops", f.runtime.loops},
                   {"queue_capacity", f.runtime.queue_capacity},
                   {"pool_idle_s", f.pool_idle_s},
                   {"restart_ms", f.restart_ms},
                   {"placement_mechanism", prof::to_string(profiling.mechanism)},
                   {"counters", prof::to_string(profiling.counter_mode)}};
  json services = json::object();
  json unavailable = json::array();
  double cpu_s = 0;
  int64_t threads = 0, ctx_switches = 0;
  for (const auto& c : children) {
    std::ifstream in(f.parts_dir + "/" + c.service + ".result.json");
    json part = json::parse(in, nullptr, false);
    if (part.is_discarded() || !part.contains("services")) {
      unavailable.push_back(
          {{"name", c.service}, {"variant", f.model}, {"reason", "the service wrote no result document"}});
      continue;
    }
    json s = part["services"][c.service];
    s["restarts"] = c.restarts;
    // Where it ran, and the link table it applied (the child's own view, from its --link-delay).
    s["host"] = c.host.empty() ? json() : json(c.host);
    s["netns"] = c.netns.empty() ? json() : json(c.netns);
    s["address"] = c.address;
    s["port"] = ports[c.service];
    if (!s.contains("link_delays")) s["link_delays"] = c.link_delays.to_json();
    add_profiling_sections(profiling, c.service, s);
    cpu_s += s["cpu"].value("user_s", 0.0) + s["cpu"].value("sys_s", 0.0);
    ctx_switches +=
        s["cpu"].value("voluntary_ctx_switches", int64_t{0}) + s["cpu"].value("involuntary_ctx_switches", int64_t{0});
    threads += s["resources"].value("process", json::object()).value("threads_max", 0);
    services[c.service] = s;
    std::remove((f.parts_dir + "/" + c.service + ".result.json").c_str());
  }
  ::rmdir(f.parts_dir.c_str());
  doc["services"] = services;
  doc["totals"] = {{"cpu_s", cpu_s},
                   {"threads_max_sum", threads},
                   {"ctx_switches", ctx_switches},
                   {"ran_s", ran_s},
                   {"restarts", restarts}};
  if (deployment) {
    json hosts = json::object();
    for (const auto& [name, h] : deployment->hosts)
      hosts[name] = {{"netns", h.netns ? json(*h.netns) : json()},
                     {"address", h.address},
                     {"cpus", h.cpus.empty() ? json() : json(h.cpus)}};
    doc["deployment"] = {
        {"file", f.deployment}, {"name", deployment->name}, {"hosts", hosts}, {"links", deployment->links_json()}};
  }
  if (!f.otlp_endpoint.empty()) {
    // Every service's export counters summed: what reached the backend, what was dropped and why.
    json sum = {{"endpoint", f.otlp_endpoint}, {"http_statuses", json::object()}, {"last_error", nullptr}};
    for (const auto& [name, s] : services.items()) {
      if (!s.contains("otlp_export")) continue;
      for (const auto& [key, v] : s["otlp_export"].items()) {
        if (v.is_number_integer() && key != "queue_capacity_spans") {
          sum[key] = sum.value(key, int64_t{0}) + v.get<int64_t>();
        } else if (key == "http_statuses") {
          for (const auto& [code, n] : v.items()) sum[key][code] = sum[key].value(code, int64_t{0}) + n.get<int64_t>();
        } else if (key == "last_error" && v.is_string() && sum[key].is_null()) {
          sum[key] = name + ": " + v.get<std::string>();
        }
      }
    }
    doc["otlp_export"] = sum;
  }
  if (topology.front && services.contains(topology.front->service))
    doc["totals"]["front"] = services[topology.front->service]["counters"];
  doc["measurements"] = json::array();
  doc["unavailable"] = unavailable;
  if (!f.traces_dir.empty()) {
    doc["tracing"] = merge_span_files(f.traces_dir + "/parts", f.traces_dir);
    doc["artifacts"] = {{"jaeger", f.traces_dir + "/traces.jaeger.json"},
                        {"otlp", f.traces_dir + "/traces.otlp.json"},
                        {"spans", f.traces_dir + "/parts"}};
  }
  write_result(doc, f.out);
  for (auto& c : children) ::close(c.listen_fd);
  for (const auto& [_, fd] : netns_fds) ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"tailscope-svc: the microservice runtime (one service, or the whole graph with --all)"};
  app.add_option("--topology", f.topology, "Topology JSON (convert YAML with python -m tailscope.topology)");
  app.add_option("--service", f.service, "Run this service");
  app.add_flag("--all", f.all, "Run every service, one process each, supervised");
  app.add_option("--model", f.model, "std-async | std-thread | pool-blocking | pool-callback | coroutine");
  bool list_models = false;
  app.add_flag("--list-models", list_models, "Print the concurrency model names, one per line, and exit");
  app.add_option("--port", f.port, "Listen port (--all: the front's); default: topology port or ephemeral")
      ->check(CLI::Range(0, 65535));
  app.add_option("--ports", f.ports_text, "Downstream ports NAME=PORT,... on 127.0.0.1 (single-service mode)");
  app.add_option("--peers", f.peers_text,
                 "Downstream services at addresses NAME=ADDR:PORT,... ([V6]:PORT; loopback or 198.18.0.0/15; "
                 "single-service mode)");
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
                 "Also send spans live as OTLP/HTTP JSON to http://HOST:PORT[/v1/traces] (loopback or 198.18.0.0/15)");
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
  app.add_option("--cpus", f.cpus, "Single-service mode: pin every thread of the service to these CPUs");
  app.add_option("--merge-traces", f.merge_dir, "Merge DIR/*.spans.jsonl into Jaeger + OTLP JSON and exit");
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
  if (list_models) {
    for (const std::string& name : model_names()) std::cout << name << '\n';
    return 0;
  }
  try {
    if (f.ping.port > 0) {  // the transport alone (svc/ping_client.h)
      f.ping.host = f.ping_host;
      f.ping.link_delays = LinkDelayTable::parse(f.link_delay_text);
      f.ping.connections = f.runtime.channel_connections;
      if (f.timeout_ms > 0) f.ping.timeout_ns = static_cast<int64_t>(f.timeout_ms * 1e6);
      json doc = new_result_document("tailscope-svc", argc, argv);
      doc["config"] = {{"mode", "ping"},
                       {"host", f.ping.host},
                       {"port", f.ping.port},
                       {"server_pid", f.ping.server_pid},
                       {"link_delays", f.ping.link_delays.to_json()}};
      json ping = run_pings(f.ping);
      doc["unavailable"] = ping["unavailable"];
      ping.erase("unavailable");
      doc["ping"] = ping;
      doc["measurements"] = json::array();
      write_result(doc, f.out);
      return 0;
    }
    if (!f.check_path.empty()) {
      std::string text;
      if (f.check_path == "-") {
        std::stringstream ss;
        ss << std::cin.rdbuf();
        text = ss.str();
      } else {
        std::ifstream in(f.check_path);
        if (!in) throw std::invalid_argument(f.check_path + ": cannot open topology file");
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
      }
      json doc;
      parse_topology_text(text, f.check_origin.empty() ? f.check_path : f.check_origin, &doc);
      std::cout << doc.dump(1) << std::endl;
      return 0;
    }
    if (!f.merge_dir.empty()) {
      std::cout << merge_span_files(f.merge_dir).dump() << std::endl;
      return 0;
    }
    // CLI11's Range lets NaN through (every comparison with it is false).
    for (const auto& [name, v] : {std::pair{"--duration", f.duration_s}, std::pair{"--timeout-ms", f.timeout_ms},
                                  std::pair{"--trace-sample", f.trace_sample}})
      if (!std::isfinite(v)) throw std::invalid_argument(std::string(name) + ": not a finite number");
    if (f.topology.empty()) throw std::invalid_argument("--topology FILE.json is required");
    if (!f.otlp_endpoint.empty()) {
      parse_otlp_endpoint(f.otlp_endpoint);  // refuses a bad or non-lab endpoint before anything starts
      if (f.trace_sample <= 0)
        throw std::invalid_argument("--otlp-endpoint exports sampled spans: give --trace-sample > 0");
    }
    make_model(f.model);  // validates the name before anything starts
    if (f.all == !f.service.empty()) throw std::invalid_argument("give exactly one of --service NAME and --all");
    if (workers->count() > 0) check_workers(f);
    prof::parse_placement_mechanism(f.placement_mechanism);  // bad values fail before anything starts
    prof::parse_counter_mode(f.counters);
    if (!f.all && !f.placements.empty())
      throw std::invalid_argument("--placement needs --all (one service: --cpus LIST)");
    if (f.all && !f.cpus.empty()) throw std::invalid_argument("--cpus is for one service; with --all use --placement");
    // Addresses: every one passes the allow-list before anything starts.
    if (f.all) {
      for (const auto& [flag, text] :
           {std::pair{"--peers", &f.peers_text}, std::pair{"--link-delay", &f.link_delay_text},
            std::pair{"--ports", &f.ports_text}})
        if (!text->empty())
          throw std::invalid_argument(std::string(flag) +
                                      " is for one service; with --all the supervisor sets it (--deployment: from the "
                                      "file's hosts and links)");
      if (f.bind != "127.0.0.1")
        throw std::invalid_argument("--bind is for one service; with --all give a --deployment (its hosts' addresses)");
    } else {
      if (!f.deployment.empty()) throw std::invalid_argument("--deployment needs --all");
      if (canonical_address(f.bind).empty())
        throw std::invalid_argument("--bind: '" + f.bind + "' is not a numeric IPv4/IPv6 address");
      net::check_allowed_target(f.bind, "--bind");
      parse_peers(f.peers_text);
      LinkDelayTable::parse(f.link_delay_text);
    }
    return f.all ? run_all(f, argc, argv) : run_one(f, argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "tailscope-svc: " << e.what() << std::endl;
    return 1;
  }
}
