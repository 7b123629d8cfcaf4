#include "prof/events.h"

#include <linux/perf_event.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/machine_info.h"
#include "core/split.h"

namespace tailscope::prof {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

uint64_t parse_number(const std::string& text, const std::string& what) {
  uint64_t v = 0;
  const bool hex = text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0;
  const char* begin = text.data() + (hex ? 2 : 0);
  const auto [end, ec] = std::from_chars(begin, text.data() + text.size(), v, hex ? 16 : 10);
  if (ec != std::errc() || end != text.data() + text.size() || begin == end)
    throw std::invalid_argument(what + ": '" + text + "' is not a number");
  return v;
}

// AMD's event select is 12 bits: the low 8 at bits 0-7, the high 4 at 32-35.
constexpr uint64_t amd_raw(uint64_t event, uint64_t umask) {
  return (event & 0xff) | ((event >> 8) & 0xf) << 32 | (umask & 0xff) << 8;
}
constexpr uint64_t intel_raw(uint64_t event, uint64_t umask) { return (event & 0xff) | (umask & 0xff) << 8; }

struct RawRow {
  const char* name;
  uint64_t config;
  const char* meaning;
};

// Raw codes per CPU family, from the vendors' event references (Intel SDM
// vol. 3B / perfmon event lists for Skylake and later cores; AMD PPRs for
// family 17h and 19h). One row per tailscope event; docs/prof.md mirrors it.
const std::vector<RawRow>& intel_core_rows() {
  static const std::vector<RawRow> rows = {
      {"l1d_load_misses", intel_raw(0xd1, 0x08), "MEM_LOAD_RETIRED.L1_MISS"},
      {"l1i_load_misses", intel_raw(0x83, 0x02), "ICACHE_64B.IFTAG_MISS"},
      {"llc_load_misses", intel_raw(0xd1, 0x20), "MEM_LOAD_RETIRED.L3_MISS"},
      {"dtlb_load_misses", intel_raw(0x08, 0x0e), "DTLB_LOAD_MISSES.WALK_COMPLETED"},
      {"itlb_load_misses", intel_raw(0x85, 0x0e), "ITLB_MISSES.WALK_COMPLETED"},
  };
  return rows;
}
const std::vector<RawRow>& amd_zen12_rows() {
  static const std::vector<RawRow> rows = {
      {"l1d_load_misses", amd_raw(0x60, 0xc8), "L2 requests from L1D misses (l2_request_g1, the kernel's own)"},
      {"l1i_load_misses", amd_raw(0x81, 0x00), "ic_fw32_miss (instruction cache misses)"},
      {"llc_load_misses", amd_raw(0x43, 0x48), "ls_refills_from_sys: DRAM, local + remote"},
      {"dtlb_load_misses", amd_raw(0x45, 0xf0), "ls_l1_d_tlb_miss: missed L2 TLB too (page walk)"},
      {"itlb_load_misses", amd_raw(0x85, 0x07), "bp_l1_tlb_miss_l2_tlb_miss"},
  };
  return rows;
}
const std::vector<RawRow>& amd_zen3_rows() {
  static const std::vector<RawRow> rows = {
      {"l1d_load_misses", amd_raw(0x60, 0xc8), "L2 requests from L1D misses (l2_request_g1, the kernel's own)"},
      {"l1i_load_misses", amd_raw(0x18e, 0x18), "ic_tag_hit_miss.instruction_cache_miss"},
      {"llc_load_misses", amd_raw(0x44, 0x48), "ls_any_fills_from_sys: DRAM, near + far"},
      {"dtlb_load_misses", amd_raw(0x45, 0xf0), "ls_l1_d_tlb_miss: missed L2 TLB too (page walk)"},
      {"itlb_load_misses", amd_raw(0x85, 0x0f), "bp_l1_tlb_miss_l2_tlb_miss"},
  };
  return rows;
}
// Zen 4 and later: dispatch slots (6 per cycle) for top-down level 1.
const std::vector<RawRow>& amd_zen4_topdown_rows() {
  static const std::vector<RawRow> rows = {
      {"topdown_frontend_slots", amd_raw(0x1a0, 0x01), "de_no_dispatch_per_slot.no_ops_from_frontend"},
      {"topdown_backend_slots", amd_raw(0x1a0, 0x1e), "de_no_dispatch_per_slot.backend_stalls"},
      {"topdown_dispatched_ops", amd_raw(0xaa, 0x07), "de_src_op_disp.all"},
      {"topdown_retired_ops", amd_raw(0xc1, 0x00), "ex_ret_ops"},
  };
  return rows;
}

bool is_zen4_or_later(const CpuIdentity& c) {
  if (c.family >= 0x1a) return true;
  // Family 19h: Zen 3 is models 00-0F and 20-5F; Zen 4 is 10-1F and 60-AF.
  return c.family == 0x19 && ((c.model >= 0x10 && c.model <= 0x1f) || (c.model >= 0x60 && c.model <= 0xaf));
}

const std::vector<RawRow>* raw_rows_for(const CpuIdentity& c, std::string* family_name) {
  if (c.vendor == "GenuineIntel" && c.family == 6) {
    *family_name = "intel-core";
    return &intel_core_rows();
  }
  if (c.vendor == "AuthenticAMD" && c.family == 0x17) {
    *family_name = "amd-zen1-2";
    return &amd_zen12_rows();
  }
  if (c.vendor == "AuthenticAMD" && c.family >= 0x19) {
    *family_name = is_zen4_or_later(c) ? "amd-zen4+" : "amd-zen3";
    return &amd_zen3_rows();
  }
  return nullptr;
}

EventSpec software(const std::string& name, uint64_t config) {
  EventSpec e;
  e.name = name;
  e.hardware = false;
  e.type = PERF_TYPE_SOFTWARE;
  e.config = config;
  e.source = "software";
  return e;
}

EventSpec generic(const std::string& name, uint64_t config) {
  EventSpec e;
  e.name = name;
  e.type = PERF_TYPE_HARDWARE;
  e.config = config;
  e.source = "generic";
  return e;
}

// Intel's pre-Ice-Lake top-down events, as the kernel lists them in sysfs.
const std::vector<std::pair<std::string, std::string>>& intel_topdown_sysfs() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"topdown-total-slots", "topdown_total_slots"},           {"topdown-slots-issued", "topdown_slots_issued"},
      {"topdown-slots-retired", "topdown_slots_retired"},       {"topdown-fetch-bubbles", "topdown_fetch_bubbles"},
      {"topdown-recovery-bubbles", "topdown_recovery_bubbles"},
  };
  return names;
}

}  // namespace

