// Socket mechanics every server model and the load generator share, written
// once: listeners, non-blocking mode, TCP_NODELAY, the fd limit.
//
// Everything binds loopback unless told otherwise, and never beyond the lab
// subnet: a load generator and services that anyone on the network could
// reach (or that could reach anyone) would turn a latency lab into a traffic
// source. The rule is net/allow_list.h; docs/lab-hosts.md ("The allow-list").
#pragma once

#include <cstdint>
#include <string>

namespace tailscope::net {

// A listening TCP socket on host:port (port 0: ephemeral). reuse_port sets
// SO_REUSEPORT so several loops can each own a listener on the same port.
// Throws std::runtime_error naming host, port and errno text on failure.
int make_listener(const std::string& host, int port, bool reuse_port = false, int backlog = 4096);

// The port a bound socket listens on.
int bound_port(int fd);

void set_nonblocking(int fd);
void set_blocking(int fd);
void set_nodelay(int fd);

// Starts a non-blocking connect to host:port. Returns the fd (connection may
// still be in progress) or -1 with errno set.
int start_connect(const std::string& host, int port);

// Raises RLIMIT_NOFILE's soft limit to at least `wanted` (capped at the hard
// limit). Returns the soft limit now in force.
int64_t raise_fd_limit(int64_t wanted);

// Lowers RLIMIT_NOFILE's soft limit (test hook for fd exhaustion).
void lower_fd_limit(int64_t soft);

// send()/recv() that retry on EINTR and never raise SIGPIPE.
long send_some(int fd, const char* data, size_t n);
long recv_some(int fd, char* data, size_t n);

}  // namespace tailscope::net
