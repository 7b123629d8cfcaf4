#include "svc/deployment.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "core/affinity.h"
#include "net/allow_list.h"

namespace tailscope::svc {
namespace {

using nlohmann::json;

class Checker {
 public:
  explicit Checker(std::string origin) : origin_(std::move(origin)) {}
  [[noreturn]] void fail(const std::string& where, const std::string& why) const {
    throw std::invalid_argument(origin_ + ": " + where + ": " + why);
  }
  const json& object(const json& parent, const std::string& key, const std::string& where) const {
    if (!parent.contains(key)) fail(where, "'" + key + "' is required");
    const json& v = parent.at(key);
    if (!v.is_object()) fail(where + "." + key, "expected an object");
    return v;
  }
  std::string string(const json& parent, const std::string& key, const std::string& where, bool required) const {
    if (!parent.contains(key) || (!required && parent.at(key).is_null())) {
      if (required) fail(where, "'" + key + "' is required");
      return {};
    }
    const json& v = parent.at(key);
    if (!v.is_string() || v.get<std::string>().empty()) fail(where + "." + key, "expected a non-empty string");
    return v.get<std::string>();
  }
  int64_t integer(const json& parent, const std::string& key, const std::string& where, int64_t lo, int64_t hi,
                  int64_t absent) const {
    if (!parent.contains(key) || parent.at(key).is_null()) return absent;
    const json& v = parent.at(key);
    if (!v.is_number_integer())
      fail(where + "." + key, "expected an integer in " + std::to_string(lo) + " … " + std::to_string(hi));
    const auto x = v.get<int64_t>();
    if (x < lo || x > hi)
      fail(where + "." + key, std::to_string(x) + " is outside " + std::to_string(lo) + " … " + std::to_string(hi));
    return x;
  }
  std::string cpus(const json& parent, const std::string& where) const {
    std::string text = string(parent, "cpus", where, false);
    if (text.empty()) return text;
    try {
      parse_cpu_list(text);
    } catch (const std::invalid_argument& e) {
      fail(where + ".cpus", std::string("'") + text + "': " + e.what() + " (a CPU list such as \"0\" or \"0-1,3\")");
    }
    return text;
  }

