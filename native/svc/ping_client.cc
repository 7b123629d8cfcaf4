#include "svc/ping_client.h"

#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>

#include "core/clock.h"
#include "core/hdr_histogram.h"
#include "core/latency_summary.h"
#include "core/proc_sampler.h"
#include "core/result_writer.h"
#include "core/rusage.h"
#include "net/allow_list.h"
#include "svc/multiplexed_channel.h"
#include "svc/rpc_call.h"

namespace tailscope::svc {
namespace {

// How the server's CPU time was read: its POSIX CPU-time clock counts
// nanoseconds; /proc's utime + stime count clock ticks (10 ms), an error of
// tens of percent over a few thousand pings of ~8 µs each — the socialnet
// study's per-model CPU per RPC once ranged 12–37 µs from that alone.
enum class CpuClock { kPosixCpuClock, kProcTicks };

const char* to_string(CpuClock c) { return c == CpuClock::kPosixCpuClock ? "posix_cpu_clock" : "proc_ticks"; }

// -1 when the process cannot be read.
int64_t cpu_ns_of(pid_t pid, CpuClock* how) {
  clockid_t clock{};
  timespec ts{};
  if (clock_getcpuclockid(pid, &clock) == 0 && clock_gettime(clock, &ts) == 0) {
    *how = CpuClock::kPosixCpuClock;
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }
  const auto c = read_process_counters(pid);
  if (!c) return -1;
  static const int64_t ticks_per_s = sysconf(_SC_CLK_TCK);
  *how = CpuClock::kProcTicks;
  return (c->utime_ticks + c->stime_ticks) * 1'000'000'000 / ticks_per_s;
}

// The closed loop: each completion records its round trip and, while calls
// are left, issues the next one from the channel loop's thread (queued for
// the loop's next send, no wake-up).
class PingDriver {
 public:
  PingDriver(MultiplexedChannel& channel, int64_t timeout_ns) : channel_(channel), timeout_ns_(timeout_ns) {}

  // Runs `calls` pings with `concurrency` in flight; returns when all ended.
  void run(int64_t calls, int64_t concurrency, HdrHistogram* rtt) {
    {
      std::lock_guard lock(mu_);
      left_to_issue_ = calls;
      left_to_end_ = calls;
      rtt_ = rtt;
    }
    for (int64_t i = 0; i < std::min(calls, concurrency); ++i) issue();
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [this] { return left_to_end_ == 0; });
  }
  int64_t ok() const { return ok_; }
  int64_t failed() const { return failed_; }
  int64_t timeouts() const { return timeouts_; }
  int64_t not_issued() const { return not_issued_; }

 private:
  void issue() {
    {
      std::lock_guard lock(mu_);
      if (left_to_issue_ == 0) return;
      --left_to_issue_;
    }
    const int64_t start_ns = monotonic_ns();
    channel_.call(kPingMethod, {}, TraceContext{}, timeout_ns_, [this, start_ns](CallResult&& r) {
      const int64_t end_ns = monotonic_ns();
      bool last;
      {
        std::lock_guard lock(mu_);
        if (r.status == RpcStatus::kOk) {
          ++ok_;
          if (rtt_) rtt_->record(end_ns - start_ns);
        } else {
          // A failure ends the run: the calls not yet issued are not made
          // (a dead server would otherwise fail them one inside another).
          ++failed_;
          timeouts_ += r.status == RpcStatus::kTimeout;
          left_to_end_ -= left_to_issue_;
          not_issued_ += left_to_issue_;
          left_to_issue_ = 0;
        }
        last = --left_to_end_ == 0;
      }
      if (last)
        done_cv_.notify_all();
      else
        issue();
    });
  }

  MultiplexedChannel& channel_;
  int64_t timeout_ns_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  int64_t left_to_issue_ = 0, left_to_end_ = 0;
  int64_t ok_ = 0, failed_ = 0, timeouts_ = 0, not_issued_ = 0;
  HdrHistogram* rtt_ = nullptr;
};

void check_range(const char* name, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    throw std::invalid_argument(std::string(name) + ": " + std::to_string(v) + " is outside " + std::to_string(lo) +
                                " … " + std::to_string(hi));
}

}  // namespace

