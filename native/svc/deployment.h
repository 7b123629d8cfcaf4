// A deployment: which service of a topology runs on which host, at which
// address and port, on which CPUs, and the one-way delay of each link between
// hosts. `tailscope-svc --all --deployment FILE.json` reads it; the Python
// side writes that JSON from deployments/*.yaml, resolving lab hosts to their
// namespaces and addresses (docs/lab-hosts.md has the schema).
//
// Everything is checked before any process starts: a service the topology
// does not have (or one it has that is missing), a host or link naming an
// unknown host, two services on one address:port of one namespace, an address
// outside the allow-list, delays out of range — each is a std::invalid_argument
// naming the file and the entry.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "svc/link_delay.h"
#include "svc/topology.h"

namespace tailscope::svc {

struct DeploymentHost {
  std::string name;
  std::optional<std::string> netns;  // /run/netns/NAME; nullopt: the supervisor's own namespace
  std::string address;               // canonical numeric address services of this host bind
  std::string cpus;                  // "" = none
};

struct DeploymentLink {
  std::string a, b;  // host names, a != b
  int64_t delay_us = 0;
  int64_t jitter_us = 0;
};

struct DeploymentService {
  std::string host;
  int port = 0;      // 0: ephemeral, chosen at start
  std::string cpus;  // "" = the host's
};

struct Deployment {
  std::string name;
  std::map<std::string, DeploymentHost> hosts;
  std::vector<DeploymentLink> links;
  std::map<std::string, DeploymentService> services;
  std::string stores_host;  // `stores: {host}`: where the real store servers run; "" = not given

  // The host whose namespace and address run the real store servers: the one
  // named, else the graph's only host; nullptr with *why_not when neither.
  const DeploymentHost* stores_host_or_only(std::string* why_not) const;

  const DeploymentHost& host_of(const std::string& service) const { return hosts.at(services.at(service).host); }
  // The service's own cpus, else its host's, else "" (the topology's, or none).
  std::string cpus_of(const std::string& service) const;
  // What a service on `host` applies: for every link touching it, the other
  // end's address with the link's delay (links are symmetric).
  LinkDelayTable link_delays_for(const std::string& host) const;
  // [{"between": [a, b], "addresses": [..], "delay_us", "jitter_us"}, ...]
  nlohmann::json links_json() const;
};

Deployment parse_deployment(const nlohmann::json& doc, const Topology& topology, const std::string& origin);
// Reads and parses FILE (JSON); the error names the file.
Deployment load_deployment_file(const std::string& path, const Topology& topology);

}  // namespace tailscope::svc
