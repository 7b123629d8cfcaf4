// The store servers a graph run starts (tailscope-svc --all --stores real, and
// the tests): memcached, redis-server and PostgreSQL (the document store in
// DeathStarBench's MongoDB roles), each a child in its own process group with
// PR_SET_PDEATHSIG, on a loopback (or lab) address, pinned when asked, its
// data in a scratch directory that stop_store_server removes. Settings and
// their reasons: docs/stores.md.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "svc/stores/social_graph.h"  // the graph preload_docstore writes
#include "svc/stores/store_client.h"

namespace tailscope::svc::stores {

// Where the PostgreSQL data-dir template is kept: $TAILSCOPE_CACHE, else
// $XDG_CACHE_HOME/tailscope, else $HOME/.cache/tailscope (the bootstrap's cache);
// "" when none of them is set.
std::string default_template_dir();

// The server binary for a system, or nullopt with *missing naming the Debian package.
std::optional<std::string> find_store_binary(StoreSystem system, std::string* missing);

struct StoreServerOptions {
  StoreSystem system = StoreSystem::kNone;
  std::string host = "127.0.0.1";  // must pass the allow-list (the caller checked)
  // A deployment's lab host (svc/netns.h): the server runs inside that namespace and binds `host`
  // there; this process reaches it through the lab's bridge. -1: this namespace.
  int netns_fd = -1;
  std::string netns;        // its name, for errors
  std::string cpus;         // "" = inherit
  int memory_mib = 64;      // memcached -m, redis maxmemory, postgres shared_buffers
  std::string scratch_dir;  // the server's data dir and log are made under it
  // PostgreSQL: a directory keeping one initdb'd data dir per owner, copied into each
  // run's scratch dir instead of running initdb again (docs/stores.md). "": initdb per run.
  std::string template_dir;
  int64_t start_timeout_ns = 30'000'000'000;
};

struct StoreServer {
  StoreSystem system = StoreSystem::kNone;
  pid_t pid = -1;
  StoreAddress address;
  std::string dir;     // data dir + log; removed by stop_store_server
  std::string server;  // "memcached 1.6.18", "redis 7.0.15", "postgresql 15"
  std::string cpus;    // "" = not pinned
  int memory_mib = 0;
  nlohmann::json settings;  // the command line it was started with
};

// Starts the server and returns once it accepts connections; throws
// std::runtime_error naming the system and why (binary missing: the package;
// it died: the last lines of its log) — nothing is left running then.
StoreServer start_store_server(const StoreServerOptions& options);
// CPU seconds (utime + stime of its process group and reaped children, from
// /proc) and peak RSS (VmHWM of the leader), read before stopping; nullopt when unreadable.
std::optional<double> store_server_cpu_s(const StoreServer& s);
std::optional<int64_t> store_server_max_rss_kib(const StoreServer& s);
bool store_server_alive(const StoreServer& s);
// Stops it by PID (SIGTERM; postgres SIGQUIT, its immediate shutdown), SIGKILLs
// the group after a grace period, reaps it and removes its directory. Idempotent.
// Returns the wait status when the server had died by itself: it had exited
// before the stop signal, or a signal other than ours ended it (not the
// escalation); nullopt when the stop ended it, or it was not running.
std::optional<int> stop_store_server(StoreServer& s);

// The document store's preload (docs/stores.md): the collections given
// (tables + key index) plus users (962), social_graph (a graph of
// socfb-Reed98's size, 962 nodes and 18 812 edges, heavy-tailed degrees, fixed
// seed; social_graph.h), hotels_profile and hotels_rate (80 hotels). Throws on failure.
void preload_docstore(const StoreAddress& address, const std::vector<std::string>& collections);

}  // namespace tailscope::svc::stores