CpuIdentity read_cpu_identity(const std::string& cpuinfo_path) {
  CpuIdentity id;
  std::ifstream in(cpuinfo_path);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      if (!id.vendor.empty()) break;  // end of the first CPU's block
      continue;
    }
    const std::string key = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    try {
      if (key == "vendor_id") id.vendor = value;
      if (key == "cpu family") id.family = static_cast<int>(parse_number(value, key));
      if (key == "model") id.model = static_cast<int>(parse_number(value, key));
    } catch (const std::invalid_argument&) {
      // an odd line leaves the field unknown; the table then says "no code for this CPU"
    }
    if (key == "model name") id.model_name = value;
  }
  return id;
}

const std::vector<std::string>& software_event_names() {
  static const std::vector<std::string> names = {"task_clock_ns", "context_switches", "cpu_migrations", "page_faults"};
  return names;
}

const std::vector<std::string>& hardware_event_names() {
  static const std::vector<std::string> names = {"cycles",           "instructions",    "l1d_load_misses",
                                                 "l1i_load_misses",  "llc_load_misses", "dtlb_load_misses",
                                                 "itlb_load_misses", "branch_misses"};
  return names;
}

std::string core_pmu_dir(const std::string& devices_dir) {
  for (const char* name : {"cpu", "cpu_core"}) {
    std::string dir = devices_dir + "/" + name;
    std::error_code ec;
    if (std::filesystem::exists(dir + "/type", ec)) return dir;
  }
  return "";
}

