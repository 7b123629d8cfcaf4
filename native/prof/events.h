// The events tailscope counts, and where their codes come from.
//
// Generic PERF_COUNT_HW_* names are used only where they mean the same thing
// on every vendor (cycles, instructions, branch misses). Cache and TLB misses
// are raw codes from a small per-vendor table, because the generic cache
// events map to different hardware events per vendor and kernel version (the
// reference thesis was misled by exactly that). docs/prof.md lists the table.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tailscope::prof {

// The CPU as /proc/cpuinfo names it; the event table is chosen from it.
struct CpuIdentity {
  std::string vendor;  // GenuineIntel, AuthenticAMD, or "" if unknown
  int family = -1;
  int model = -1;
  std::string model_name;
};
CpuIdentity read_cpu_identity(const std::string& cpuinfo_path = "/proc/cpuinfo");

// One event to open: perf_event_attr.type/config plus where the code came from.
struct EventSpec {
  std::string name;         // tailscope's name: cycles, l1d_load_misses, task_clock_ns, topdown_* ...
  bool hardware = true;     // false: a software event that counts on any kernel
  uint32_t type = 0;        // PERF_TYPE_*
  uint64_t config = 0;      // generic id, raw code or sysfs-derived config
  double scale = 1.0;       // sysfs .scale (topdown-total-slots counts 2 per cycle on some parts)
  std::string source;       // "generic", "raw: intel-core", "sysfs: topdown-fetch-bubbles", "software"
  std::string unavailable;  // non-empty: no code for this CPU (the reason); not opened
};

// The hardware and software events tailscope's result documents name, in
// document order (docs/prof.md): software first, they always count.
const std::vector<std::string>& software_event_names();
const std::vector<std::string>& hardware_event_names();

// The table for this CPU: every software and hardware event, each with a code
// or an `unavailable` reason; plus the top-down events the PMU exposes in
// sysfs (Intel topdown-*) or the raw table provides (AMD Zen 4 and later).
// `per_cpu` selects cpu-clock instead of task-clock (task-clock is per task).
std::vector<EventSpec> event_table(const CpuIdentity& cpu, const std::string& pmu_dir, bool per_cpu);

// The core PMU's sysfs folder (/sys/bus/event_source/devices/cpu, or cpu_core
// on hybrid parts), or "" if the kernel exposes none (a VM without a vPMU).
std::string core_pmu_dir(const std::string& devices_dir = "/sys/bus/event_source/devices");

// Parses a sysfs event description ("event=0x9c,umask=0x01,cmask=4") into a
// perf_event_attr.config using the PMU's format/ files ("config:0-7").
// Throws std::invalid_argument naming the term it cannot place.
uint64_t sysfs_event_config(const std::string& description, const std::string& pmu_dir);

// Event names the PMU lists under events/ (cpu-cycles, topdown-*, ...), sorted.
std::vector<std::string> sysfs_event_names(const std::string& pmu_dir);

}  // namespace tailscope::prof
