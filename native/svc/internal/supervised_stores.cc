#include "svc/internal/supervised_stores.h"

#include <limits>
#include <set>
#include <stdexcept>

#include "svc/peer_addresses.h"
#include "svc/runtime.h"
#include "svc/stores/store_set.h"
#include "svc/supervisor.h"

namespace tailscope::svc::internal {
namespace {

using nlohmann::json;

void collect_systems(const StageList& stages, std::set<StoreSystem>* out) {
  for (const auto& s : stages) {
    if (s.kind != Stage::Kind::kStore) continue;
    if (s.store.real()) out->insert(s.store.real_system);
    if (s.store.on_miss) collect_systems(*s.store.on_miss, out);
  }
}

void collect_collections(const StageList& stages, std::set<std::string>* out) {
  for (const auto& s : stages) {
    if (s.kind != Stage::Kind::kStore) continue;
    if (s.store.real_system == StoreSystem::kMongodb) out->insert(s.store.collection);
    if (s.store.on_miss) collect_collections(*s.store.on_miss, out);
  }
}

}  // namespace

SupervisedStores::SupervisedStores(const ServiceOptions& o, const Topology& t, const Deployment* deployment,
                                   const std::map<std::string, int>& netns_fds)
    : options_(o), topology_(t) {
  std::set<StoreSystem> systems;
  for (const auto& [_, s] : t.services)
    for (const auto& [endpoint_name, e] : s.endpoints) collect_systems(e.stages, &systems);
  systems_.assign(systems.begin(), systems.end());
  bool any_client = false;
  for (const auto& [_, s] : t.services)
    any_client = any_client || model_has_store_clients(s.model.empty() ? o.model : s.model);
  mode_ = "simulated";
  if (o.stores == "simulated") {
    reason_ = "--stores simulated";
    return;
  }
  std::string why_not;
  if (systems_.empty()) why_not = "the topology names no real store op";
  if (why_not.empty() && deployment) {
    if (const DeploymentHost* h = deployment->stores_host_or_only(&why_not)) {
      Placement p{h->name, h->address, -1, h->netns.value_or(""), h->cpus};
      if (h->netns) p.netns_fd = netns_fds.at(*h->netns);
      placement_ = p;
    }
  }
  if (why_not.empty() && !any_client) why_not = "model " + o.model + " has no store clients";
  for (StoreSystem s : systems_) {
    std::string missing;
    if (why_not.empty() && !stores::find_store_binary(s, &missing)) why_not = missing;
  }
  if (why_not.empty()) {
    mode_ = "real";
    reason_ = o.stores == "real" ? "--stores real" : "--stores auto: every store server binary is installed";
    return;
  }
  if (o.stores == "real") throw std::invalid_argument("--stores real: " + why_not);
  reason_ = "--stores auto fell back to simulated: " + why_not;
}

// Unwinding (a failed start): no result is written, so a death found now has no time worth reporting.
SupervisedStores::~SupervisedStores() { stop(std::numeric_limits<double>::quiet_NaN()); }

void SupervisedStores::start(const std::string& scratch_dir) {
  if (!real()) return;
  for (StoreSystem system : systems_) {
    stores::StoreServerOptions so;
    so.system = system;
    so.scratch_dir = scratch_dir;
    so.template_dir = stores::default_template_dir();
    so.cpus = options_.store_cpus;
    if (placement_) {
      so.host = placement_->address;
      so.netns_fd = placement_->netns_fd;
      so.netns = placement_->netns;
      if (so.cpus.empty()) so.cpus = placement_->cpus;  // pinned with the host's processes unless told otherwise
    }
    auto spec = topology_.store_servers.find(stores::system_name(system));
    if (spec != topology_.store_servers.end()) {
      if (!spec->second.cpus.empty()) so.cpus = spec->second.cpus;  // the topology's entry wins per system
      if (spec->second.memory_mib > 0) so.memory_mib = spec->second.memory_mib;
    }
    running_.push_back(Running{stores::start_store_server(so), nullptr, nullptr, nullptr, nullptr});
  }
  for (const auto& r : running_)
    if (r.server.system == StoreSystem::kMongodb) {
      std::set<std::string> collections;
      for (const auto& [_, s] : topology_.services)
        for (const auto& [endpoint_name, e] : s.endpoints) collect_collections(e.stages, &collections);
      stores::preload_docstore(r.server.address, {collections.begin(), collections.end()});
    }
}

std::vector<std::string> SupervisedStores::service_arguments() const {
  std::vector<std::string> args = {"--stores", real() ? "real" : "simulated"};
  for (const auto& r : running_)
    args.insert(args.end(), {"--store-addr", std::string(stores::system_name(r.server.system)) + "=" +
                                                 address_port_text(r.server.address.host, r.server.address.port)});
  return args;
}

void SupervisedStores::record_death(Running& r, int status, double at_s) {
  r.died = {{"at_s", at_s}, {"status", exit_status_text(status)}};
  r.cpu_s = json();  // not the whole run's
  r.max_rss_kib = json();
  r.cpu_s_reason = "the server died during the run (" + exit_status_text(status) + ")";
}

bool SupervisedStores::reaped(pid_t pid, int status, double at_s) {
  for (auto& r : running_)
    if (r.server.pid == pid) {
      record_death(r, status, at_s);
      r.server.pid = -1;  // reaped: stop() only removes its data
      return true;
    }
  return false;
}

void SupervisedStores::stop(double at_s) {
  if (stopped_) return;
  stopped_ = true;
  for (auto& r : running_) {
    if (r.server.pid > 0) {
      // Before stopping: its CPU (the group's, reaped workers included) and peak memory.
      const auto cpu = stores::store_server_cpu_s(r.server);
      r.cpu_s = cpu ? json(*cpu) : json();
      if (!cpu) r.cpu_s_reason = "/proc/" + std::to_string(r.server.pid) + "/stat unreadable";
      const auto rss = stores::store_server_max_rss_kib(r.server);
      r.max_rss_kib = rss ? json(*rss) : json();
    }
    // A server that died after the supervisor's last reap (or was still exiting then) is found here.
    if (const auto status = stores::stop_store_server(r.server)) record_death(r, *status, at_s);
  }
}

json SupervisedStores::ready_json() const {
  json servers = json::array();
  for (const auto& r : running_)
    servers.push_back({{"system", stores::system_name(r.server.system)},
                       {"server", r.server.server},
                       {"pid", r.server.pid},
                       {"address", address_port_text(r.server.address.host, r.server.address.port)},
                       {"cpus", r.server.cpus.empty() ? json() : json(r.server.cpus)},
                       {"memory_mib", r.server.memory_mib}});
  json out = {{"mode", mode_}, {"reason", reason_}, {"servers", servers}};
  if (placement_) out["host"] = placement_->host;  // the deployment's host the servers run on
  return out;
}

json SupervisedStores::result_json(const json& services) const {
  json systems = json::object();
  json simulated_services = json::array();
  for (const auto& [name, s] : services.items()) {
    if (s.value("stores", "simulated") != "real" && real()) simulated_services.push_back(name);
    const json counters = s.value("store_counters", json::object());  // a named copy: items() must not dangle
    for (const auto& [system, c] : counters.items())
      for (const char* k : {"ops", "errors_unavailable", "misses"}) {
        json& sum = systems[system];
        if (sum.is_null()) sum = json::object();
        sum[k] = sum.value(k, int64_t{0}) + c.value(k, int64_t{0});
      }
  }
  json servers = json::array();
  bool flagged = false;
  for (const auto& r : running_) {
    const std::string name = stores::system_name(r.server.system);
    json s = {{"system", name},
              {"server", r.server.server},
              {"address", address_port_text(r.server.address.host, r.server.address.port)},
              {"cpus", r.server.cpus.empty() ? json() : json(r.server.cpus)},
              {"memory_mib", r.server.memory_mib},
              {"command", r.server.settings},
              {"cpu_s", r.cpu_s},
              {"max_rss_kib", r.max_rss_kib},
              {"died", r.died}};
    if (r.cpu_s.is_null()) s["cpu_s_reason"] = r.cpu_s_reason.is_null() ? json("not measured") : r.cpu_s_reason;
    for (const char* k : {"ops", "errors_unavailable", "misses"})
      s[k] = systems.contains(name) ? systems[name].value(k, int64_t{0}) : 0;
    flagged = flagged || !r.died.is_null();
    servers.push_back(s);
  }
  json out = {{"mode", mode_}, {"reason", reason_}, {"servers", servers}, {"systems", systems}};
  // The run is flagged when a store died mid-run: its calls failed unavailable from then on.
  out["flagged"] = flagged ? json("a store server died during the run") : json();
  if (!simulated_services.empty()) out["services_simulated"] = simulated_services;
  return out;
}

}  // namespace tailscope::svc::internal
