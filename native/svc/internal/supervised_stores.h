// The store servers of a `tailscope-svc --all` run (docs/stores.md): which
// mode the run is in and why, the servers it starts before the services
// (memcached, redis-server, PostgreSQL for the mongodb role), the
// --stores/--store-addr arguments every service gets, a server that dies
// mid-run, and the "stores" sections of the ready line and the result
// document. Stops every server by PID and removes its data when destroyed.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "svc/deployment.h"
#include "svc/service_options.h"
#include "svc/stores/store_servers.h"
#include "svc/topology.h"

namespace tailscope::svc::internal {

class SupervisedStores {
 public:
  // Where the servers run under a deployment: its stores host (`stores:`, or
  // the graph's only host) — the namespace entered and the address bound.
  struct Placement {
    std::string host;  // the deployment's host name
    std::string address;
    int netns_fd = -1;
    std::string netns;
    std::string cpus;  // the host's CPUs: the servers' default pinning there
  };
  // Decides the mode: `--stores real` with a server binary missing (or a
  // deployment that names no host for the stores) throws std::invalid_argument
  // naming the Debian package (or the key to add); `auto` falls back to
  // simulated and says why. `deployment` null: every server on loopback.
  SupervisedStores(const ServiceOptions& options, const Topology& topology, const Deployment* deployment,
                   const std::map<std::string, int>& netns_fds);
  ~SupervisedStores();
  SupervisedStores(const SupervisedStores&) = delete;
  SupervisedStores& operator=(const SupervisedStores&) = delete;

  bool real() const { return mode_ == "real"; }
  // Starts, waits for and preloads every server the topology uses, under scratch_dir.
  void start(const std::string& scratch_dir);
  // --stores MODE [--store-addr SYSTEM=HOST:PORT ...] for every service.
  std::vector<std::string> service_arguments() const;
  // A reaped child that was a store server: recorded (its calls now fail unavailable). False if not one.
  bool reaped(pid_t pid, int status, double at_s);
  // Reads each live server's CPU and peak RSS, then stops them all and removes their data.
  // A server found dead by then is recorded as died at `at_s` (the run's seconds).
  void stop(double at_s);
  nlohmann::json ready_json() const;
  // The result document's "stores": mode, reason, servers (cpu_s, max_rss_kib,
  // ops, errors_unavailable, misses), systems (the counters summed over services).
  nlohmann::json result_json(const nlohmann::json& services) const;

 private:
  struct Running {
    stores::StoreServer server;
    nlohmann::json cpu_s, cpu_s_reason, max_rss_kib;
    nlohmann::json died;  // null, or {at_s, status}
  };
  // Its death: died, and no CPU or peak memory (not the whole run's).
  static void record_death(Running& r, int status, double at_s);
  std::string mode_, reason_;
  std::vector<StoreSystem> systems_;  // those the topology's real ops use
  const ServiceOptions& options_;
  const Topology& topology_;
  std::optional<Placement> placement_;  // set under a deployment with real stores
  std::vector<Running> running_;
  bool stopped_ = false;
};

}  // namespace tailscope::svc::internal