std::vector<std::string> sysfs_event_names(const std::string& pmu_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  if (pmu_dir.empty()) return names;
  for (const auto& entry : std::filesystem::directory_iterator(pmu_dir + "/events", ec)) {
    const std::string n = entry.path().filename().string();
    if (n.find('.') == std::string::npos) names.push_back(n);  // skip .scale / .unit files
  }
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t sysfs_event_config(const std::string& description, const std::string& pmu_dir) {
  uint64_t config = 0;
  for (const std::string& term : split_list(trim(description))) {
    const auto eq = term.find('=');
    const std::string field = trim(term.substr(0, eq));
    const uint64_t value = eq == std::string::npos ? 1 : parse_number(trim(term.substr(eq + 1)), field);
    std::string format;
    if (!read_small_file(pmu_dir + "/format/" + field, &format))
      throw std::invalid_argument("event term '" + term + "': the PMU has no format/" + field);
    format = trim(format);
    if (format.rfind("config:", 0) != 0)
      throw std::invalid_argument("event term '" + term + "': format '" + format + "' is not in config");
    // Bits are listed low part first ("0-7,32-35"); the value fills them in order.
    uint64_t rest = value;
    for (const std::string& range : split_list(format.substr(7))) {
      const auto dash = range.find('-');
      const uint64_t lo = parse_number(range.substr(0, dash), "format " + field);
      const uint64_t hi = dash == std::string::npos ? lo : parse_number(range.substr(dash + 1), "format " + field);
      if (hi < lo || hi > 63) throw std::invalid_argument("format " + field + ": bad range '" + range + "'");
      const uint64_t width = hi - lo + 1;
      const uint64_t mask = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
      config |= (rest & mask) << lo;
      rest = width == 64 ? 0 : rest >> width;
    }
    if (rest != 0) throw std::invalid_argument("event term '" + term + "': value does not fit format " + format);
  }
  return config;
}

std::vector<EventSpec> event_table(const CpuIdentity& cpu, const std::string& pmu_dir, bool per_cpu) {
  std::vector<EventSpec> out;
  // task-clock counts only while a task of the target runs; per-CPU counting
  // has no task, so it uses cpu-clock (time the CPU was counted).
  out.push_back(software("task_clock_ns", per_cpu ? PERF_COUNT_SW_CPU_CLOCK : PERF_COUNT_SW_TASK_CLOCK));
  out.push_back(software("context_switches", PERF_COUNT_SW_CONTEXT_SWITCHES));
  out.push_back(software("cpu_migrations", PERF_COUNT_SW_CPU_MIGRATIONS));
  out.push_back(software("page_faults", PERF_COUNT_SW_PAGE_FAULTS));
  // Generic ids where they mean what they say on every vendor: core cycles,
  // retired instructions, retired mispredicted branches.
  out.push_back(generic("cycles", PERF_COUNT_HW_CPU_CYCLES));
  out.push_back(generic("instructions", PERF_COUNT_HW_INSTRUCTIONS));
  std::string family;
  const std::vector<RawRow>* rows = raw_rows_for(cpu, &family);
  for (const char* name :
       {"l1d_load_misses", "l1i_load_misses", "llc_load_misses", "dtlb_load_misses", "itlb_load_misses"}) {
    EventSpec e;
    e.name = name;
    e.type = PERF_TYPE_RAW;
    const RawRow* row = nullptr;
    if (rows)
      for (const auto& r : *rows)
        if (e.name == r.name) row = &r;
    if (row) {
      e.config = row->config;
      e.source = "raw: " + family + " " + row->meaning;
    } else {
      e.unavailable = "no raw code for this CPU (" + (cpu.vendor.empty() ? std::string("unknown vendor") : cpu.vendor) +
                      " family " + std::to_string(cpu.family) + ") in the table (docs/prof.md)";
    }
    out.push_back(e);
  }
  out.push_back(generic("branch_misses", PERF_COUNT_HW_BRANCH_MISSES));
  // Top-down level 1 inputs: Intel's from sysfs, AMD Zen 4's from the table.
  if (!pmu_dir.empty()) {
    std::string type_text;
    read_small_file(pmu_dir + "/type", &type_text);
    uint32_t type = PERF_TYPE_RAW;
    try {
      type = static_cast<uint32_t>(parse_number(trim(type_text), pmu_dir + "/type"));
    } catch (const std::invalid_argument&) {
    }
    for (const auto& [sysfs_name, name] : intel_topdown_sysfs()) {
      std::string desc;
      if (!read_small_file(pmu_dir + "/events/" + sysfs_name, &desc)) continue;
      EventSpec e;
      e.name = name;
      e.type = type;
      e.source = "sysfs: " + sysfs_name;
      try {
        e.config = sysfs_event_config(desc, pmu_dir);
      } catch (const std::invalid_argument& err) {
        e.unavailable = err.what();
      }
      std::string scale;
      if (read_small_file(pmu_dir + "/events/" + sysfs_name + ".scale", &scale)) {
        try {
          e.scale = std::stod(scale);
        } catch (const std::exception&) {
          e.unavailable = "unreadable " + sysfs_name + ".scale";
        }
      }
      out.push_back(e);
    }
  }
  if (cpu.vendor == "AuthenticAMD" && is_zen4_or_later(cpu))
    for (const auto& r : amd_zen4_topdown_rows()) {
      EventSpec e;
      e.name = r.name;
      e.type = PERF_TYPE_RAW;
      e.config = r.config;
      e.source = std::string("raw: amd-zen4+ ") + r.meaning;
      out.push_back(e);
    }
  return out;
}

}  // namespace tailscope::prof
