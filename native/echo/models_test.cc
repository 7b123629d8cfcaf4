// Every echo model available here echoes exact bytes for several concurrent
// connections (a slow reader among them), and starts and stops cleanly:
// its connections are closed and no descriptor is left behind. Built into
// the sanitizer trees too, so the most concurrent servers run under TSan.
#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "echo/server.h"
#include "gtest/gtest.h"
#include "net/socket.h"

namespace tailscope::echo {
namespace {

int open_fd_count() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

// Runs one model on its own thread, on listeners the test made. When the
// model returns (or throws), the runner closes the listeners, so a client
// still waiting in the backlog is reset instead of hanging: no test waits on
// a server that is gone.
class RunningServer {
 public:
  RunningServer(const Model& model, ServerConfig config) : config_(std::move(config)), ctx_{config_, {}, stop_} {
    const int listeners = model.listener_per_thread ? std::max(1, config_.threads) : 1;
    ctx_.listen_fds.push_back(net::make_listener("127.0.0.1", 0, model.listener_per_thread));
    port_ = net::bound_port(ctx_.listen_fds[0]);
    for (int i = 1; i < listeners; ++i) ctx_.listen_fds.push_back(net::make_listener("127.0.0.1", port_, true));
    for (int fd : ctx_.listen_fds) net::set_nonblocking(fd);
    thread_ = std::thread([this, run = model.run] {
      try {
        run(ctx_);
      } catch (const ModelUnavailable& e) {
        unavailable_ = e.what();
      } catch (...) {
        failure_ = std::current_exception();
      }
      for (int fd : ctx_.listen_fds) ::close(fd);
    });
  }
  ~RunningServer() { stop(); }

  int port() const { return port_; }
  // Requests stop and waits for the model to return; rethrows its failure.
  void stop() {
    if (!thread_.joinable()) return;
    stop_.request();
    thread_.join();
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }
  // Valid after stop(), or once a client saw the server go away.
  const std::optional<std::string>& unavailable() const { return unavailable_; }

