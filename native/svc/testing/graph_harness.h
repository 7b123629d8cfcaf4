// Test helper for the model tests (models_test.cc, stores/stores_test.cc): a
// whole graph in one process — one ServiceInstance per service on loopback
// listeners — and a keep-alive HTTP client for its front.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "net/socket.h"
#include "svc/runtime.h"

namespace tailscope::svc::testing {

inline int listen_loopback() { return net::make_listener("127.0.0.1", 0); }

inline const Topology& keep_topology(Topology topology) {
  static std::list<Topology> kept;
  return kept.emplace_back(std::move(topology));
}

// The whole graph in this process: one instance per service, all on one model.
class Graph {
 public:
  Graph(const std::string& model, RuntimeOptions options, const char* text)
      // Spans point at names in the topology, which a service keeps for its
      // whole life: here it must outlive the Graph, so every test's topology
      // is kept (reachable) until the process exits.
      : topology_(keep_topology(parse_topology(nlohmann::json::parse(text), "mini"))) {
    options.model = model;
    for (const auto& [name, _] : topology_.services) {
      fds_[name] = listen_loopback();
      ports_[name] = net::bound_port(fds_[name]);
    }
    for (const auto& name : topology_.start_order()) {
      instances_[name] = std::make_unique<ServiceInstance>(topology_, name, ports_, options, fds_[name], timers_);
      instances_[name]->start();
    }
  }
  ~Graph() {
    for (auto& [_, s] : instances_) s->stop();
    timers_.stop();
    for (auto& [_, fd] : fds_) ::close(fd);
  }
  int port(const std::string& s) { return ports_.at(s); }
  ServiceInstance& instance(const std::string& s) { return *instances_.at(s); }

 private:
  const Topology& topology_;
  TimerService timers_;
  std::map<std::string, int> fds_, ports_;
  std::map<std::string, std::unique_ptr<ServiceInstance>> instances_;
};

inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One keep-alive HTTP GET; returns the status code (0 on a broken connection).
inline int http_get(int fd, const std::string& path = "/wrk2-api/post/compose") {
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) return 0;
  std::string in;
  char buf[4096];
  for (;;) {
    const size_t end = in.find("\r\n\r\n");
    if (end != std::string::npos) {
      const size_t cl = in.find("Content-Length: ");
      const size_t len = std::stoul(in.substr(cl + 16));
      if (in.size() >= end + 4 + len) return std::stoi(in.substr(9, 3));
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return 0;
    in.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace tailscope::svc::testing
