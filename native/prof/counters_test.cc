// The counter reader on a known child: a forked shell that burns CPU in two
// processes, counted from before its exec (inherit + enable_on_exec).
#include "prof/counters.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prof/placement.h"

namespace tailscope::prof {
namespace {

struct ChildRun {
  std::vector<EventReading> readings;
  double cpu_s = 0;  // the child's user + system time from wait4 (its reaped children included)
};

// Forks, opens the counters on the child before it execs, lets it exec `sh -c script`.
ChildRun run_counted(const std::string& script) {
  const auto table = event_table(read_cpu_identity(), core_pmu_dir(), false);
  ChildStartGate gate;
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!gate.wait_in_child()) _exit(126);
    ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  CounterSet set = CounterSet::for_process(pid, table, true);
  gate.release();
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ChildRun run;
  run.readings = set.read();
  run.cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  return run;
}

const EventReading& find(const std::vector<EventReading>& readings, const std::string& name) {
  for (const auto& r : readings)
    if (r.name == name) return r;
  throw std::runtime_error("no reading " + name);
}

// Two shell loops, one in a forked subshell: the inherited counters must see both.
constexpr const char* kBurn =
    "i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done & "
    "j=0; while [ $j -lt 150000 ]; do j=$((j+1)); done; wait";

TEST(CounterSet, TaskClockMatchesTheChildsCpuTime) {
  const ChildRun run = run_counted(kBurn);
  const EventReading& clock = find(run.readings, "task_clock_ns");
  ASSERT_TRUE(clock.value.has_value()) << clock.reason;
  const double counted_s = static_cast<double>(*clock.value) / 1e9;
  ASSERT_GT(run.cpu_s, 0.05);
  // rusage ticks at the scheduler's accounting granularity; task-clock is exact.
  EXPECT_NEAR(counted_s, run.cpu_s, 0.1 * run.cpu_s + 0.02) << "task-clock " << counted_s << " s, rusage " << run.cpu_s;
  EXPECT_GT(clock.time_running_ns, 0u);
  EXPECT_EQ(clock.time_enabled_ns, clock.time_running_ns);  // software events are never multiplexed
}

TEST(CounterSet, InstructionsCountOrAreUnavailableWithTheErrno) {
  const ChildRun run = run_counted(kBurn);
  const EventReading& instructions = find(run.readings, "instructions");
  if (instructions.value) {
    EXPECT_GT(*instructions.value, 1'000'000u);
    EXPECT_GT(instructions.scaled_value, 0.0);
  } else {
    // No PMU (this VM): unavailable with the reason, never a 0.
    EXPECT_FALSE(instructions.reason.empty());
    const auto j = counters_json(CounterMode::kProcess, run.readings, 4);
    EXPECT_TRUE(j["events"]["instructions"]["value"].is_null());
    EXPECT_FALSE(j["events"]["instructions"]["reason"].get<std::string>().empty());
    if (instructions.error_number) {
      EXPECT_TRUE(j["events"]["instructions"].contains("errno"));
    }
    EXPECT_TRUE(j["derived"]["ipc"].is_null());
    EXPECT_FALSE(j["derived"]["reasons"]["ipc"].get<std::string>().empty());
  }
}

TEST(CounterSet, DerivedFiguresFromKnownReadings) {
  auto reading = [](const std::string& name, uint64_t value, uint64_t enabled, uint64_t running) {
    EventReading r;
    r.name = name;
    r.value = value;
    r.time_enabled_ns = enabled;
    r.time_running_ns = running;
    r.scaled_value = static_cast<double>(value) * enabled / running;
    return r;
  };
  std::vector<EventReading> rs = {reading("cycles", 1000, 10, 10), reading("instructions", 2000, 10, 10),
                                  reading("l1d_load_misses", 10, 10, 5)};  // multiplexed: half the time
  EventReading missing;
  missing.name = "llc_load_misses";
  missing.reason = "ENOENT (...): no PMU";
  missing.error_number = ENOENT;
  rs.push_back(missing);
  const auto j = derived_json(rs, 4);
  EXPECT_DOUBLE_EQ(j["ipc"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["l1d_mpki"].get<double>(), 20.0 / 2000 * 1000);  // scaled: 10 × 10/5
  EXPECT_TRUE(j["llc_mpki"].is_null());
  EXPECT_NE(j["reasons"]["llc_mpki"].get<std::string>().find("ENOENT"), std::string::npos);
  EXPECT_TRUE(j["topdown"]["retiring"].is_null());
  EXPECT_FALSE(j["topdown"]["reason"].get<std::string>().empty());
}

TEST(CounterSet, SummedIncarnationsKeepAnUnavailableEventUnavailable) {
  // A restarted service: one incarnation that did not count makes the sum unavailable, not smaller.
  EventReading cycles;
  cycles.name = "cycles";
  cycles.value = 5;
  EventReading clock;
  clock.name = "task_clock_ns";
  clock.hardware = false;
  clock.value = 7;
  EventReading gone = cycles;
  gone.value.reset();
  gone.reason = "opened but never counted";
  const auto sum = sum_readings({{cycles, clock}, {gone, clock}});
  EXPECT_FALSE(sum[0].value.has_value());
  EXPECT_EQ(sum[0].reason, "opened but never counted");
  ASSERT_TRUE(sum[1].value.has_value());
  EXPECT_EQ(*sum[1].value, 14u);
}

TEST(CounterSet, ModeNamesRoundTripAndBadOnesAreRefused) {
  for (const char* name : {"off", "process", "cpu"}) EXPECT_STREQ(to_string(parse_counter_mode(name)), name);
  EXPECT_THROW(parse_counter_mode("perf"), std::invalid_argument);
}

}  // namespace
}  // namespace tailscope::prof
