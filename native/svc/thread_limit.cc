#include "svc/thread_limit.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace tailscope::svc {
namespace {

int64_t read_int(const std::string& path, int64_t fallback) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return fallback;
  try {
    return std::stoll(text);
  } catch (const std::exception&) {
    return fallback;
  }
}

// Tasks on the whole system: the 4th field of /proc/loadavg is "running/total".
int64_t system_tasks() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c, rt;
  if (!(in >> a >> b >> c >> rt)) return 0;
  const auto slash = rt.find('/');
  return slash == std::string::npos ? 0 : std::stoll(rt.substr(slash + 1));
}

std::string pids_cgroup_dir() {
  std::ifstream in("/proc/self/cgroup");
  std::string line, v2;
  while (std::getline(in, line)) {
    // v1: "8:pids:/path"; v2: "0::/path".
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers == "pids") return "/sys/fs/cgroup/pids" + path;
    if (controllers.empty()) v2 = "/sys/fs/cgroup" + path;
  }
  return v2;
}

int64_t own_vm_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  int64_t kb = 0;
  while (in >> key) {
    if (key == "VmSize:") {
      in >> kb;
      return kb * 1024;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

}  // namespace

ThreadHeadroom thread_headroom() {
  ThreadHeadroom h{std::numeric_limits<int64_t>::max(), "none"};
  auto consider = [&h](int64_t available, const std::string& why) {
    if (available < h.available) h = {std::max<int64_t>(available, 0), why};
  };
  const int64_t tasks = system_tasks();
  const int64_t threads_max = read_int("/proc/sys/kernel/threads-max", -1);
  if (threads_max > 0)
    consider(threads_max - tasks,
             "kernel.threads-max " + std::to_string(threads_max) + " with " + std::to_string(tasks) + " tasks in use");
  const int64_t pid_max = read_int("/proc/sys/kernel/pid_max", -1);
  if (pid_max > 0)
    consider(pid_max - tasks,
             "kernel.pid_max " + std::to_string(pid_max) + " with " + std::to_string(tasks) + " tasks in use");
  rlimit rl{};
  // Root (CAP_SYS_RESOURCE) is exempt from RLIMIT_NPROC; counting its use
  // would need a scan of every task of the user, so the whole limit is taken
  // as the bound (tasks of this user already running make it looser than real).
  if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    consider(static_cast<int64_t>(rl.rlim_cur), "RLIMIT_NPROC " + std::to_string(rl.rlim_cur) + " (ulimit -u)");
  const std::string cg = pids_cgroup_dir();
  if (!cg.empty()) {
    const int64_t max = read_int(cg + "/pids.max", -1);
    if (max > 0) {
      const int64_t current = read_int(cg + "/pids.current", 0);
      consider(max - current, "pids cgroup " + cg + ": pids.max " + std::to_string(max) + " with " +
                                  std::to_string(current) + " in use");
    }
  }
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    pthread_attr_t attr;
    size_t stack = 8u << 20;
    if (pthread_attr_init(&attr) == 0) {
      pthread_attr_getstacksize(&attr, &stack);
      pthread_attr_destroy(&attr);
    }
    const int64_t free_bytes = static_cast<int64_t>(rl.rlim_cur) - own_vm_bytes();
    consider(free_bytes / static_cast<int64_t>(std::max<size_t>(stack, 1)), "RLIMIT_AS " + std::to_string(rl.rlim_cur) +
                                                                                " bytes at " + std::to_string(stack) +
                                                                                " bytes of stack per thread");
  }
  return h;
}

void check_workers_fit(int64_t workers, int64_t processes, int64_t reserve_per_process) {
  if (workers <= 0)
    throw std::invalid_argument("--workers " + std::to_string(workers) + ": a pool needs at least one thread");
  const ThreadHeadroom h = thread_headroom();
  const int64_t need = (workers + reserve_per_process) * std::max<int64_t>(processes, 1);
  if (need > h.available) {
    std::ostringstream msg;
    msg << "--workers " << workers << ": above this process's thread limit — " << processes << " process(es) × ("
        << workers << " workers + " << reserve_per_process << " own threads) = " << need << " threads, but only "
        << h.available << " can be created (" << h.limit << ")";
    throw std::invalid_argument(msg.str());
  }
}

}  // namespace tailscope::svc
