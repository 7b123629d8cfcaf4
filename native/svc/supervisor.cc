#include "svc/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>

#include "core/clock.h"
#include "core/result_writer.h"
#include "core/stop_signals.h"
#include "net/socket.h"
#include "prof/placement.h"
#include "svc/deployment.h"
#include "svc/internal/supervised_profiling.h"
#include "svc/internal/supervised_stores.h"
#include "svc/netns.h"
#include "svc/peer_addresses.h"
#include "svc/topology.h"
#include "svc/tracer.h"

namespace tailscope::svc {

using nlohmann::json;

std::vector<std::string> child_arguments(const ServiceOptions& o, const SupervisedChild& c,
                                         const std::string& ports_text, const std::string& self,
                                         const std::string& parts_dir) {
  const bool placed_peers = !c.peer_args.empty();
  std::vector<std::string> args = {self,
                                   "--topology",
                                   o.topology,
                                   "--service",
                                   c.service,
                                   "--model",
                                   o.model,
                                   "--listen-fd",
                                   std::to_string(c.listen_fd),
                                   "--bind",
                                   c.address,
                                   placed_peers ? "--peers" : "--ports",
                                   placed_peers ? c.peer_args : ports_text,
                                   "--trace-sample",
                                   std::to_string(o.trace_sample),
                                   "--out",
                                   parts_dir + "/" + c.service + ".result.json"};
  if (!o.traces_dir.empty()) args.insert(args.end(), {"--traces", o.traces_dir + "/parts"});
  if (o.runtime.workers) args.insert(args.end(), {"--workers", std::to_string(o.runtime.workers)});
  if (o.runtime.loops) args.insert(args.end(), {"--loops", std::to_string(o.runtime.loops)});
  args.insert(args.end(), {"--queue", std::to_string(o.runtime.queue_capacity), "--connections",
                           std::to_string(o.runtime.channel_connections)});
  if (o.timeout_ms > 0) args.insert(args.end(), {"--timeout-ms", std::to_string(o.timeout_ms)});
  args.insert(args.end(), {"--pool-idle-s", std::to_string(o.pool_idle_s)});
  if (!c.link_delays.empty()) args.insert(args.end(), {"--link-delay", c.link_delays.to_flag()});
  args.insert(args.end(), c.store_args.begin(), c.store_args.end());
  args.insert(args.end(), {"--work", o.work});
  if (!o.otlp_endpoint.empty())
    args.insert(args.end(),
                {"--otlp-endpoint", o.otlp_endpoint, "--otlp-queue-spans", std::to_string(o.otlp_queue_spans)});
  return args;
}

std::string exit_status_text(int status) {
  return WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                             : "exit " + std::to_string(WEXITSTATUS(status));
}

bool restart_due(const SupervisedChild& c, int64_t now_ns, int64_t restart_ms) {
  return c.pid < 0 && restart_ms > 0 && now_ns - c.died_ns >= restart_ms * 1'000'000;
}

json sum_otlp_exports(const json& services, const std::string& endpoint) {
  json sum = {{"endpoint", endpoint}, {"http_statuses", json::object()}, {"last_error", nullptr}};
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
  return sum;
}

namespace {

// How often the supervisor looks at its children between signals: the
// placement observer's sampling period and a dead child's detection delay.
constexpr int64_t kTickNs = 200'000'000;

// A child that ignores SIGTERM this long is killed.
constexpr int64_t kStopGraceNs = 5'000'000'000;

class Supervisor {
 public:
  Supervisor(const ServiceOptions& options, int argc, char** argv)
      : o_(options), argc_(argc), argv_(argv), topology_(load_topology_file(options.topology)) {}
  ~Supervisor() {
    for (auto& c : children_) ::close(c.listen_fd);
    for (const auto& [_, fd] : netns_fds_) ::close(fd);
  }
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  int run();

 private:
  // Every service's listener, on its host with a deployment: everything
  // that can fail on bad input fails here, before any process starts.
  void open_listeners();
  pid_t spawn(const SupervisedChild& c);
  // Until SIGINT/SIGTERM (in `signals`, blocked) or the deadline (0: none):
  // samples placement, reaps and restarts children, forwards the sampling
  // switch (SIGUSR1 / SIGUSR2, tracer.h) to every service.
  void watch(const sigset_t& signals, int64_t deadline_ns);
  // SIGTERM to everyone, up to kStopGraceNs, then SIGKILL to the stragglers.
  void reap_children();
  void stop_children();
  json result_document(double ran_s);