nlohmann::json run_pings(const PingOptions& o) {
  check_range("--ping", o.port, 1, 65535);
  check_range("--ping-calls", o.calls, 1, 100'000'000);
  check_range("--ping-warmup", o.warmup_calls, 0, 100'000'000);
  check_range("--ping-concurrency", o.concurrency, 1, 4096);
  check_range("--connections", static_cast<int64_t>(o.connections), 1, 64);
  net::check_allowed_target(o.host, "--ping-host");  // before any socket exists
  const int fd = connect_to(o.host, o.port, 1000);   // fail early and clearly when nothing listens
  if (fd < 0) throw std::runtime_error("--ping: nothing answers on " + o.host + " port " + std::to_string(o.port));
  ::close(fd);

  const LinkDelay delay = o.link_delays.for_address(o.host);
  TimerService timers;
  ChannelLoop loop;
  MultiplexedChannel channel(o.host, o.port, o.connections, timers, loop, delay);
  PingDriver driver(channel, o.timeout_ns);
  driver.run(o.warmup_calls, o.concurrency, nullptr);
  const int64_t ok_before = driver.ok(), failed_before = driver.failed(), timeouts_before = driver.timeouts();
  const int64_t iterations_before = loop.iterations(), sends_before = loop.sends();
  const int64_t delayed_before = loop.delayed_batches();

  HdrHistogram rtt = HdrHistogram::for_latency_ns();
  CpuClock clock_before = CpuClock::kProcTicks, clock_after = CpuClock::kProcTicks;
  const int64_t server_cpu_before = o.server_pid > 0 ? cpu_ns_of(o.server_pid, &clock_before) : -1;
  const int64_t client_cpu_before = process_cpu_ns();
  const int64_t start_ns = monotonic_ns();
  driver.run(o.calls, o.concurrency, &rtt);
  const int64_t wall_ns = monotonic_ns() - start_ns;
  const int64_t client_cpu_ns = process_cpu_ns() - client_cpu_before;
  const int64_t server_cpu_after = o.server_pid > 0 ? cpu_ns_of(o.server_pid, &clock_after) : -1;
  const int64_t iterations = loop.iterations() - iterations_before, sends = loop.sends() - sends_before;
  const int64_t delayed_batches = loop.delayed_batches() - delayed_before;
  channel.close();
  loop.stop();
  timers.stop();

  const int64_t ok = driver.ok() - ok_before;
  nlohmann::json unavailable = nlohmann::json::array();
  nlohmann::json server_cpu_s = nullptr, cpu_per_call_ns = nullptr;
  if (o.server_pid <= 0) {
    unavailable.push_back({{"name", "server_cpu"}, {"reason", "no server pid given (--ping-pid)"}});
  } else if (server_cpu_before < 0 || server_cpu_after < 0 || clock_before != clock_after) {
    unavailable.push_back(
        {{"name", "server_cpu"},
         {"reason", "process " + std::to_string(o.server_pid) +
                        "'s CPU time could not be read consistently (its CPU clock and /proc/PID/stat)"}});
  } else if (ok == 0) {
    unavailable.push_back({{"name", "cpu_per_call"}, {"reason", "no ping was answered"}});
  } else {
    const int64_t server_ns = server_cpu_after - server_cpu_before;
    server_cpu_s = static_cast<double>(server_ns) / 1e9;
    cpu_per_call_ns = static_cast<double>(client_cpu_ns + server_ns) / static_cast<double>(ok);
  }
  return {{"calls", o.calls},
          {"ok", ok},
          {"failed", driver.failed() - failed_before},
          {"timeouts", driver.timeouts() - timeouts_before},
          {"not_issued", driver.not_issued()},
          {"warmup_calls", o.warmup_calls},
          {"concurrency", o.concurrency},
          {"connections", o.connections},
          {"wall_s", static_cast<double>(wall_ns) / 1e9},
          {"rtt", latency_summary(rtt)},
          {"client_cpu_s", static_cast<double>(client_cpu_ns) / 1e9},
          {"server_cpu_s", server_cpu_s},
          {"server_cpu_clock",
           o.server_pid > 0 && server_cpu_s.is_number() ? nlohmann::json(to_string(clock_after)) : nlohmann::json()},
          {"cpu_per_call_ns", cpu_per_call_ns},
          {"client_cpu_per_call_ns",
           ok ? nlohmann::json(static_cast<double>(client_cpu_ns) / static_cast<double>(ok)) : nlohmann::json()},
          // Batching, measured: calls per loop iteration and per send() of the client.
          {"channel", {{"loop_iterations", iterations}, {"sends", sends}, {"delayed_batches", delayed_batches}}},
          {"host", o.host},
          // This side's shim only: the server's answers are held by its own --link-delay table.
          {"link_delay",
           {{"address", canonical_address(o.host)},
            {"one_way_delay_us", delay.delay_ns / 1000},
            {"jitter_us", delay.jitter_ns / 1000}}},
          {"unavailable", unavailable}};
}

nlohmann::json ping_result_document(const PingOptions& options, int argc, char** argv) {
  nlohmann::json doc = new_result_document("tailscope-svc", argc, argv);
  doc["config"] = {{"mode", "ping"},
                   {"host", options.host},
                   {"port", options.port},
                   {"server_pid", options.server_pid},
                   {"link_delays", options.link_delays.to_json()}};
  nlohmann::json ping = run_pings(options);
  doc["unavailable"] = ping["unavailable"];
  ping.erase("unavailable");
  doc["ping"] = ping;
  doc["measurements"] = nlohmann::json::array();
  return doc;
}

}  // namespace tailscope::svc
