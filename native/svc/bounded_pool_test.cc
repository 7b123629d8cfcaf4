// BoundedPool when the system refuses threads: the refused ones are counted,
// the pool serves with the threads it got, and with none it rejects instead
// of queueing work nobody will run. The refusal is real: a forked child drops
// to an unprivileged user and lowers RLIMIT_NPROC to the tasks that user
// already has plus a few.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>

#include "svc/server.h"

namespace tailscope::svc {
namespace {

// Tasks (threads) whose real uid is `uid`: what RLIMIT_NPROC counts.
int tasks_of_uid(uid_t uid) {
  int n = 0;
  DIR* proc = opendir("/proc");
  if (!proc) return -1;
  while (dirent* p = readdir(proc)) {
    if (p->d_name[0] < '0' || p->d_name[0] > '9') continue;
    const std::string tasks = std::string("/proc/") + p->d_name + "/task";
    DIR* td = opendir(tasks.c_str());
    if (!td) continue;
    while (dirent* t = readdir(td)) {
      if (t->d_name[0] < '0' || t->d_name[0] > '9') continue;
      std::ifstream status(tasks + "/" + t->d_name + "/status");
      std::string key;
      while (status >> key)
        if (key == "Uid:") {
          uid_t real = 0;
          status >> real;
          n += real == uid;
          break;
        }
    }
    closedir(td);
  }
  closedir(proc);
  return n;
}

// Runs body in a child limited to `extra` more tasks than its user has;
// returns the child's exit code (0 = every check passed).
template <class Body>
int in_limited_child(int extra, Body body) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0) {  // root ignores RLIMIT_NPROC: become nobody (65534) first
      if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(90);
    }
    const int now = tasks_of_uid(getuid());
    if (now < 1) _exit(91);
    const rlim_t limit = static_cast<rlim_t>(now + extra);
    rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_NPROC, &rl) != 0) _exit(92);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST(BoundedPool, CountsRefusedThreadsAndServesWithTheRest) {
  const int rc = in_limited_child(3, [] {
    BoundedPool pool(20, 100);
    if (pool.workers() + pool.threads_failed() != 20) return 1;
    if (pool.threads_failed() < 17 || pool.workers() < 1) return 2;  // at most 3 more tasks were allowed
    std::atomic<int> ran{0};
    for (int i = 0; i < 10; ++i)
      if (!pool.try_submit([&ran] { ran.fetch_add(1); })) return 3;
    pool.stop();
    return ran.load() == 10 ? 0 : 4;
  });
  EXPECT_EQ(rc, 0);
}

TEST(BoundedPool, WithNoThreadAtAllEveryRequestIsRejected) {
  const int rc = in_limited_child(0, [] {
    BoundedPool pool(5, 100);
    if (pool.workers() != 0 || pool.threads_failed() != 5) return 1;
    return pool.try_submit([] {}) ? 2 : 0;
  });
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace tailscope::svc