  const ServiceOptions& o_;
  int argc_;
  char** argv_;
  const Topology topology_;
  std::optional<Deployment> deployment_;
  std::map<std::string, int> netns_fds_;  // namespace name → open fd
  std::optional<internal::SupervisedProfiling> profiling_;
  // Store servers: its destructor stops them by PID and removes their data,
  // so a supervisor leaving by an exception leaves none behind.
  std::optional<internal::SupervisedStores> stores_;
  std::vector<SupervisedChild> children_;
  std::map<std::string, int> ports_;
  std::string ports_text_;
  json addresses_ = json::object();
  std::string parts_dir_;
  std::string self_;
  int64_t started_ns_ = 0;
  json restarts_ = json::array();
  // The sampling switch's last state (tracer.h), given to a restarted service too.
  bool sampling_paused_ = false;
};

void Supervisor::open_listeners() {
  if (!o_.deployment.empty()) {
    deployment_ = load_deployment_file(o_.deployment, topology_);
    for (const auto& [_, h] : deployment_->hosts)
      if (h.netns && !netns_fds_.count(*h.netns)) netns_fds_[*h.netns] = open_netns(h.name, *h.netns);
  }
  profiling_.emplace(internal::prepare_profiling(o_, topology_, deployment_ ? &*deployment_ : nullptr));
  for (const auto& name : topology_.start_order()) {
    SupervisedChild c;
    c.service = name;
    const bool front = topology_.front && topology_.front->service == name;
    int port = front && o_.port >= 0 ? o_.port : 0;
    if (deployment_) {
      const DeploymentHost& h = deployment_->host_of(name);
      c.host = h.name;
      c.address = h.address;
      if (h.netns) {
        c.netns = *h.netns;
        c.netns_fd = netns_fds_.at(c.netns);
      }
      if (deployment_->services.at(name).port > 0) port = deployment_->services.at(name).port;
      c.link_delays = deployment_->link_delays_for(h.name);
    }
    c.listen_fd = in_netns(c.netns_fd, c.netns, [&] { return net::make_listener(c.address, port); });
    ports_[name] = net::bound_port(c.listen_fd);
    children_.push_back(c);
  }
  for (const auto& [n, p] : ports_) ports_text_ += (ports_text_.empty() ? "" : ",") + n + "=" + std::to_string(p);
  for (const auto& c : children_) addresses_[c.service] = c.address;
  // The store mode (an explicit --stores real with a binary missing fails here, nothing started).
  stores_.emplace(o_, topology_, deployment_ ? &*deployment_ : nullptr, netns_fds_);
  if (deployment_) {
    // Every service calls its peers where they are: ADDR:PORT of their hosts.
    std::string peers;
    for (const auto& c : children_)
      peers += (peers.empty() ? "" : ",") + c.service + "=" + address_port_text(c.address, ports_[c.service]);
    for (auto& c : children_) c.peer_args = peers;
  }
}

pid_t Supervisor::spawn(const SupervisedChild& c) {
  std::vector<std::string> args = child_arguments(o_, c, ports_text_, self_, parts_dir_);
  internal::SupervisedProfiling& profiling = *profiling_;
  prof::ChildStartGate gate;  // the child execs only once its counters and cgroup are in place
  const pid_t pid = fork();
  if (pid == 0) {
    if (!gate.wait_in_child()) _exit(126);
    // Into the service's lab host: every socket it opens from now on (its
    // calls to peers) belongs to that namespace. Its listener already does.
    if (!enter_netns(c.netns_fd)) _exit(124);
    internal::apply_placement_in_child(profiling, profiling.services.at(c.service));
    // Only the sampling switch stays blocked across exec: one sent before the
    // service reaches its wait loop stays pending there, instead of killing it
    // (their default action) while it starts.
    const sigset_t switch_only = signal_set({kPauseSamplingSignal, kResumeSamplingSignal});
    pthread_sigmask(SIG_SETMASK, &switch_only, nullptr);
    ::fcntl(c.listen_fd, F_SETFD, 0);  // this child's listener survives exec; the others do not
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, STDOUT_FILENO);  // the readiness line is the parent's to print
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(self_.c_str(), argv.data());
    _exit(127);
  }
  if (pid > 0) {
    try {
      internal::attach_profiling(profiling, c.service, pid);
    } catch (...) {
      ::kill(pid, SIGKILL);  // never an orphan: the gate is closed, the child would exit anyway
      ::waitpid(pid, nullptr, 0);
      throw;
    }
    gate.release();
  }
  return pid;
}

void Supervisor::watch(const sigset_t& signals, int64_t deadline_ns) {
  for (;;) {
    const int sig = wait_for_stop(signals, deadline_ns, kTickNs);
    // Every tick: which CPUs each thread may use (short-lived std::async threads included).
    for (const auto& c : children_)
      if (c.pid > 0) profiling_->services[c.service].observer.sample(c.pid);
    reap_children();
    if (sig == SIGINT || sig == SIGTERM || (deadline_ns && monotonic_ns() >= deadline_ns)) break;
    if (sig == kPauseSamplingSignal || sig == kResumeSamplingSignal) {
      // The sampling switch (tracer.h), for every service: the caller knows one pid, this one.
      sampling_paused_ = sig == kPauseSamplingSignal;
      for (const auto& c : children_)
        if (c.pid > 0) ::kill(c.pid, sig);
    }
    for (auto& c : children_)
      if (restart_due(c, monotonic_ns(), o_.restart_ms)) {
        c.pid = spawn(c);
        ++c.restarts;
        if (sampling_paused_) ::kill(c.pid, kPauseSamplingSignal);  // pending until its wait loop takes it
      }
  }
}

void Supervisor::reap_children() {
  // Children that died (a fault injected by a test, a crash): recorded; watch() restarts services.
  int status = 0;
  pid_t dead;
  while ((dead = ::waitpid(-1, &status, WNOHANG)) > 0) {
    // A store server that died: not restarted (its data is gone); its calls fail unavailable, counted.
    if (stores_->reaped(dead, status, (monotonic_ns() - started_ns_) / 1e9)) continue;
    for (auto& c : children_)
      if (c.pid == dead) {
        c.pid = -1;
        c.died_ns = monotonic_ns();
        restarts_.push_back(
            {{"service", c.service}, {"at_s", (c.died_ns - started_ns_) / 1e9}, {"status", exit_status_text(status)}});
      }
  }
}

void Supervisor::stop_children() {
  for (auto& c : children_)
    if (c.pid > 0) ::kill(c.pid, SIGTERM);
  const int64_t kill_at = monotonic_ns() + kStopGraceNs;
  for (auto& c : children_) {
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
}

json Supervisor::result_document(double ran_s) {
  const internal::SupervisedProfiling& profiling = *profiling_;
  const int front_port = topology_.front ? ports_[topology_.front->service] : -1;
  const json front_address = topology_.front ? json(addresses_[topology_.front->service]) : json();
  json doc = new_result_document("tailscope-svc", argc_, argv_);
  doc["config"] = {{"topology", o_.topology},
                   {"mode", "all"},
                   {"model", o_.model},
                   {"trace_sample", o_.trace_sample},
                   {"front_port", front_port},
                   {"front_address", front_address},
                   {"ports", ports_},
                   {"addresses", addresses_},
                   {"workers", o_.runtime.workers},
                   {"loops", o_.runtime.loops},
                   {"queue_capacity", o_.runtime.queue_capacity},
                   {"pool_idle_s", o_.pool_idle_s},
                   {"restart_ms", o_.restart_ms},
                   {"placement_mechanism", prof::to_string(profiling.mechanism)},
                   {"counters", prof::to_string(profiling.counter_mode)}};
  json services = json::object();
  json unavailable = json::array();
  double cpu_s = 0;
  int64_t threads = 0, ctx_switches = 0;
  for (const auto& c : children_) {
    const std::string part_path = parts_dir_ + "/" + c.service + ".result.json";
    std::ifstream in(part_path);
    json part = json::parse(in, nullptr, false);
    if (part.is_discarded() || !part.contains("services")) {
      unavailable.push_back(
          {{"name", c.service}, {"variant", o_.model}, {"reason", "the service wrote no result document"}});
      continue;
    }
    json s = part["services"][c.service];
    s["restarts"] = c.restarts;
    // Where it ran, and the link table it applied (the child's own view, from its --link-delay).
    s["host"] = c.host.empty() ? json() : json(c.host);
    s["netns"] = c.netns.empty() ? json() : json(c.netns);
    s["address"] = c.address;
    s["port"] = ports_[c.service];
    if (!s.contains("link_delays")) s["link_delays"] = c.link_delays.to_json();
    // Its spans and their encoding at its stop (tracer.h, SpanSpiller).
    if (part.contains("tracing")) s["tracing"] = part["tracing"];
    internal::add_profiling_sections(profiling, c.service, s);
    cpu_s += s["cpu"].value("user_s", 0.0) + s["cpu"].value("sys_s", 0.0);
    ctx_switches +=
        s["cpu"].value("voluntary_ctx_switches", int64_t{0}) + s["cpu"].value("involuntary_ctx_switches", int64_t{0});
    threads += s["resources"].value("process", json::object()).value("threads_max", 0);
    services[c.service] = s;
    std::remove(part_path.c_str());
  }
  ::rmdir(parts_dir_.c_str());
  doc["services"] = services;
  doc["totals"] = {{"cpu_s", cpu_s},
                   {"threads_max_sum", threads},
                   {"ctx_switches", ctx_switches},
                   {"ran_s", ran_s},
                   {"restarts", restarts_}};
  if (deployment_) {
    json hosts = json::object();
    for (const auto& [name, h] : deployment_->hosts)
      hosts[name] = {{"netns", h.netns ? json(*h.netns) : json()},
                     {"address", h.address},
                     {"cpus", h.cpus.empty() ? json() : json(h.cpus)}};
    doc["deployment"] = {
        {"file", o_.deployment}, {"name", deployment_->name}, {"hosts", hosts}, {"links", deployment_->links_json()}};
  }
  if (!o_.otlp_endpoint.empty()) doc["otlp_export"] = sum_otlp_exports(services, o_.otlp_endpoint);
  if (topology_.front && services.contains(topology_.front->service))
    doc["totals"]["front"] = services[topology_.front->service]["counters"];
  doc["measurements"] = json::array();
  doc["unavailable"] = unavailable;
  doc["stores"] = stores_->result_json(services);
  doc["work"] = {{"mode", o_.work}};
  if (!o_.traces_dir.empty()) {
    doc["tracing"] = merge_span_files(o_.traces_dir + "/parts", o_.traces_dir);
    // The services encode their spans at once when they stop: the stop took
    // the longest one's time.
    int64_t encoded = 0;
    double longest_ms = 0;
    for (const auto& [_, s] : services.items())
      if (const auto t = s.find("tracing"); t != s.end()) {
        encoded += t->value("spans_encoded", int64_t{0});
        longest_ms = std::max(longest_ms, t->value("encode_at_stop_ms", 0.0));
      }
    doc["tracing"]["spans_encoded"] = encoded;
    doc["tracing"]["encode_at_stop_ms"] = longest_ms;
    doc["artifacts"] = {{"jaeger", o_.traces_dir + "/traces.jaeger.json"},
                        {"otlp", o_.traces_dir + "/traces.otlp.json"},
                        {"spans", o_.traces_dir + "/parts"}};
  }
  return doc;
}

int Supervisor::run() {
  open_listeners();
  // Only now, when nothing can fail on bad input any more: the scratch folder.
  char tmpl[] = "/tmp/tailscope-svc-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("cannot create a temporary directory");
  parts_dir_ = tmpl;
  if (!o_.traces_dir.empty()) ensure_directory(o_.traces_dir + "/parts");
  const sigset_t signals = signal_set({SIGINT, SIGTERM, SIGCHLD, kPauseSamplingSignal, kResumeSamplingSignal});
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) throw std::runtime_error("cannot find /proc/self/exe");
  self[len] = '\0';
  self_ = self;
  // The stores first: every service finds them accepting and preloaded.
  stores_->start(parts_dir_ + "/stores");
  for (auto& c : children_) c.store_args = stores_->service_arguments();
  for (auto& c : children_) c.pid = spawn(c);
  // Ready: every listener exists already, so callers can connect at once.
  json pids = json::object();
  for (const auto& c : children_) pids[c.service] = c.pid;
  const int front_port = topology_.front ? ports_[topology_.front->service] : -1;
  const json front_address = topology_.front ? json(addresses_[topology_.front->service]) : json();
  std::cout << json{{"listening", front_port},
                    {"front_address", front_address},
                    {"ports", ports_},
                    {"addresses", addresses_},
                    {"pids", pids},
                    {"stores", stores_->ready_json()},
                    {"work", o_.work},
                    {"pid", getpid()}}
                   .dump()
            << std::endl;
  started_ns_ = monotonic_ns();
  watch(signals, o_.duration_s > 0 ? started_ns_ + static_cast<int64_t>(o_.duration_s * 1e9) : 0);
  stop_children();
  const double ran_s = (monotonic_ns() - started_ns_) / 1e9;
  // After the services: their last calls were answered; CPU read before stopping. A store that
  // died in the last tick is recorded as died at the run's end, not measured as if it had run.
  stores_->stop(ran_s);
  ::rmdir((parts_dir_ + "/stores").c_str());
  write_result(result_document(ran_s), o_.out);
  return 0;
}

}  // namespace

int run_supervisor(const ServiceOptions& options, int argc, char** argv) {
  Supervisor supervisor(options, argc, argv);
  return supervisor.run();
}

}  // namespace tailscope::svc
