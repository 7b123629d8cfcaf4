// Loopback TCP round trip: a 64-byte message written with a blocking send(),
// echoed by a blocking server thread, read back in full. TCP_NODELAY on both
// ends. This is the floor under every echo server and under the load
// generator's own latency: nothing over loopback TCP can answer faster.
// Both ends live in this process, so its user + sys CPU over the measured
// round trips (getrusage) ÷ round trips is the CPU a round trip costs: the
// floor the RPC transport benchmark compares its CPU per call with.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "baseline/reference.h"
#include "core/clock.h"
#include "core/rusage.h"

namespace tailscope::baseline {
namespace {

constexpr size_t kMessageBytes = 64;

[[noreturn]] void sys_fail(const char* what) {
  throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

bool io_all(int fd, char* buf, size_t n, bool writing) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = writing ? ::send(fd, buf + done, n - done, MSG_NOSIGNAL) : ::recv(fd, buf + done, n - done, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

ReferenceResult run(const ReferenceConfig& config) {
  ReferenceResult result;
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) sys_fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // ephemeral: never collides with a user's server
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(listener);
    errno = err;
    sys_fail("bind/listen on 127.0.0.1");
  }
  std::atomic<int> server_cpu{-1};
  std::thread server([&] {
    place_server(config.placement);
    int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return;
    set_nodelay(conn);
    char buf[kMessageBytes];
    while (io_all(conn, buf, kMessageBytes, false)) {
      server_cpu.store(sched_getcpu(), std::memory_order_relaxed);
      if (!io_all(conn, buf, kMessageBytes, true)) break;
    }
    ::close(conn);
  });
  place_client(config.placement);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  if (!ok) {
    int err = errno;
    ::shutdown(listener, SHUT_RDWR);
    ::close(listener);
    server.join();
    if (fd >= 0) ::close(fd);
    errno = err;
    sys_fail("connect to 127.0.0.1");
  }
  set_nodelay(fd);
  char msg[kMessageBytes];
  std::memset(msg, 'x', sizeof msg);
  SameCpuCounter same_cpu;
  int64_t cpu_at_start_ns = process_cpu_ns();
  for (int64_t i = 0; i < config.warmup_iterations + config.iterations && ok; ++i) {
    if (i == config.warmup_iterations) cpu_at_start_ns = process_cpu_ns();
    const int64_t start_ns = monotonic_ns();
    ok = io_all(fd, msg, kMessageBytes, true) && io_all(fd, msg, kMessageBytes, false);
    const int64_t end_ns = monotonic_ns();
    if (ok && i >= config.warmup_iterations) {
      result.histogram.record(end_ns - start_ns);
      same_cpu.add(sched_getcpu(), server_cpu.load(std::memory_order_relaxed));
    }
  }
  const int64_t cpu_ns = process_cpu_ns() - cpu_at_start_ns;
  ::close(fd);
  server.join();
  ::close(listener);
  if (!ok) throw std::runtime_error("loopback ping-pong connection failed mid-run");
  result.observed = same_cpu.to_json();
  result.observed["message_bytes"] = kMessageBytes;
  // getrusage counts in ticks of the scheduler: only meaningful over many round trips.
  result.observed["cpu_per_round_trip_ns"] = static_cast<double>(cpu_ns) / static_cast<double>(config.iterations);
  result.observed["cpu_s"] = static_cast<double>(cpu_ns) / 1e9;
  return result;
}

}  // namespace

Reference tcp_pingpong_reference() {
  return make_reference("tcp_pingpong",
                        "64-byte send() → blocking echo thread → last byte recv() back, loopback, TCP_NODELAY", 5000,
                        run);
}

}  // namespace tailscope::baseline
