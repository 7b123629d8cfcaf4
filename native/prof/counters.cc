#include "prof/counters.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <stdexcept>

#include "core/machine_info.h"

namespace tailscope::prof {
namespace {

using nlohmann::json;

int perf_event_open(perf_event_attr* attr, pid_t pid, int cpu, int group_fd) {
  return static_cast<int>(::syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC));
}

std::string paranoid_level() {
  std::string text;
  if (!read_small_file("/proc/sys/kernel/perf_event_paranoid", &text)) return "unknown";
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// Opens one event; retries user-space only when the kernel refuses kernel
// counting (perf_event_paranoid >= 2 for an unprivileged user).
int open_one(const EventSpec& spec, pid_t pid, int cpu, int group_fd, bool enable_on_exec, int* err) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = spec.type;
  attr.config = spec.config;
  attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  attr.exclude_hv = 1;
  if (pid >= 0) {
    attr.inherit = 1;
    attr.disabled = enable_on_exec ? 1 : 0;
    attr.enable_on_exec = enable_on_exec ? 1 : 0;
  }
  int fd = perf_event_open(&attr, pid, cpu, group_fd);
  if (fd < 0 && (errno == EACCES || errno == EPERM)) {
    attr.exclude_kernel = 1;
    fd = perf_event_open(&attr, pid, cpu, group_fd);
  }
  *err = fd < 0 ? errno : 0;
  return fd;
}

const char* errno_name(int err) {
  switch (err) {
    case ENOENT:
      return "ENOENT";
    case EOPNOTSUPP:
      return "EOPNOTSUPP";
    case ENODEV:
      return "ENODEV";
    case EACCES:
      return "EACCES";
    case EPERM:
      return "EPERM";
    case EINVAL:
      return "EINVAL";
    case ESRCH:
      return "ESRCH";
    case EMFILE:
      return "EMFILE";
    case ENOSYS:
      return "ENOSYS";
    case EBUSY:
      return "EBUSY";
    default:
      return "errno";
  }
}

}  // namespace

CounterMode parse_counter_mode(const std::string& text) {
  if (text == "off") return CounterMode::kOff;
  if (text == "process") return CounterMode::kProcess;
  if (text == "cpu") return CounterMode::kCpu;
  throw std::invalid_argument("--counters: '" + text + "' is not off, process or cpu");
}

const char* to_string(CounterMode mode) {
  switch (mode) {
    case CounterMode::kOff:
      return "off";
    case CounterMode::kProcess:
      return "process";
    case CounterMode::kCpu:
      return "cpu";
  }
  return "off";
}

std::string open_failure_reason(int err) {
  const std::string head = std::string(errno_name(err)) + " (" + std::strerror(err) + "): ";
  switch (err) {
    case ENOENT:
      return head + "the kernel exposes no such event on this CPU's PMU (no PMU, e.g. a VM without a virtual PMU)";
    case EOPNOTSUPP:
      return head + "the PMU cannot count this event in this mode";
    case ENODEV:
      return head + "no PMU for this event type";
    case EACCES:
    case EPERM:
      return head + "perf_event_paranoid=" + paranoid_level() + " forbids it (needs CAP_PERFMON or a lower value)";
    case EINVAL:
      return head + "the PMU rejected the event code or attributes";
    case ESRCH:
      return head + "the target process is gone";
    case EMFILE:
      return head + "out of file descriptors (RLIMIT_NOFILE)";
    case ENOSYS:
      return head + "the kernel has no perf_event_open (CONFIG_PERF_EVENTS off or seccomp)";
    default:
      return head + "perf_event_open failed";
  }
}

CounterSet::~CounterSet() { close_all(); }

CounterSet::CounterSet(CounterSet&& other) noexcept : mode_(other.mode_), events_(std::move(other.events_)) {
  other.events_.clear();
}

CounterSet& CounterSet::operator=(CounterSet&& other) noexcept {
  if (this != &other) {
    close_all();
    mode_ = other.mode_;
    events_ = std::move(other.events_);
    other.events_.clear();
  }
  return *this;
}

void CounterSet::close_all() {
  for (auto& e : events_)
    for (int fd : e.fds) ::close(fd);
  events_.clear();
}

CounterSet CounterSet::for_process(pid_t pid, const std::vector<EventSpec>& table, bool enable_on_exec) {
  CounterSet set;
  set.mode_ = CounterMode::kProcess;
  // cycles and instructions share a group so IPC compares counts taken over the
  // same intervals; every other event is multiplexed on its own (a group larger
  // than the PMU's counters would never be scheduled at all).
  int cycles_fd = -1;
  for (const EventSpec& spec : table) {
    OpenEvent e;
    e.spec = spec;
    if (!spec.unavailable.empty()) {
      e.reason = spec.unavailable;
    } else {
      const int group = spec.name == "instructions" ? cycles_fd : -1;
      int err = 0;
      int fd = open_one(spec, pid, -1, group, enable_on_exec, &err);
      if (fd < 0 && group >= 0) fd = open_one(spec, pid, -1, -1, enable_on_exec, &err);
      if (fd >= 0) {
        e.fds.push_back(fd);
        if (spec.name == "cycles") cycles_fd = fd;
      } else {
        e.error_number = err;
        e.reason = open_failure_reason(err);
      }
    }
    set.events_.push_back(std::move(e));
  }
  return set;
}

