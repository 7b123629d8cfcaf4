// tailscope-svc --all: the supervisor. It opens one listener per service
// (inside the service's lab host with --deployment, svc/netns.h), starts one
// child process per service (this executable with --service and the
// inherited listener), prints {"listening": FRONT_PORT, "ports": {...},
// "pids": {...}} once every child is up, restarts a child that dies (after
// --restart-ms, on the same listener, so callers reconnect), and on
// SIGINT/SIGTERM (or after --duration) stops all children, merges their
// result documents and span files, and writes one result document.
//
// Placement and counters per service: internal/supervised_profiling.h.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svc/link_delay.h"
#include "svc/service_options.h"

namespace tailscope::svc {

// One supervised service and the process that runs it now.
struct SupervisedChild {
  std::string service;
  int listen_fd = -1;  // the supervisor's, kept across restarts
  pid_t pid = -1;      // -1: not running
  int64_t died_ns = 0;
  int restarts = 0;
  // Where it runs (--deployment; otherwise 127.0.0.1 in this namespace).
  std::string address = "127.0.0.1";
  std::string host;       // "" without a deployment
  std::string netns;      // "" = this namespace
  int netns_fd = -1;      // /run/netns/NAME, open (O_CLOEXEC); -1 = stay here
  std::string peer_args;  // --peers text ("" = --ports)
  LinkDelayTable link_delays;
  std::vector<std::string> store_args;  // --stores MODE [--store-addr SYSTEM=HOST:PORT ...]
};

// The command line of `child`: `self` in one-service mode on its inherited
// listener, with the options every child shares. Its peers are `ports_text`
// (NAME=PORT,... on 127.0.0.1) unless it has peer_args; it writes its result
// document into `parts_dir`.
std::vector<std::string> child_arguments(const ServiceOptions& options, const SupervisedChild& child,
                                         const std::string& ports_text, const std::string& self,
                                         const std::string& parts_dir);

// How a child ended, from waitpid's status: "exit N" or "signal N".
std::string exit_status_text(int status);

// Whether a child that died is due to start again at now_ns (restart_ms 0: never).
bool restart_due(const SupervisedChild& child, int64_t now_ns, int64_t restart_ms);

// The document's `otlp_export`: every service's export counters summed — what
// reached the backend, what was dropped and why (the first error, named by
// its service).
nlohmann::json sum_otlp_exports(const nlohmann::json& services, const std::string& endpoint);

// Runs the supervisor until SIGINT/SIGTERM or --duration; the options have
// passed check_service_options. Returns the exit code.
int run_supervisor(const ServiceOptions& options, int argc, char** argv);

}  // namespace tailscope::svc
