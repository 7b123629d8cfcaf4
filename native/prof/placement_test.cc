#include "prof/placement.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "core/affinity.h"

namespace tailscope::prof {
namespace {

const std::set<std::string> kServices = {"frontend", "search"};

std::string error_of(const std::vector<std::string>& flags, const std::map<std::string, std::string>& topo,
                     const std::vector<int>& allowed) {
  try {
    resolve_placements(flags, topo, kServices, allowed);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Placement, FlagWinsOverTheTopology) {
  const auto p = resolve_placements({"frontend=1"}, {{"frontend", "0"}, {"search", "0-1"}}, kServices, {0, 1});
  EXPECT_EQ(p.at("frontend"), std::vector<int>{1});
  EXPECT_EQ(p.at("search"), (std::vector<int>{0, 1}));
}

TEST(Placement, BadInputIsRefusedNamingIt) {
  EXPECT_NE(error_of({"frontend=5"}, {}, {0, 1}).find("CPU 5 is not one this process may use (allowed: 0-1)"),
            std::string::npos);
  EXPECT_NE(error_of({"frontend="}, {}, {0, 1}).find("no CPU: refused"), std::string::npos);
  EXPECT_NE(error_of({}, {{"search", ""}}, {0, 1}).find("service 'search'"), std::string::npos);
  EXPECT_NE(error_of({"nosuch=0"}, {}, {0, 1}).find("no service 'nosuch'"), std::string::npos);
  EXPECT_NE(error_of({"frontend=0", "frontend=1"}, {}, {0, 1}).find("placed twice"), std::string::npos);
  EXPECT_NE(error_of({"frontend"}, {}, {0, 1}).find("NAME=CPULIST"), std::string::npos);
  EXPECT_NE(error_of({"frontend=1-0"}, {}, {0, 1}).find("reversed"), std::string::npos);
  EXPECT_THROW(parse_placement_mechanism("docker"), std::invalid_argument);
}

// A forked child sets its affinity before starting threads; threads it starts
// later inherit the mask, and the observer sees every one of them.
TEST(Placement, ThreadsStartedLaterInheritTheProcessAffinity) {
#if defined(__SANITIZE_THREAD__)
  // TSan's runtime starts its own thread in the forked child before the test
  // can set the affinity, so that thread keeps the parent's mask.
  GTEST_SKIP() << "under TSan the forked child has a runtime thread created before its affinity was set";
#endif
  const int cpu = allowed_cpus().back();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (set_process_affinity({cpu}) != 0) _exit(3);
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) threads.emplace_back([] { ::sleep(2); });
    const char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) _exit(4);
    for (auto& t : threads) t.join();
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ThreadAffinityObserver observer;
  EXPECT_EQ(observer.sample(pid), 4);  // main + 3
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_EQ(observer.applied_lists(), std::set<std::string>{std::to_string(cpu)});
  EXPECT_TRUE(observer.all_within({cpu}));
  const auto j = observer.to_json({cpu}, "affinity");
  EXPECT_EQ(j["threads"], 4);
  EXPECT_EQ(j["all_threads_within"], true);
  if (allowed_cpus().size() > 1) {
    EXPECT_FALSE(observer.all_within({allowed_cpus().front()}));
  }
}

TEST(Placement, ObserverCountsDistinctThreadsInBoundedMemory) {
  // A std-async service observed for half an hour: hundreds of thousands of short-lived thread ids,
  // each seen in several samples. The record stays within one bit per possible id.
  ThreadAffinityObserver observer;
  for (int pass = 0; pass < 3; ++pass)
    for (uint32_t tid = 1000; tid < 401'000; ++tid) observer.record_thread(tid);
  EXPECT_EQ(observer.distinct_threads(), 400'000U);
  EXPECT_LE(observer.record_bytes(), ThreadAffinityObserver::kMaxTid / 8);
  observer.record_thread(ThreadAffinityObserver::kMaxTid);  // beyond Linux's limit: ignored, not stored
  EXPECT_EQ(observer.distinct_threads(), 400'000U);
  EXPECT_LE(observer.record_bytes(), ThreadAffinityObserver::kMaxTid / 8);
}

TEST(Placement, GateHoldsTheChildUntilReleased) {
  ChildStartGate gate;
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const bool released = gate.wait_in_child();
    const char byte = released ? 'r' : 'x';
    if (::write(out[1], &byte, 1) != 1) _exit(4);
    _exit(0);
  }
  ::close(out[1]);
  gate.release();
  char byte = 0;
  ASSERT_EQ(::read(out[0], &byte, 1), 1);
  EXPECT_EQ(byte, 'r');
  ::waitpid(pid, nullptr, 0);
  ::close(out[0]);
}

TEST(Placement, CgroupUnavailableIsAClearError) {
  std::string reason;
  const std::string dir = cgroup2_own_dir(&reason);
  try {
    CgroupCpuset set = CgroupCpuset::create("tailscope-test-" + std::to_string(::getpid()));
    EXPECT_FALSE(set.root().empty());  // available here: created (and removed by the destructor)
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cgroup v2 cpusets are unavailable here"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tailscope::prof