CounterSet CounterSet::for_cpus(const std::vector<int>& cpus, const std::vector<EventSpec>& table) {
  CounterSet set;
  set.mode_ = CounterMode::kCpu;
  for (const EventSpec& spec : table) {
    OpenEvent e;
    e.spec = spec;
    if (!spec.unavailable.empty()) {
      e.reason = spec.unavailable;
    } else {
      for (int cpu : cpus) {
        int err = 0;
        const int fd = open_one(spec, -1, cpu, -1, false, &err);
        if (fd < 0) {
          e.error_number = err;
          e.reason = "CPU " + std::to_string(cpu) + ": " + open_failure_reason(err);
          for (int open_fd : e.fds) ::close(open_fd);
          e.fds.clear();
          break;
        }
        e.fds.push_back(fd);
      }
    }
    set.events_.push_back(std::move(e));
  }
  return set;
}

std::vector<EventReading> CounterSet::read() const {
  std::vector<EventReading> out;
  uint64_t cycles = 1, instructions = 1;  // "counted" until seen as 0
  for (const OpenEvent& e : events_) {
    EventReading r;
    r.name = e.spec.name;
    r.hardware = e.spec.hardware;
    r.source = e.spec.source;
    r.error_number = e.error_number;
    r.reason = e.reason;
    if (!e.fds.empty()) {
      uint64_t value = 0;
      double scaled = 0;
      bool ok = true;
      for (int fd : e.fds) {
        uint64_t buf[3] = {0, 0, 0};
        if (::read(fd, buf, sizeof buf) != static_cast<ssize_t>(sizeof buf)) {
          r.error_number = errno;
          r.reason = std::string("read of the counter failed: ") + std::strerror(errno);
          ok = false;
          break;
        }
        value += buf[0];
        r.time_enabled_ns += buf[1];
        r.time_running_ns += buf[2];
        if (buf[2] > 0) scaled += static_cast<double>(buf[0]) * static_cast<double>(buf[1]) / buf[2];
      }
      if (ok && r.time_running_ns == 0) {
        r.reason = r.time_enabled_ns == 0 ? "opened but never enabled (the target never ran after exec)"
                                          : "opened but never counted (time_running = 0: the PMU never scheduled it)";
      } else if (ok) {
        r.value = value;
        r.scaled_value = scaled * e.spec.scale;
        if (r.name == "cycles") cycles = value;
        if (r.name == "instructions") instructions = value;
      }
    }
    out.push_back(std::move(r));
  }
  // A PMU that opens but does not count (some hypervisors) reports 0 cycles
  // while enabled: then every hardware figure is unavailable, never 0.
  if (cycles == 0 || instructions == 0)
    for (auto& r : out)
      if (r.hardware && r.value) {
        r.value.reset();
        r.reason = "the PMU opened but counted 0 " + std::string(cycles == 0 ? "cycles" : "instructions") +
                   " while enabled (a virtual PMU that does not count)";
      }
  return out;
}

std::vector<EventReading> sum_readings(const std::vector<std::vector<EventReading>>& parts) {
  if (parts.empty()) return {};
  std::vector<EventReading> total = parts.front();
  for (size_t p = 1; p < parts.size(); ++p)
    for (auto& t : total)
      for (const auto& r : parts[p]) {
        if (r.name != t.name) continue;
        if (!t.value || !r.value) {
          if (!r.value && t.value) {
            t.value.reset();
            t.reason = r.reason;
            t.error_number = r.error_number;
          }
          continue;
        }
        *t.value += *r.value;
        t.scaled_value += r.scaled_value;
        t.time_enabled_ns += r.time_enabled_ns;
        t.time_running_ns += r.time_running_ns;
      }
  return total;
}

int default_pipeline_width(const CpuIdentity& cpu) {
  if (cpu.vendor == "AuthenticAMD") return 6;  // Zen 4 dispatch width
  return 4;                                    // Intel cores before Ice Lake: 4 issue slots
}

json counters_unavailable_json(CounterMode mode, const std::string& reason) {
  return {{"mode", to_string(mode)}, {"events", json::object()}, {"derived", json::object()}, {"reason", reason}};
}

json counters_json(CounterMode mode, const std::vector<EventReading>& readings, int pipeline_width) {
  json events = json::object();
  for (const auto& r : readings) {
    if (r.value) {
      events[r.name] = {{"value", *r.value},
                        {"scaled_value", r.scaled_value},
                        {"time_enabled_ns", r.time_enabled_ns},
                        {"time_running_ns", r.time_running_ns},
                        {"source", r.source}};
    } else {
      json e = {{"value", nullptr}, {"reason", r.reason}, {"source", r.source}};
      if (r.error_number) e["errno"] = errno_name(r.error_number);
      events[r.name] = e;
    }
  }
  return {{"mode", to_string(mode)}, {"events", events}, {"derived", derived_json(readings, pipeline_width)}};
}

}  // namespace tailscope::prof
