#include "prof/placement.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/affinity.h"
#include "core/machine_info.h"

namespace tailscope::prof {
namespace {

using nlohmann::json;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  if (!out) throw std::runtime_error("cannot write '" + text + "' to " + path + ": " + std::strerror(errno));
}

bool contains_word(const std::string& list, const std::string& word) {
  std::istringstream in(list);
  std::string w;
  while (in >> w)
    if (w == word) return true;
  return false;
}

}  // namespace

PlacementMechanism parse_placement_mechanism(const std::string& text) {
  if (text == "affinity") return PlacementMechanism::kAffinity;
  if (text == "cgroup") return PlacementMechanism::kCgroup;
  throw std::invalid_argument("--placement-mechanism: '" + text + "' is not affinity or cgroup");
}

const char* to_string(PlacementMechanism mechanism) {
  return mechanism == PlacementMechanism::kCgroup ? "cgroup" : "affinity";
}

void check_cpus_allowed(const std::vector<int>& cpus, const std::vector<int>& allowed, const std::string& what) {
  if (cpus.empty()) throw std::invalid_argument(what + ": leaves the service with no CPU: refused");
  for (int cpu : cpus)
    if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end())
      throw std::invalid_argument(what + ": CPU " + std::to_string(cpu) +
                                  " is not one this process may use (allowed: " + format_cpu_list(allowed) + ")");
}

namespace {
// One CPU list of a placement: parsed, non-empty and inside this process's allowed set; errors
// name where the text came from (`what`).
std::vector<int> allowed_cpu_list(const std::string& text, const std::vector<int>& allowed, const std::string& what) {
  std::vector<int> cpus;
  try {
    cpus = text.empty() ? std::vector<int>{} : parse_cpu_list(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(what + ": " + e.what());
  }
  check_cpus_allowed(cpus, allowed, what);
  return cpus;
}
}  // namespace

std::map<std::string, std::vector<int>> resolve_placements(const std::vector<std::string>& flags,
                                                           const std::map<std::string, std::string>& topology_cpus,
                                                           const std::set<std::string>& services,
                                                           const std::vector<int>& allowed) {
  std::map<std::string, std::vector<int>> out;
  for (const auto& [name, text] : topology_cpus) {
    out[name] = allowed_cpu_list(text, allowed, "topology: service '" + name + "' cpus \"" + text + "\"");
  }
  std::set<std::string> flagged;
  for (const std::string& item : flags) {
    const std::string what = "--placement " + item;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::invalid_argument(what + ": expected NAME=CPULIST (e.g. frontend=0-1,3)");
    const std::string name = item.substr(0, eq);
    const std::string text = item.substr(eq + 1);
    if (!services.count(name)) throw std::invalid_argument(what + ": the topology has no service '" + name + "'");
    if (!flagged.insert(name).second) throw std::invalid_argument(what + ": service '" + name + "' placed twice");
    out[name] = allowed_cpu_list(text, allowed, what);  // the flag wins over the topology's cpus:
  }
  return out;
}

int set_process_affinity(const std::vector<int>& cpus, pid_t pid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus)
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
  return sched_setaffinity(pid, sizeof set, &set) == 0 ? 0 : errno;
}

int ThreadAffinityObserver::sample(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string status;
    if (!read_small_file(entry.path().string() + "/status", &status)) continue;  // the thread just exited
    const auto at = status.find("Cpus_allowed_list:");
    if (at == std::string::npos) continue;
    const auto end = status.find('\n', at);
    applied_.insert(trim(status.substr(at + 18, end - at - 18)));
    const std::string name = entry.path().filename().string();
    char* end_of_number = nullptr;
    const unsigned long tid = std::strtoul(name.c_str(), &end_of_number, 10);
    if (end_of_number != name.c_str() && tid < kMaxTid) record_thread(static_cast<uint32_t>(tid));
    ++seen;
  }
  if (seen > 0) ++samples_;
  return seen;
}

void ThreadAffinityObserver::record_thread(uint32_t tid) {
  if (tid >= kMaxTid) return;
  const size_t word = tid / 64;
  if (word >= seen_tids_.size()) {
    // Doubling, but never past the last possible id's word: the record stays ≤ kMaxTid / 8 bytes.
    constexpr size_t kWords = kMaxTid / 64;
    seen_tids_.reserve(std::min(kWords, std::max(word + 1, 2 * seen_tids_.size())));
    seen_tids_.resize(word + 1, 0);
  }
  const uint64_t bit = uint64_t{1} << (tid % 64);
  if ((seen_tids_[word] & bit) == 0) {
    seen_tids_[word] |= bit;
    ++distinct_threads_;
  }
}

bool ThreadAffinityObserver::all_within(const std::vector<int>& requested) const {
  if (applied_.empty()) return false;
  for (const auto& list : applied_) {
    std::vector<int> cpus;
    try {
      cpus = parse_cpu_list(list);
    } catch (const std::invalid_argument&) {
      return false;
    }
    for (int cpu : cpus)
      if (std::find(requested.begin(), requested.end(), cpu) == requested.end()) return false;
  }
  return true;
}

