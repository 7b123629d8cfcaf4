#include "net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tailscope::net {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

// Resolves numeric host text only (no DNS: load goes to loopback).
sockaddr_storage resolve(const std::string& host, int port, socklen_t* len) {
  sockaddr_storage ss{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    *len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    *len = sizeof(sockaddr_in6);
  } else {
    throw std::invalid_argument("host '" + host + "' is not a numeric IPv4/IPv6 address");
  }
  if (port < 0 || port > 65535) throw std::invalid_argument("port " + std::to_string(port) + " out of range");
  return ss;
}

}  // namespace

int make_listener(const std::string& host, int port, bool reuse_port, int backlog) {
  socklen_t len = 0;
  sockaddr_storage ss = resolve(host, port, &len);
  int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (reuse_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    int err = errno;
    ::close(fd);
    errno = err;
    fail("SO_REUSEPORT");
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, backlog) != 0) {
    int err = errno;
    ::close(fd);
    errno = err;
    fail("bind/listen on " + host + ":" + std::to_string(port));
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) fail("getsockname");
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) fail("fcntl O_NONBLOCK");
}

void set_blocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) fail("fcntl ~O_NONBLOCK");
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int start_connect(const std::string& host, int port) {
  socklen_t len = 0;
  sockaddr_storage ss = resolve(host, port, &len);
  int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  set_nodelay(fd);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS) {
    int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

int64_t raise_fd_limit(int64_t wanted) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  if (static_cast<int64_t>(rl.rlim_cur) < wanted) {
    rlim_t target = static_cast<rlim_t>(wanted);
    if (rl.rlim_max != RLIM_INFINITY && target > rl.rlim_max) target = rl.rlim_max;
    rl.rlim_cur = target;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  return static_cast<int64_t>(rl.rlim_cur);
}

void lower_fd_limit(int64_t soft) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) fail("getrlimit");
  rl.rlim_cur = static_cast<rlim_t>(soft);
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) fail("setrlimit RLIMIT_NOFILE");
}

long send_some(int fd, const char* data, size_t n) {
  for (;;) {
    ssize_t r = ::send(fd, data, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

long recv_some(int fd, char* data, size_t n) {
  for (;;) {
    ssize_t r = ::recv(fd, data, n, 0);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

}  // namespace tailscope::net
