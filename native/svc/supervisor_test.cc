// The supervisor's decisions that need no root and no children: the command
// line a child gets (the one-service form of the supervisor's own options),
// how a child's end is recorded, when a dead child starts again, and how the
// services' OTLP export counters add up in the merged document.
#include "svc/supervisor.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <string>
#include <vector>

namespace tailscope::svc {
namespace {

using nlohmann::json;

// The value after `flag` in args, or "<absent>".
std::string value_of(const std::vector<std::string>& args, const std::string& flag) {
  const auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || it + 1 == args.end() ? "<absent>" : *(it + 1);
}

bool has(const std::vector<std::string>& args, const std::string& flag) {
  return std::find(args.begin(), args.end(), flag) != args.end();
}

SupervisedChild child_on_fd(int fd) {
  SupervisedChild c;
  c.service = "text";
  c.listen_fd = fd;
  return c;
}

TEST(ChildArguments, AChildRunsItsOneServiceOnTheInheritedListener) {
  ServiceOptions o;
  o.topology = "g.json";
  o.all = true;
  o.model = "pool-callback";
  o.trace_sample = 0.5;
  const auto args = child_arguments(o, child_on_fd(7), "text=9001,uid=9002", "/bin/tailscope-svc", "/tmp/parts");
  ASSERT_FALSE(args.empty());
  EXPECT_EQ(args[0], "/bin/tailscope-svc");
  EXPECT_FALSE(has(args, "--all"));  // a child is one service, never a supervisor again
  EXPECT_EQ(value_of(args, "--topology"), "g.json");
  EXPECT_EQ(value_of(args, "--service"), "text");
  EXPECT_EQ(value_of(args, "--model"), "pool-callback");
  EXPECT_EQ(value_of(args, "--listen-fd"), "7");
  EXPECT_EQ(value_of(args, "--bind"), "127.0.0.1");
  EXPECT_EQ(value_of(args, "--ports"), "text=9001,uid=9002");
  EXPECT_FALSE(has(args, "--peers"));
  EXPECT_EQ(value_of(args, "--trace-sample"), std::to_string(0.5));
  EXPECT_EQ(value_of(args, "--out"), "/tmp/parts/text.result.json");
  // Options left at their defaults are not passed: the child's defaults apply.
  for (const char* flag : {"--traces", "--workers", "--loops", "--timeout-ms", "--link-delay", "--otlp-endpoint"})
    EXPECT_FALSE(has(args, flag)) << flag;
  // These always are: the child must not pick its own.
  EXPECT_EQ(value_of(args, "--queue"), std::to_string(o.runtime.queue_capacity));
  EXPECT_EQ(value_of(args, "--connections"), std::to_string(o.runtime.channel_connections));
  EXPECT_EQ(value_of(args, "--pool-idle-s"), std::to_string(o.pool_idle_s));
  EXPECT_EQ(value_of(args, "--work"), "real");
}

TEST(ChildArguments, TheWorkModeReachesEveryChild) {
  ServiceOptions o;
  o.topology = "g.json";
  o.work = "simulated";
  EXPECT_EQ(value_of(child_arguments(o, child_on_fd(3), "text=9001", "/bin/tailscope-svc", "/tmp/parts"), "--work"),
            "simulated");
}

TEST(ChildArguments, SetOptionsAndADeploymentsPeersAndLinksReachTheChild) {
  ServiceOptions o;
  o.topology = "g.json";
  o.traces_dir = "/tmp/traces";
  o.runtime.workers = 8;
  o.runtime.loops = 2;
  o.timeout_ms = 250;
  o.otlp_endpoint = "http://127.0.0.1:4318";
  o.otlp_queue_spans = 1024;
  SupervisedChild c = child_on_fd(5);
  c.address = "198.18.0.2";
  c.peer_args = "text=198.18.0.2:9001,uid=198.18.0.3:9002";
  c.link_delays = LinkDelayTable::parse("198.18.0.3=500");
  const auto args = child_arguments(o, c, "text=9001,uid=9002", "/bin/tailscope-svc", "/tmp/parts");
  EXPECT_EQ(value_of(args, "--bind"), "198.18.0.2");
  EXPECT_EQ(value_of(args, "--peers"), c.peer_args);  // where its peers are, not --ports
  EXPECT_FALSE(has(args, "--ports"));
  EXPECT_EQ(value_of(args, "--link-delay"), c.link_delays.to_flag());
  EXPECT_EQ(value_of(args, "--traces"), "/tmp/traces/parts");  // spans go to parts/, merged by the supervisor
  EXPECT_EQ(value_of(args, "--workers"), "8");
  EXPECT_EQ(value_of(args, "--loops"), "2");
  EXPECT_EQ(value_of(args, "--timeout-ms"), std::to_string(250.0));
  EXPECT_EQ(value_of(args, "--otlp-endpoint"), "http://127.0.0.1:4318");
  EXPECT_EQ(value_of(args, "--otlp-queue-spans"), "1024");
}

TEST(ChildArguments, TheStoreModeAndAddressesReachEveryChild) {
  ServiceOptions o;
  o.topology = "g.json";
  o.all = true;
  SupervisedChild c = child_on_fd(3);
  c.store_args = {"--stores", "real", "--store-addr", "redis=127.0.0.1:4000"};
  const auto args = child_arguments(o, c, "text=1", "/bin/tailscope-svc", "/tmp/parts");
  EXPECT_EQ(value_of(args, "--stores"), "real");
  EXPECT_EQ(value_of(args, "--store-addr"), "redis=127.0.0.1:4000");
}

TEST(ExitStatusText, SaysHowAChildEnded) {
  EXPECT_EQ(exit_status_text(W_EXITCODE(3, 0)), "exit 3");
  EXPECT_EQ(exit_status_text(W_EXITCODE(0, 0)), "exit 0");
  EXPECT_EQ(exit_status_text(W_EXITCODE(0, SIGKILL)), "signal 9");
}

TEST(RestartDue, ADeadChildStartsAgainOnceRestartMsHavePassedAndNeverWithZero) {
  SupervisedChild c;
  c.pid = 1234;
  c.died_ns = 0;
  EXPECT_FALSE(restart_due(c, 10'000'000'000, 1000));  // running
  c.pid = -1;
  c.died_ns = 5'000'000'000;
  EXPECT_FALSE(restart_due(c, 5'999'999'999, 1000));
  EXPECT_TRUE(restart_due(c, 6'000'000'000, 1000));
  EXPECT_FALSE(restart_due(c, 600'000'000'000, 0));  // --restart-ms 0: never
}

TEST(SumOtlpExports, AddsCountersAndStatusesAndKeepsTheFirstErrorByService) {
  const json services = {
      {"a",
       {{"otlp_export",
         {{"spans_sent", 10},
          {"spans_dropped_queue_full", 1},
          {"queue_capacity_spans", 4096},
          {"http_statuses", {{"200", 3}, {"503", 1}}},
          {"last_error", "connection refused"}}}}},
      {"b",
       {{"otlp_export",
         {{"spans_sent", 5},
          {"queue_capacity_spans", 4096},
          {"http_statuses", {{"200", 2}}},
          {"last_error", "timeout"}}}}},
      {"c", {{"counters", json::object()}}},  // exported nothing
  };
  const json sum = sum_otlp_exports(services, "http://127.0.0.1:4318");
  EXPECT_EQ(sum["endpoint"], "http://127.0.0.1:4318");
  EXPECT_EQ(sum["spans_sent"], 15);
  EXPECT_EQ(sum["spans_dropped_queue_full"], 1);
  EXPECT_FALSE(sum.contains("queue_capacity_spans"));  // a capacity per service, not a count to add
  EXPECT_EQ(sum["http_statuses"], (json{{"200", 5}, {"503", 1}}));
  EXPECT_EQ(sum["last_error"], "a: connection refused");  // services in name order: a's is first
}

TEST(SumOtlpExports, NothingExportedIsZeroStatusesAndNoError) {
  const json sum = sum_otlp_exports(json::object(), "http://127.0.0.1:4318");
  EXPECT_EQ(sum["http_statuses"], json::object());
  EXPECT_TRUE(sum["last_error"].is_null());
}

}  // namespace
}  // namespace tailscope::svc