json ThreadAffinityObserver::to_json(const std::vector<int>& requested, const std::string& mechanism) const {
  json applied = json::array();
  for (const auto& a : applied_) applied.push_back(a);
  json out = {{"requested_cpus", requested.empty() ? json(nullptr) : json(format_cpu_list(requested))},
              {"mechanism", requested.empty() ? "none" : mechanism},
              {"threads", distinct_threads_},
              {"applied_cpus", applied},
              {"samples", samples_}};
  if (samples_ == 0) {
    out["all_threads_within"] = nullptr;
    out["reason"] = "no /proc/PID/task sample was taken while the service ran";
  } else {
    out["all_threads_within"] = requested.empty() ? json(nullptr) : json(all_within(requested));
    if (requested.empty()) out["reason"] = "no placement requested for this service";
  }
  return out;
}

std::string cgroup2_own_dir(std::string* reason) {
  std::string mount;
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mounts, line)) {
    // "... MOUNTPOINT OPTIONS ... - cgroup2 SOURCE SUPER_OPTIONS"
    const auto dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string f;
    for (int i = 0; i < 5 && fields >> f; ++i) {
      if (i == 4) mount = f;
    }
    if (!mount.empty()) break;
  }
  if (mount.empty()) {
    *reason = "no cgroup v2 file system is mounted";
    return "";
  }
  std::string own;
  std::ifstream cg("/proc/self/cgroup");
  while (std::getline(cg, line))
    if (line.rfind("0::", 0) == 0) own = line.substr(3);
  if (own.empty()) {
    *reason = "this process is in no cgroup v2 group (/proc/self/cgroup has no 0:: line)";
    return "";
  }
  return mount + (own == "/" ? "" : own);
}

CgroupCpuset CgroupCpuset::create(const std::string& run_name) {
  std::string reason;
  const std::string base = cgroup2_own_dir(&reason);
  const std::string head = "--placement-mechanism cgroup: cgroup v2 cpusets are unavailable here: ";
  if (base.empty()) throw std::runtime_error(head + reason);
  std::string controllers;
  if (!read_small_file(base + "/cgroup.controllers", &controllers))
    throw std::runtime_error(head + "cannot read " + base + "/cgroup.controllers");
  if (!contains_word(controllers, "cpuset"))
    throw std::runtime_error(head + "the cpuset controller is not available in " + base +
                             " (bound to cgroup v1, or not delegated to this group)");
  std::string subtree;
  read_small_file(base + "/cgroup.subtree_control", &subtree);
  if (!contains_word(subtree, "cpuset")) {
    try {
      write_text(base + "/cgroup.subtree_control", "+cpuset");
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(head + "cannot enable cpuset for child groups: " + e.what() +
                               " (a non-root group with processes cannot delegate controllers)");
    }
  }
  CgroupCpuset set;
  set.root_ = base + "/" + run_name;
  if (::mkdir(set.root_.c_str(), 0755) != 0)
    throw std::runtime_error(head + "cannot create " + set.root_ + ": " + std::strerror(errno));
  try {
    write_text(set.root_ + "/cgroup.subtree_control", "+cpuset");
  } catch (const std::runtime_error& e) {
    ::rmdir(set.root_.c_str());
    throw std::runtime_error(head + e.what());
  }
  return set;
}

CgroupCpuset::CgroupCpuset(CgroupCpuset&& other) noexcept
    : root_(std::move(other.root_)), children_(std::move(other.children_)) {
  other.root_.clear();
  other.children_.clear();
}

CgroupCpuset::~CgroupCpuset() {
  // Children first: a cgroup with children or processes cannot be removed.
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) ::rmdir(it->c_str());
  if (!root_.empty()) ::rmdir(root_.c_str());
}

void CgroupCpuset::add_service(const std::string& service, const std::vector<int>& cpus) {
  const std::string dir = root_ + "/" + service;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("cgroup: cannot create " + dir + ": " + std::strerror(errno));
  if (std::find(children_.begin(), children_.end(), dir) == children_.end()) children_.push_back(dir);
  write_text(dir + "/cpuset.cpus", format_cpu_list(cpus));
}

void CgroupCpuset::attach(const std::string& service, pid_t pid) {
  write_text(root_ + "/" + service + "/cgroup.procs", std::to_string(pid));
}

ChildStartGate::ChildStartGate() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  read_fd_ = fds[0];
  write_fd_ = fds[1];
}

ChildStartGate::~ChildStartGate() {
  if (read_fd_ >= 0) ::close(read_fd_);
  if (write_fd_ >= 0) ::close(write_fd_);
}

bool ChildStartGate::wait_in_child() {
  ::close(write_fd_);
  write_fd_ = -1;
  char byte = 0;
  ssize_t n;
  do {
    n = ::read(read_fd_, &byte, 1);
  } while (n < 0 && errno == EINTR);
  return n == 1;
}

void ChildStartGate::release() {
  const char byte = 1;
  ssize_t n;
  do {
    n = ::write(write_fd_, &byte, 1);
  } while (n < 0 && errno == EINTR);
  ::close(write_fd_);
  write_fd_ = -1;
}

}  // namespace tailscope::prof