 private:
  std::string origin_;
};

bool valid_netns_name(const std::string& n) {
  if (n.empty() || n.size() > 64 || n == "." || n == "..") return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

}  // namespace

std::string Deployment::cpus_of(const std::string& service) const {
  const DeploymentService& s = services.at(service);
  return s.cpus.empty() ? hosts.at(s.host).cpus : s.cpus;
}

LinkDelayTable Deployment::link_delays_for(const std::string& host) const {
  LinkDelayTable table;
  for (const auto& l : links) {
    if (l.a != host && l.b != host) continue;
    const std::string& other = l.a == host ? l.b : l.a;
    table.add(hosts.at(other).address, l.delay_us, l.jitter_us, "deployment link " + l.a + "–" + l.b);
  }
  return table;
}

json Deployment::links_json() const {
  json out = json::array();
  for (const auto& l : links)
    out.push_back({{"between", {l.a, l.b}},
                   {"addresses", {hosts.at(l.a).address, hosts.at(l.b).address}},
                   {"delay_us", l.delay_us},
                   {"jitter_us", l.jitter_us}});
  return out;
}

Deployment parse_deployment(const json& doc, const Topology& topology, const std::string& origin) {
  const Checker check(origin);
  if (!doc.is_object()) check.fail("the document", "expected a JSON object");
  Deployment d;
  d.name = check.string(doc, "name", "the document", true);

  for (const auto& [name, h] : check.object(doc, "hosts", "the document").items()) {
    const std::string where = "hosts." + name;
    if (!h.is_object()) check.fail(where, "expected an object");
    DeploymentHost host;
    host.name = name;
    if (!h.contains("netns")) check.fail(where, "'netns' is required (null: the current namespace)");
    if (!h.at("netns").is_null()) {
      const std::string netns = check.string(h, "netns", where, true);
      if (!valid_netns_name(netns))
        check.fail(where + ".netns", "'" + netns + "' is not a namespace name (letters, digits, - _ .)");
      host.netns = netns;
    }
    const std::string address = check.string(h, "address", where, true);
    if (canonical_address(address).empty())
      check.fail(where + ".address", "'" + address + "' is not a numeric IPv4/IPv6 address");
    try {
      net::check_allowed_target(address, "address");
    } catch (const std::invalid_argument& e) {
      check.fail(where, e.what());
    }
    host.address = canonical_address(address);
    host.cpus = check.cpus(h, where);
    d.hosts[name] = host;
  }
  if (d.hosts.empty()) check.fail("hosts", "at least one host is required");

  if (doc.contains("links") && !doc.at("links").is_null()) {
    if (!doc.at("links").is_array()) check.fail("links", "expected an array");
    std::set<std::pair<std::string, std::string>> seen;
    size_t i = 0;
    for (const auto& l : doc.at("links")) {
      const std::string where = "links[" + std::to_string(i++) + "]";
      if (!l.is_object()) check.fail(where, "expected an object");
      if (!l.contains("between") || !l.at("between").is_array() || l.at("between").size() != 2 ||
          !l.at("between")[0].is_string() || !l.at("between")[1].is_string())
        check.fail(where + ".between", "expected two host names");
      DeploymentLink link;
      link.a = l.at("between")[0].get<std::string>();
      link.b = l.at("between")[1].get<std::string>();
      for (const auto& h : {link.a, link.b})
        if (!d.hosts.count(h)) check.fail(where + ".between", "unknown host '" + h + "'");
      if (link.a == link.b) check.fail(where + ".between", "a link joins two different hosts");
      if (d.hosts[link.a].address == d.hosts[link.b].address)
        check.fail(where, "hosts '" + link.a + "' and '" + link.b + "' share the address " + d.hosts[link.a].address +
                              ": the shim matches a link by the remote address, so it cannot tell them apart");
      if (!seen.insert(std::minmax(link.a, link.b)).second)
        check.fail(where, "the link " + link.a + "–" + link.b + " is given twice");
      if (!l.contains("delay_us")) check.fail(where, "'delay_us' is required");
      link.delay_us = check.integer(l, "delay_us", where, 0, kMaxLinkDelayUs, 0);
      link.jitter_us = check.integer(l, "jitter_us", where, 0, link.delay_us, 0);
      d.links.push_back(link);
    }
  }

  std::map<std::tuple<std::string, std::string, int>, std::string> taken;  // (netns, address, port) → service
  for (const auto& [name, s] : check.object(doc, "services", "the document").items()) {
    const std::string where = "services." + name;
    if (!topology.services.count(name)) check.fail(where, "the topology '" + topology.name + "' has no such service");
    if (!s.is_object()) check.fail(where, "expected an object");
    DeploymentService svc;
    svc.host = check.string(s, "host", where, true);
    if (!d.hosts.count(svc.host)) check.fail(where + ".host", "unknown host '" + svc.host + "'");
    svc.port = static_cast<int>(check.integer(s, "port", where, 0, 65535, 0));
    svc.cpus = check.cpus(s, where);
    if (svc.port > 0) {
      const DeploymentHost& h = d.hosts[svc.host];
      const auto key = std::make_tuple(h.netns.value_or(""), h.address, svc.port);
      if (auto it = taken.find(key); it != taken.end())
        check.fail(where + ".port", "services '" + it->second + "' and '" + name + "' both take " + h.address + ":" +
                                        std::to_string(svc.port) + " (host '" + svc.host + "')");
      taken[key] = name;
    }
    d.services[name] = svc;
  }
  for (const auto& [name, _] : topology.services)
    if (!d.services.count(name)) check.fail("services", "the topology's service '" + name + "' is not deployed");
  if (doc.contains("stores") && !doc.at("stores").is_null()) {
    if (!doc.at("stores").is_object()) check.fail("stores", "expected an object {\"host\": HOST}");
    d.stores_host = check.string(doc.at("stores"), "host", "stores", true);
    if (!d.hosts.count(d.stores_host)) check.fail("stores.host", "unknown host '" + d.stores_host + "'");
  }
  return d;
}

const DeploymentHost* Deployment::stores_host_or_only(std::string* why_not) const {
  if (!stores_host.empty()) return &hosts.at(stores_host);
  std::set<std::string> used;
  for (const auto& [_, s] : services) used.insert(s.host);
  if (used.size() == 1) return &hosts.at(*used.begin());
  *why_not = "the deployment places the graph on " + std::to_string(used.size()) +
             " hosts and names none for the store servers (give `stores: HOST` in the deployment file)";
  return nullptr;
}

Deployment load_deployment_file(const std::string& path, const Topology& topology) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot open the deployment file");
  std::stringstream ss;
  ss << in.rdbuf();
  const json doc = json::parse(ss.str(), nullptr, false);
  if (doc.is_discarded()) throw std::invalid_argument(path + ": not valid JSON (convert YAML on the Python side)");
  return parse_deployment(doc, topology, path);
}

}  // namespace tailscope::svc
