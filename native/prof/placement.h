// Per-service CPU placement: which CPUs each service process may run on, how
// it is applied (affinity inherited from the forked child, or a cgroup v2
// cpuset as Docker does it), and what was really applied to every thread.
//
// Affinity is set on the forked child before it execs, while it has one
// thread: every thread it creates later (std::async, pools) inherits the mask
// at clone(2), so "pin every thread" needs no cooperation from the service.
// ThreadAffinityObserver verifies it from /proc/PID/task/*/status.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace tailscope::prof {

enum class PlacementMechanism { kAffinity, kCgroup };
// "affinity" | "cgroup"; throws std::invalid_argument naming the value.
PlacementMechanism parse_placement_mechanism(const std::string& text);
const char* to_string(PlacementMechanism mechanism);

// Resolves the CPUs of each service: `flags` are --placement NAME=CPULIST
// items (they win), `topology_cpus` the topology's per-service `cpus:` text.
// Throws std::invalid_argument naming the input when a service is unknown,
// named twice, left with no CPU, or given a CPU outside `allowed`.
std::map<std::string, std::vector<int>> resolve_placements(const std::vector<std::string>& flags,
                                                           const std::map<std::string, std::string>& topology_cpus,
                                                           const std::set<std::string>& services,
                                                           const std::vector<int>& allowed);

// Throws std::invalid_argument("<what>: CPU N is not one this process may use
// (allowed: LIST)") for the first CPU of `cpus` outside `allowed`, and refuses
// an empty set.
void check_cpus_allowed(const std::vector<int>& cpus, const std::vector<int>& allowed, const std::string& what);

// Sets the affinity of `pid`'s main thread (0: the calling thread, as a forked
// child before exec does); async-signal-safe apart from the vector read.
// Returns errno, 0 on success.
int set_process_affinity(const std::vector<int>& cpus, pid_t pid = 0);

// What /proc says about every thread of a process, accumulated over samples
// (short-lived std::async threads are only seen while they run).
class ThreadAffinityObserver {
 public:
  // Reads /proc/PID/task/*/status once; returns the number of threads seen now.
  int sample(pid_t pid);
  // {requested_cpus, mechanism, threads, applied_cpus, all_threads_within, samples}.
  nlohmann::json to_json(const std::vector<int>& requested, const std::string& mechanism) const;
  const std::set<std::string>& applied_lists() const { return applied_; }
  bool all_within(const std::vector<int>& requested) const;
  // Counts `tid` once however often it is seen (sample() calls it for every thread it reads).
  void record_thread(uint32_t tid);
  size_t distinct_threads() const { return distinct_threads_; }
  // What the distinct-thread record holds: at most kMaxTid / 8 bytes, however long the run.
  size_t record_bytes() const { return seen_tids_.capacity() * sizeof(uint64_t); }

  // Linux's PID_MAX_LIMIT on 64-bit (2^22): no thread id is larger.
  static constexpr uint32_t kMaxTid = 1U << 22;

 private:
  // Distinct thread ids ever seen, one bit per id. The supervisor samples every service five
  // times a second for the whole run, and a std-async service starts threads per call: the
  // set of "pid/tid" strings this replaced grew by ~80 bytes per thread seen, without bound
  // (a 30-minute soak sees hundreds of thousands). A thread id reused by the kernel counts once,
  // as it did in the set.
  std::vector<uint64_t> seen_tids_;
  size_t distinct_threads_ = 0;
  std::set<std::string> applied_;  // distinct Cpus_allowed_list values
  int samples_ = 0;
};

// A cgroup v2 cpuset tree for one run: <our cgroup>/tailscope-svc-<pid>/<service>.
// create() throws std::runtime_error with a clear reason when cgroup v2
// cpusets are not available here (cgroup v1 owns cpuset, no permission, ...).
// The destructor moves nothing and removes the folders (the processes must
// have exited); it never throws.
class CgroupCpuset {
 public:
  static CgroupCpuset create(const std::string& run_name);
  CgroupCpuset(CgroupCpuset&& other) noexcept;
  CgroupCpuset& operator=(CgroupCpuset&&) = delete;
  CgroupCpuset(const CgroupCpuset&) = delete;
  ~CgroupCpuset();

  // Creates the service's cgroup with cpuset.cpus = `cpus`; throws on failure.
  void add_service(const std::string& service, const std::vector<int>& cpus);
  // Moves `pid` into the service's cgroup (before it execs); throws on failure.
  void attach(const std::string& service, pid_t pid);
  const std::string& root() const { return root_; }

 private:
  CgroupCpuset() = default;
  std::string root_;
  std::vector<std::string> children_;
};

// Where cgroup v2 is mounted and our own cgroup within it; "" + reason if none.
std::string cgroup2_own_dir(std::string* reason);

// A pipe the forked child waits on before exec, so the parent can open
// counters on it and move it into a cgroup while it is still single-threaded.
class ChildStartGate {
 public:
  ChildStartGate();
  ~ChildStartGate();
  ChildStartGate(const ChildStartGate&) = delete;
  ChildStartGate& operator=(const ChildStartGate&) = delete;
  // In the child: blocks until release(); returns false if the parent closed
  // the gate without releasing it (the child should _exit then).
  bool wait_in_child();
  // In the parent: lets the child go on to exec.
  void release();

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
};

}  // namespace tailscope::prof
