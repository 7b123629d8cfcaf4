#include "core/proc_sampler.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/clock.h"
#include "core/machine_info.h"
#include "core/thread_name.h"

namespace tailscope {
namespace {

int count_fds(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = opendir(path.c_str());
  if (!dir) return -1;
  int n = 0;
  while (dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n;
}

constexpr int kMaxTasksRead = 4096;

int64_t field_after(const std::string& text, const char* key) {
  size_t pos = text.find(key);
  if (pos == std::string::npos) return 0;
  return std::strtoll(text.c_str() + pos + std::strlen(key), nullptr, 10);
}

}  // namespace

std::optional<ProcessCounters> read_process_counters(pid_t pid) {
  std::string base = "/proc/" + std::to_string(pid);
  std::string stat;
  if (!read_small_file(base + "/stat", &stat) || stat.empty()) return std::nullopt;
  // The command name (field 2) may contain spaces and ')' — parse after the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 2));
  std::string state;
  rest >> state;
  if (state == "Z" || state == "X") return std::nullopt;  // exited, not yet reaped
  // Fields 4..24 after state; we need utime(14) stime(15) num_threads(20) rss(24).
  std::vector<int64_t> f(22, 0);
  for (int i = 4; i <= 24 && rest; ++i) rest >> f[static_cast<size_t>(i - 4)];
  ProcessCounters c;
  c.utime_ticks = f[14 - 4];
  c.stime_ticks = f[15 - 4];
  c.threads = static_cast<int>(f[20 - 4]);
  c.rss_bytes = f[24 - 4] * sysconf(_SC_PAGESIZE);
  // Context switches in /proc/PID/status are the leader thread's only; the
  // process total is the sum over /proc/PID/task/*/status. Threads that have
  // exited are not counted (the kernel folds them into the leader's
  // signal struct, which /proc does not expose per process). Reading is capped
  // at kMaxTasksRead threads so a 10 000-thread server does not make the
  // sampler the bottleneck; `ctx_switch_tasks_truncated` says when it happened.
  if (DIR* tasks = opendir((base + "/task").c_str())) {
    int read_tasks = 0;
    while (dirent* e = readdir(tasks)) {
      if (e->d_name[0] == '.') continue;
      if (read_tasks == kMaxTasksRead) {
        c.ctx_switch_tasks_truncated = true;
        break;
      }
      std::string status;
      if (read_small_file(base + "/task/" + e->d_name + "/status", &status)) {
        c.voluntary_ctx_switches += field_after(status, "\nvoluntary_ctxt_switches:");
        c.involuntary_ctx_switches += field_after(status, "nonvoluntary_ctxt_switches:");
        ++read_tasks;
      }
    }
    closedir(tasks);
  }
  c.open_fds = count_fds(pid);
  return c;
}

std::optional<SystemCounters> read_system_counters() {
  SystemCounters s;
  std::string loadavg, stat;
  if (!read_small_file("/proc/loadavg", &loadavg) || !read_small_file("/proc/stat", &stat)) return std::nullopt;
  if (std::sscanf(loadavg.c_str(), "%lf %lf %lf", &s.load1, &s.load5, &s.load15) != 3) return std::nullopt;
  s.procs_running = static_cast<int>(field_after(stat, "procs_running "));
  s.procs_blocked = static_cast<int>(field_after(stat, "procs_blocked "));
  // First line: cpu user nice system idle iowait irq softirq steal ...
  std::istringstream cpu(stat.substr(0, stat.find('\n')));
  std::string label;
  int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  cpu >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  s.cpu_user_ticks = user + nice;
  s.cpu_sys_ticks = system + irq + softirq;
  s.cpu_busy_ticks = s.cpu_user_ticks + s.cpu_sys_ticks + steal;
  s.cpu_total_ticks = s.cpu_busy_ticks + idle + iowait;
  return s;
}

ResourceSampler::ResourceSampler(pid_t pid, int interval_ms) : pid_(pid), interval_ms_(std::max(1, interval_ms)) {}

ResourceSampler::~ResourceSampler() { stop(); }

void ResourceSampler::start() {
  std::lock_guard lock(mu_);
  if (running_) return;
  running_ = true;
  stop_requested_ = false;
  thread_ = std::thread([this] {
    name_this_thread("proc-sampler");
    run();
  });
}

void ResourceSampler::stop() {
  {
    std::lock_guard lock(mu_);
    if (!running_) return;
    stop_requested_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
  std::lock_guard lock(mu_);
  running_ = false;
}

void ResourceSampler::run() {
  const int64_t start_cpu_ns = thread_cpu_ns();
  int64_t next_ns = monotonic_ns();
  std::unique_lock lock(mu_);
  while (!stop_requested_) {
    lock.unlock();
    take_sample();
    lock.lock();
    sampler_cpu_ns_ = thread_cpu_ns() - start_cpu_ns;
    next_ns += int64_t{interval_ms_} * 1'000'000;
    stop_cv_.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(0, next_ns - monotonic_ns())),
                      [this] { return stop_requested_; });
  }
  lock.unlock();
  take_sample();  // a final point so short runs still have an interval
  lock.lock();
  sampler_cpu_ns_ = thread_cpu_ns() - start_cpu_ns;
}

void ResourceSampler::take_sample() {
  const int64_t now_ns = monotonic_ns();
  std::optional<ProcessCounters> proc = pid_ > 0 ? read_process_counters(pid_) : std::nullopt;
  std::optional<SystemCounters> sys = read_system_counters();
  const double tick_ns = 1e9 / static_cast<double>(sysconf(_SC_CLK_TCK));
  ResourceSample s;
  s.t_ns = now_ns;
  s.proc_alive = proc.has_value();
  if (proc) {
    s.proc_rss_bytes = proc->rss_bytes;
    s.proc_threads = proc->threads;
    s.proc_open_fds = proc->open_fds;
    s.proc_voluntary_ctx_switches = proc->voluntary_ctx_switches;
    s.proc_involuntary_ctx_switches = proc->involuntary_ctx_switches;
    if (prev_proc_ && now_ns > prev_t_ns_) {
      double dt = static_cast<double>(now_ns - prev_t_ns_);
      s.proc_cpu_user_pct = 100.0 * (proc->utime_ticks - prev_proc_->utime_ticks) * tick_ns / dt;
      s.proc_cpu_sys_pct = 100.0 * (proc->stime_ticks - prev_proc_->stime_ticks) * tick_ns / dt;
    }
  }
  if (sys) {
    s.sys_load1 = sys->load1;
    s.sys_procs_running = sys->procs_running;
    if (prev_sys_ && sys->cpu_total_ticks > prev_sys_->cpu_total_ticks)
      s.sys_cpu_busy_pct = 100.0 * static_cast<double>(sys->cpu_busy_ticks - prev_sys_->cpu_busy_ticks) /
                           static_cast<double>(sys->cpu_total_ticks - prev_sys_->cpu_total_ticks);
  }
  std::lock_guard lock(mu_);
  fold(s);
  if (recent_.size() < kKeptSamples) {
    recent_.push_back(s);
  } else {
    recent_[recent_next_] = s;
    recent_next_ = (recent_next_ + 1) % kKeptSamples;
  }
  prev_proc_ = proc;
  prev_sys_ = sys;
  prev_t_ns_ = now_ns;
}

void ResourceSampler::fold(const ResourceSample& p) {
  Totals& t = totals_;
  if (t.count == 0) t.first_t_ns = p.t_ns;
  t.last_t_ns = p.t_ns;
  // The first sample only establishes the baseline for rates; it counts for
  // RSS/threads/fds but its CPU % fields are zero by construction, so the
  // summary skips it for CPU.
  if (t.count > 0) {
    const double cpu = p.proc_cpu_user_pct + p.proc_cpu_sys_pct;
    t.cpu_sum += cpu;
    t.user_sum += p.proc_cpu_user_pct;
    t.sys_sum += p.proc_cpu_sys_pct;
    t.cpu_max = std::max(t.cpu_max, cpu);
    t.busy_sum += p.sys_cpu_busy_pct;
    t.load_sum += p.sys_load1;
    t.rq_sum += p.sys_procs_running;
    t.rq_max = std::max(t.rq_max, p.sys_procs_running);
    t.alive_points += p.proc_alive ? 1 : 0;
  }
  t.rss_max = std::max(t.rss_max, p.proc_rss_bytes);
  t.threads_max = std::max(t.threads_max, p.proc_threads);
  t.fds_max = std::max(t.fds_max, p.proc_open_fds);
  if (p.proc_alive) {
    if (!t.first_alive) t.first_alive = p;
    t.last_alive = p;
  }
  ++t.count;
}

std::vector<ResourceSample> ResourceSampler::samples() const {
  std::lock_guard lock(mu_);
  std::vector<ResourceSample> out(recent_.begin() + static_cast<std::ptrdiff_t>(recent_next_), recent_.end());
  out.insert(out.end(), recent_.begin(), recent_.begin() + static_cast<std::ptrdiff_t>(recent_next_));
  return out;
}

int64_t ResourceSampler::sampler_cpu_ns() const {
  std::lock_guard lock(mu_);
  return sampler_cpu_ns_;
}

nlohmann::json ResourceSampler::summary() const {
  Totals t;
  {
    std::lock_guard lock(mu_);
    t = totals_;
  }
  nlohmann::json out = {{"interval_ms", interval_ms_}, {"samples", t.count}, {"sampler_cpu_ns", sampler_cpu_ns()}};
  if (t.count < 2) {
    out["unavailable"] = "fewer than two samples (run shorter than the sampling interval)";
    return out;
  }
  const double n = static_cast<double>(t.count - 1);
  const double span_s = static_cast<double>(t.last_t_ns - t.first_t_ns) / 1e9;
  out["system"] = {{"cpu_busy_pct_mean", t.busy_sum / n},
                   {"load1_mean", t.load_sum / n},
                   {"procs_running_mean", t.rq_sum / n},
                   {"procs_running_max", t.rq_max}};
  if (pid_ > 0) {
    nlohmann::json proc = {{"pid", pid_},
                           {"cpu_pct_mean", t.cpu_sum / n},
                           {"cpu_user_pct_mean", t.user_sum / n},
                           {"cpu_sys_pct_mean", t.sys_sum / n},
                           {"cpu_pct_max", t.cpu_max},
                           {"rss_bytes_max", t.rss_max},
                           {"threads_max", t.threads_max},
                           {"alive_fraction", t.alive_points / n}};
    if (t.fds_max >= 0)
      proc["open_fds_max"] = t.fds_max;
    else
      proc["open_fds_max"] = nullptr, proc["open_fds_unavailable"] = "/proc/PID/fd not readable";
    if (t.first_alive && span_s > 0) {
      // The counters are sums over the threads alive at each sample: threads that exit in the
      // window (a load generator's workers at its end) take their switches with them, and the
      // difference can fall. A rate that cannot be negative is then unavailable, never negative.
      const int64_t vol = t.last_alive->proc_voluntary_ctx_switches - t.first_alive->proc_voluntary_ctx_switches;
      const int64_t invol = t.last_alive->proc_involuntary_ctx_switches - t.first_alive->proc_involuntary_ctx_switches;
      if (vol >= 0 && invol >= 0) {
        proc["voluntary_ctx_switches_per_s"] = static_cast<double>(vol) / span_s;
        proc["involuntary_ctx_switches_per_s"] = static_cast<double>(invol) / span_s;
      } else {
        proc["voluntary_ctx_switches_per_s"] = nullptr;
        proc["involuntary_ctx_switches_per_s"] = nullptr;
        proc["ctx_switches_unavailable"] =
            "threads exited during the window: the sum over live threads fell, so no rate is given";
      }
    }
    out["process"] = proc;
  }
  return out;
}

nlohmann::json to_json(const ResourceSample& s) {
  return {{"t_ns", s.t_ns},
          {"proc_cpu_user_pct", s.proc_cpu_user_pct},
          {"proc_cpu_sys_pct", s.proc_cpu_sys_pct},
          {"proc_rss_bytes", s.proc_rss_bytes},
          {"proc_threads", s.proc_threads},
          {"proc_open_fds", s.proc_open_fds},
          {"proc_voluntary_ctx_switches", s.proc_voluntary_ctx_switches},
          {"proc_involuntary_ctx_switches", s.proc_involuntary_ctx_switches},
          {"sys_cpu_busy_pct", s.sys_cpu_busy_pct},
          {"sys_load1", s.sys_load1},
          {"sys_procs_running", s.sys_procs_running},
          {"proc_alive", s.proc_alive}};
}

}  // namespace tailscope
