// tailscope-load against HTTP servers that close connections the way real
// ones do (Go's net/http with an IdleTimeout, servers that answer
// `Connection: close`, a close racing a request on a reused connection):
// these are reconnects, not read errors, and no request is lost — while a
// server that really fails requests is still counted as failing them.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "load/run.h"

namespace tailscope::load {
namespace {

enum class CloseRule {
  kIdle,             // close a connection idle for idle_ms (Go's IdleTimeout)
  kConnectionClose,  // answer with `Connection: close`, then close
  kSecondRequest,    // close, unanswered, on a connection's 2nd request (the close won the race)
  kEveryRequest,     // close every request unanswered: a server that fails
};

// A thread-per-connection HTTP/1.1 server on 127.0.0.1, port chosen by the kernel.
class ClosingServer {
 public:
  ClosingServer(CloseRule rule, int idle_ms) : rule_(rule), idle_ms_(idle_ms) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 64) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("test server: cannot listen on 127.0.0.1");
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~ClosingServer() {
    stop_ = true;
    acceptor_.join();
    std::lock_guard lock(mutex_);
    for (std::thread& t : connections_) t.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      std::lock_guard lock(mutex_);
      connections_.emplace_back([this, fd] { serve(fd); });
    }
  }
  void serve(int fd) {
    std::string buffer;
    int requests = 0;
    char chunk[4096];
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, idle_ms_);
      if (ready == 0 && rule_ == CloseRule::kIdle) break;  // idle too long
      if (ready <= 0) continue;
      const long n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<size_t>(n));
      size_t end;
      bool closing = false;
      while (!closing && (end = buffer.find("\r\n\r\n")) != std::string::npos) {
        buffer.erase(0, end + 4);
        ++requests;
        if (rule_ == CloseRule::kEveryRequest || (rule_ == CloseRule::kSecondRequest && requests == 2)) {
          closing = true;
          break;
        }
        std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n";
        if (rule_ == CloseRule::kConnectionClose) response += "Connection: close\r\n";
        response += "\r\nok";
        ::send(fd, response.data(), response.size(), MSG_NOSIGNAL);
        closing = rule_ == CloseRule::kConnectionClose;
      }
      if (closing) break;
    }
    ::close(fd);
  }

  CloseRule rule_;
  int idle_ms_;
  int listen_fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mutex_;
  std::vector<std::thread> connections_;
};

MergedResult run_against(const ClosingServer& server, LoadIo io = LoadIo::kEpoll, double rate_per_s = 40) {
  LoadConfig config;
  config.protocol = LoadProtocol::kHttp;
  config.port = server.port();
  config.connections = 2;
  config.rate_per_s = rate_per_s;
  config.duration_s = 1.0;
  config.warmup_s = 0.2;
  config.io = io;
  std::atomic<bool> interrupted{false};
  return run_load(config, interrupted, 0);
}

TEST(ServerCloses, AnIdleTimeoutIsAReconnectNotAReadError) {
  // 100 ms between requests on a connection, closed after 60 ms idle: every
  // request finds its connection closed since the last one (as Go's
  // IdleTimeout does to a slow client), and is sent on the one opened at once.
  ClosingServer server(CloseRule::kIdle, 60);
  const MergedResult r = run_against(server, LoadIo::kEpoll, 20);
  EXPECT_EQ(r.totals.errors.total(), 0);
  EXPECT_GT(r.totals.server_closes.idle, 10);
  EXPECT_GE(r.totals.sent_in_window, 19);
  EXPECT_EQ(r.totals.skipped_while_disconnected, 0);
  EXPECT_EQ(r.totals.completed_in_window, r.totals.sent_in_window);
}

TEST(ServerCloses, ConnectionCloseIsHonouredWithoutErrors) {
  ClosingServer server(CloseRule::kConnectionClose, 1000);
  const MergedResult r = run_against(server);
  EXPECT_EQ(r.totals.errors.total(), 0);
  EXPECT_GT(r.totals.server_closes.connection_close, 30);
  EXPECT_EQ(r.totals.completed_in_window, r.totals.sent_in_window);
}

TEST(ServerCloses, ARequestOnAReusedConnectionTheServerClosedIsResentOnce) {
  ClosingServer server(CloseRule::kSecondRequest, 1000);
  const MergedResult r = run_against(server);
  EXPECT_EQ(r.totals.errors.total(), 0);
  EXPECT_GT(r.totals.server_closes.requests_resent, 10);
  EXPECT_EQ(r.totals.completed_in_window, r.totals.sent_in_window);
}

TEST(ServerCloses, ResendsTheSameWayOnTheUringPath) {
  UringLoadPlan plan;
  if (!probe_uring_load_plan(&plan).empty()) GTEST_SKIP() << "io_uring unavailable here";
  ClosingServer server(CloseRule::kSecondRequest, 1000);
  const MergedResult r = run_against(server, LoadIo::kUring);
  EXPECT_EQ(r.totals.errors.total(), 0);
  EXPECT_GT(r.totals.server_closes.requests_resent, 10);
  EXPECT_EQ(r.totals.completed_in_window, r.totals.sent_in_window);
}

TEST(ServerCloses, AServerThatNeverAnswersIsStillCountedAsFailing) {
  ClosingServer server(CloseRule::kEveryRequest, 1000);
  const MergedResult r = run_against(server);
  EXPECT_GT(r.totals.errors.read, 0);
  EXPECT_EQ(r.totals.server_closes.requests_resent, 0) << "a connection that never answered is not reused";
  EXPECT_EQ(r.totals.completed_in_window, 0);
}

}  // namespace
}  // namespace tailscope::load
