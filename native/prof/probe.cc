#include "prof/probe.h"

#include <unistd.h>

#include "core/affinity.h"
#include "prof/counters.h"

namespace tailscope::prof {
namespace {

using nlohmann::json;

// A short loop with known work so counters that open have something to count.
void spin_a_little() {
  volatile uint64_t x = 1;
  for (int i = 0; i < 5'000'000; ++i) x = x * 6364136223846793005ull + 1;
}

json describe(const std::vector<EventSpec>& table, const std::vector<EventReading>& readings) {
  json events = json::object();
  for (size_t i = 0; i < readings.size(); ++i) {
    const auto& r = readings[i];
    const bool opened = r.error_number == 0 && table[i].unavailable.empty() && r.reason.rfind("read of", 0) != 0;
    json e = {{"hardware", r.hardware}, {"source", r.source}, {"opened", opened}, {"counted", r.value.has_value()}};
    if (r.value) {
      e["value"] = *r.value;
      e["time_enabled_ns"] = r.time_enabled_ns;
      e["time_running_ns"] = r.time_running_ns;
    } else {
      e["value"] = nullptr;
      e["reason"] = r.reason;
      e["errno"] = r.error_number ? json(r.error_number) : json(nullptr);
    }
    events[r.name] = e;
  }
  return events;
}

}  // namespace

json probe_counters() {
  const CpuIdentity cpu = read_cpu_identity();
  const std::string pmu = core_pmu_dir();
  json out = {{"cpu_identity", {{"vendor", cpu.vendor}, {"family", cpu.family}, {"model", cpu.model}}},
              {"pmu_sysfs", pmu.empty() ? json(nullptr) : json(pmu)},
              {"pmu_events", sysfs_event_names(pmu)},
              {"pipeline_width", default_pipeline_width(cpu)}};
  if (pmu.empty()) out["pmu_reason"] = "the kernel lists no core PMU under /sys/bus/event_source/devices (no PMU)";
  {
    const auto table = event_table(cpu, pmu, false);
    CounterSet set = CounterSet::for_process(::getpid(), table, false);
    spin_a_little();
    out["process"] = describe(table, set.read());
  }
  {
    const auto table = event_table(cpu, pmu, true);
    const int probe_cpu = allowed_cpus().front();
    CounterSet set = CounterSet::for_cpus({probe_cpu}, table);
    spin_a_little();
    out["cpu"] = describe(table, set.read());
    out["cpu_probed"] = probe_cpu;
  }
  return out;
}

}  // namespace tailscope::prof