 private:
  ServerConfig config_;
  StopSignal stop_;
  ServerContext ctx_;
  int port_ = 0;
  std::thread thread_;
  std::optional<std::string> unavailable_;
  std::exception_ptr failure_;
};

// A blocking loopback client.
int connect_blocking(int port) {
  const int fd = net::start_connect("127.0.0.1", port);
  if (fd < 0) return -1;
  net::set_blocking(fd);  // connect() completes before the first send/recv returns
  return fd;
}

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const long w = net::send_some(fd, bytes.data(), bytes.size());
    if (w <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

// Reads exactly n bytes; shorter when the peer closes or resets.
std::string recv_exactly(int fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const long r = net::recv_some(fd, out.data() + got, n - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

// Bytes that differ per connection and per round, so a mixed-up or
// misplaced chunk cannot echo back "right".
std::string pattern(int connection, int round, size_t bytes) {
  std::string s(bytes, '\0');
  uint32_t x = static_cast<uint32_t>(connection * 7919 + round * 104729 + 1);
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// Sends "ping" on a fresh connection: true when it comes back. Otherwise the
// server is stopped, so unavailable() tells a model this kernel cannot run
// (io_uring disabled) from a broken one.
bool echoes_probe(RunningServer& server) {
  const int probe = connect_blocking(server.port());
  const bool echoed = probe >= 0 && send_all(probe, "ping") && recv_exactly(probe, 4) == "ping";
  if (probe >= 0) ::close(probe);
  if (!echoed) server.stop();
  return echoed;
}

class EchoModels : public ::testing::TestWithParam<std::string> {
 protected:
  const Model& model() const { return *find_model(GetParam()); }
  static ServerConfig config() {
    ServerConfig c;
    c.threads = 2;  // the pools, asio-mt, asio-coro, epoll-reuseport: really concurrent
    return c;
  }
};

TEST_P(EchoModels, EchoesExactBytesForConcurrentConnectionsAndASlowReader) {
  const int fds_before = open_fd_count();
  {
    RunningServer server(model(), config());

    // Probe: a model this kernel cannot run (io_uring disabled) says so.
    if (!echoes_probe(server)) {
      if (server.unavailable()) GTEST_SKIP() << GetParam() << " unavailable here: " << *server.unavailable();
      FAIL() << GetParam() << " did not echo the probe";
    }

    // The slow reader sends far more than the server may hold for it
    // (64 KiB pending output + socket buffers) and reads nothing until the
    // others are done: the server must stop reading from it, not stall them.
    constexpr size_t kSlowBytes = 1 << 20;
    const int slow = connect_blocking(server.port());
    ASSERT_GE(slow, 0);
    const std::string slow_bytes = pattern(99, 0, kSlowBytes);
    std::atomic<bool> slow_sent_all{false};
    std::thread slow_sender([&] { slow_sent_all = send_all(slow, slow_bytes); });

    constexpr int kConnections = 6, kRounds = 20;
    std::vector<std::string> mismatch(kConnections);
    std::vector<std::thread> clients;
    for (int c = 0; c < kConnections; ++c) {
      clients.emplace_back([&, c] {
        const int fd = connect_blocking(server.port());
        if (fd < 0) {
          mismatch[c] = "connect failed";
          return;
        }
        for (int round = 0; round < kRounds && mismatch[c].empty(); ++round) {
          const std::string sent = pattern(c, round, 1 + static_cast<size_t>((c * 3001 + round * 977) % 20000));
          if (!send_all(fd, sent))
            mismatch[c] = "send failed in round " + std::to_string(round);
          else if (recv_exactly(fd, sent.size()) != sent)
            mismatch[c] = "wrong echo in round " + std::to_string(round);
        }
        ::close(fd);
      });
    }
    for (std::thread& t : clients) t.join();
    for (int c = 0; c < kConnections; ++c) EXPECT_EQ(mismatch[c], "") << "connection " << c;

    const std::string slow_echo = recv_exactly(slow, kSlowBytes);
    slow_sender.join();
    EXPECT_TRUE(slow_sent_all);
    EXPECT_EQ(slow_echo.size(), kSlowBytes);
    EXPECT_TRUE(slow_echo == slow_bytes) << "the slow reader's echo differs";
    ::close(slow);

    // Stop with connections still open: the model closes them (the client
    // sees end of stream) and returns.
    const int idle = connect_blocking(server.port());
    ASSERT_GE(idle, 0);
    ASSERT_TRUE(send_all(idle, "x"));
    ASSERT_EQ(recv_exactly(idle, 1), "x");
    server.stop();
    char byte;
    EXPECT_LE(net::recv_some(idle, &byte, 1), 0) << "connection still open after stop";
    ::close(idle);
  }
  // Listeners, connections, eventfds, epoll/io_uring instances: all closed.
  EXPECT_EQ(open_fd_count(), fds_before);
}

TEST_P(EchoModels, StartsAndStopsWithoutConnections) {
  const int fds_before = open_fd_count();
  {
    RunningServer server(model(), config());
    server.stop();
  }
  EXPECT_EQ(open_fd_count(), fds_before);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const Model& m : all_models()) names.emplace_back(m.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllModels, EchoModels, ::testing::ValuesIn(model_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// Every loop of epoll-reuseport failing at once (here: each cannot pin
// itself) must give one clean error, not a data race on the failure.
TEST(EpollReuseport, LoopsFailingTogetherReportOneError) {
  ServerConfig config;
  config.threads = 4;
  config.cpus = {1000};  // no such CPU: every loop throws while pinning
  StopSignal stop;
  ServerContext ctx{config, {}, stop};
  for (int i = 0; i < config.threads; ++i) {
    ctx.listen_fds.push_back(net::make_listener("127.0.0.1", i == 0 ? 0 : net::bound_port(ctx.listen_fds[0]), true));
    net::set_nonblocking(ctx.listen_fds.back());
  }
  EXPECT_THROW(run_epoll_reuseport(ctx), std::runtime_error);
  for (int fd : ctx.listen_fds) ::close(fd);
}

// The io-uring model says, per kernel feature, whether it is used and why
// not: the study stores this beside every point.
TEST(IoUring, FeaturesSayWhatIsUsedAndWhyNot) {
  ServerConfig config;
  nlohmann::json features;
  try {
    features = io_uring_features(config);
  } catch (const ModelUnavailable& e) {
    GTEST_SKIP() << "io_uring unavailable here: " << e.what();
  }
  for (const char* key : {"sqpoll", "registered_files", "provided_buffer_ring", "multishot_recv", "multishot_accept"}) {
    ASSERT_TRUE(features.contains(key)) << key;
    const nlohmann::json& f = features[key];
    ASSERT_TRUE(f["used"].is_boolean()) << key;
    if (!f["used"].get<bool>()) {
      EXPECT_FALSE(f.value("reason", "").empty()) << key << " unused without a reason";
    }
  }
  EXPECT_FALSE(features["sqpoll"]["used"].get<bool>()) << "SQPOLL used although not requested";
  if (!features["provided_buffer_ring"]["used"].get<bool>()) {
    EXPECT_FALSE(features["multishot_recv"]["used"].get<bool>()) << "multishot recv needs the buffer ring";
  }
  EXPECT_TRUE(model_features(*find_model("epoll"), config).empty());
}

// Far more bytes in flight than the provided buffer ring holds (1024 × 4 KiB)
// and than each session may keep: the model must re-arm recv after running
// out of buffers and after cancelling it for flow control, and lose nothing.
void echo_many_large_streams(const ServerConfig& config) {
  RunningServer server(*find_model("io-uring"), config);
  if (!echoes_probe(server)) {
    if (server.unavailable()) GTEST_SKIP() << "io-uring unavailable here: " << *server.unavailable();
    FAIL() << "io-uring did not echo the probe";
  }
  constexpr int kConnections = 24;
  constexpr size_t kBytes = 512 * 1024;
  std::vector<std::string> verdict(kConnections);
  std::vector<std::thread> clients;
  for (int c = 0; c < kConnections; ++c) {
    clients.emplace_back([&, c] {
      const int fd = connect_blocking(server.port());
      if (fd < 0) {
        verdict[c] = "connect failed";
        return;
      }
      const std::string sent = pattern(c, 7, kBytes);
      std::thread sender([&] { send_all(fd, sent); });
      const std::string got = recv_exactly(fd, kBytes);
      sender.join();
      if (got != sent) verdict[c] = "echo differs (" + std::to_string(got.size()) + " bytes back)";
      ::close(fd);
    });
  }
  for (std::thread& t : clients) t.join();
  for (int c = 0; c < kConnections; ++c) EXPECT_EQ(verdict[c], "") << "connection " << c;
  server.stop();
}

TEST(IoUring, EchoesMoreThanItsBufferRingHolds) { echo_many_large_streams(ServerConfig{}); }

TEST(IoUring, EchoesWithSqpollOrFallsBack) {
  ServerConfig config;
  config.io_uring_sqpoll = true;
  echo_many_large_streams(config);
}

}  // namespace
}  // namespace tailscope::echo
