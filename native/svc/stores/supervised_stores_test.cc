// `tailscope-svc --all` on real stores, as a user runs it: the ready line
// names the servers, a thread model's and an event-loop model's requests
// reach them (blocking clients; clients on the model's loops), a store killed
// mid-run fails its calls unavailable (counted, the run flagged) while what
// needs no store keeps serving, a store killed as the run stops is recorded as
// died too, and after the run no store process and no data directory is left. Skipped, with the reason, when a server
// binary is absent.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "svc/stores/store_servers.h"
#include "svc/testing/graph_harness.h"

namespace tailscope::svc::stores {
namespace {

using nlohmann::json;

const char* kGraph = R"({
  "name": "stores-all", "call_timeout_ms": 2000,
  "front": {"service": "front", "path": "/all", "endpoint": "all", "routes": [{"path": "/cpu", "endpoint": "cpu"}]},
  "services": [
    {"name": "front", "endpoints": [
      {"name": "all", "stages": [
        {"store": {"span": "mc_set", "system": "memcached", "latency": 1, "op": "set", "key": "a:{user}"}},
        {"call": {"service": "back", "endpoint": "store"}}]},
      {"name": "cpu", "stages": [{"cpu": 2}]}]},
    {"name": "back", "endpoints": [{"name": "store", "stages": [
      {"store": {"span": "r_zadd", "system": "redis", "latency": 1, "op": "zadd", "key": "t:{user}"}},
      {"store": {"span": "d_ins", "system": "mongodb", "latency": 1, "op": "insert", "collection": "posts",
                 "key": "post:{post}"}},
      {"store": {"span": "d_find", "system": "mongodb", "latency": 1, "op": "find", "collection": "users",
                 "key": "user:{user}"}}]}]}]})";

std::string skip_reason() {
  for (StoreSystem s : {StoreSystem::kMemcached, StoreSystem::kRedis, StoreSystem::kMongodb}) {
    std::string missing;
    if (!find_store_binary(s, &missing)) return missing;
  }
  return "";
}

class SupervisedStores : public ::testing::TestWithParam<std::string> {};

TEST_P(SupervisedStores, AllOnRealStoresSurvivesAKilledStoreAndLeavesNothingBehind) {
  if (const std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  char tmpl[] = "/tmp/tailscope-supervised-stores-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string topology = dir + "/g.json", out = dir + "/out.json";
  std::ofstream(topology) << kGraph;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[0]);
    ::execl(TAILSCOPE_SVC_BINARY, TAILSCOPE_SVC_BINARY, "--topology", topology.c_str(), "--all", "--model",
            GetParam().c_str(), "--stores", "real", "--out", out.c_str(), "--restart-ms", "0", nullptr);
    _exit(127);
  }
  ::close(pipe_fds[1]);
  FILE* ready_in = ::fdopen(pipe_fds[0], "r");
  char line[16384];
  ASSERT_NE(std::fgets(line, sizeof line, ready_in), nullptr) << "no ready line";
  const json ready = json::parse(line);
  ASSERT_EQ(ready["stores"]["mode"], "real") << ready.dump();
  std::map<std::string, pid_t> store_pids;
  for (const auto& s : ready["stores"]["servers"]) store_pids[s["system"]] = s["pid"].get<pid_t>();
  ASSERT_EQ(store_pids.size(), 3u) << ready.dump();

  const int fd = svc::testing::connect_to(ready["listening"].get<int>());
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(svc::testing::http_get(fd, "/all"), 200);
  ::kill(store_pids.at("redis"), SIGKILL);  // a store dies mid-run
  for (int i = 0; i < 3; ++i) {
    const int status = svc::testing::http_get(fd, "/all");
    EXPECT_NE(status, 0) << "no answer: a hung call";
    EXPECT_NE(status, 200);
    EXPECT_EQ(svc::testing::http_get(fd, "/cpu"), 200) << "what needs no store keeps serving";
  }
  ::close(fd);
  // A store that dies in the run's last tick, as the run stops: whether the supervisor's last
  // reap saw it or not (it may still be exiting), it is recorded as died, not measured.
  ::kill(store_pids.at("memcached"), SIGKILL);
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::fclose(ready_in);

  const json doc = json::parse(std::ifstream(out));
  const json& st = doc["stores"];
  EXPECT_EQ(st["mode"], "real");
  EXPECT_FALSE(st["flagged"].is_null()) << "a store died: the run is flagged";
  EXPECT_GE(st["systems"]["redis"]["errors_unavailable"].get<int64_t>(), 3);
  EXPECT_GE(st["systems"]["memcached"]["ops"].get<int64_t>(), 6);
  EXPECT_EQ(st["systems"]["mongodb"]["ops"].get<int64_t>(), 3 * 2);  // none after redis failed the handler
  for (const auto& s : st["servers"]) {
    if (s["system"] == "redis" || s["system"] == "memcached") {
      EXPECT_FALSE(s["died"].is_null()) << s.dump();
      EXPECT_TRUE(s["cpu_s"].is_null()) << s.dump();
      EXPECT_TRUE(s["cpu_s_reason"].is_string()) << s.dump();
      EXPECT_TRUE(s["max_rss_kib"].is_null()) << s.dump();
    } else {
      EXPECT_TRUE(s["cpu_s"].is_number()) << s.dump();
      EXPECT_TRUE(s["max_rss_kib"].is_number()) << s.dump();
    }
  }
  for (const auto& [_, s] : doc["services"].items()) EXPECT_EQ(s["stores"], "real");
  // Nothing left: no store process (nor its group), no data directory.
  for (const auto& [system, p] : store_pids) {
    EXPECT_EQ(::kill(p, 0), -1) << system << " pid " << p << " is left";
    EXPECT_EQ(::kill(-p, 0), -1) << system << ": a process of its group is left";
  }
  for (const auto& s : st["servers"])
    for (const auto& arg : s["command"]) {
      const std::string a = arg.get<std::string>();
      if (a.rfind("/tmp/", 0) == 0) {
        EXPECT_FALSE(std::filesystem::exists(a)) << a << " is left";
      }
    }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, SupervisedStores, ::testing::Values("std-thread", "coroutine"));

}  // namespace
}  // namespace tailscope::svc::stores
