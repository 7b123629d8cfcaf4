// Derived figures from counter readings: IPC, misses per kilo-instruction,
// top-down level 1. Each is computed from scaled values (multiplexing
// corrected) and is null with a reason when an input is unavailable.
#include <map>
#include <optional>
#include <string>

#include "prof/counters.h"

namespace tailscope::prof {
namespace {

using nlohmann::json;

struct Inputs {
  std::map<std::string, const EventReading*> by_name;

  // The scaled value, or nullopt with `why` set to the reason.
  std::optional<double> get(const std::string& name, std::string* why) const {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      *why = name + ": not counted";
      return std::nullopt;
    }
    if (!it->second->value) {
      *why = name + ": " + it->second->reason;
      return std::nullopt;
    }
    return it->second->scaled_value;
  }
  bool has(const std::string& name) const {
    auto it = by_name.find(name);
    return it != by_name.end() && it->second->value.has_value();
  }
};

json topdown(const Inputs& in, int pipeline_width) {
  json out = {{"frontend_bound", nullptr},
              {"bad_speculation", nullptr},
              {"backend_bound", nullptr},
              {"retiring", nullptr},
              {"pipeline_width", pipeline_width}};
  std::string why;
  if (in.by_name.count("topdown_fetch_bubbles")) {
    // Intel before Ice Lake (Yasin's level 1), slots from the PMU if exposed,
    // else pipeline_width × cycles.
    out["source"] = "intel topdown-* (sysfs)";
    // A plain double (not optional): gcc 12 misreads the optional as maybe-uninitialised.
    double slots = 0;
    if (in.has("topdown_total_slots")) {
      slots = in.get("topdown_total_slots", &why).value_or(0.0);
    } else if (const auto cycles = in.get("cycles", &why)) {
      slots = *cycles * pipeline_width;
    }
    const auto fetch = in.get("topdown_fetch_bubbles", &why);
    const auto issued = in.get("topdown_slots_issued", &why);
    const auto retired = in.get("topdown_slots_retired", &why);
    const auto recovery = in.get("topdown_recovery_bubbles", &why);
    if (slots > 0 && fetch && issued && retired && recovery) {
      const double fe = *fetch / slots, bad = (*issued - *retired + *recovery) / slots, ret = *retired / slots;
      out["frontend_bound"] = fe;
      out["bad_speculation"] = bad;
      out["retiring"] = ret;
      out["backend_bound"] = 1.0 - fe - bad - ret;
      return out;
    }
  } else if (in.by_name.count("topdown_frontend_slots")) {
    out["source"] = "amd zen4+ dispatch slots (raw)";
    const auto cycles = in.get("cycles", &why);
    const auto fe = in.get("topdown_frontend_slots", &why);
    const auto be = in.get("topdown_backend_slots", &why);
    const auto disp = in.get("topdown_dispatched_ops", &why);
    const auto ret = in.get("topdown_retired_ops", &why);
    if (cycles && *cycles > 0 && fe && be && disp && ret) {
      const double slots = *cycles * pipeline_width;
      out["frontend_bound"] = *fe / slots;
      out["backend_bound"] = *be / slots;
      out["bad_speculation"] = (*disp - *ret) / slots;
      out["retiring"] = *ret / slots;
      return out;
    }
  } else {
    why = "this CPU's PMU exposes no top-down events tailscope reads (docs/prof.md)";
  }
  out["reason"] = why.empty() ? "a top-down input counted 0 cycles or slots" : why;
  return out;
}

}  // namespace

json derived_json(const std::vector<EventReading>& readings, int pipeline_width) {
  Inputs in;
  for (const auto& r : readings) in.by_name[r.name] = &r;
  json out = json::object();
  json reasons = json::object();
  auto ratio = [&](const std::string& key, const std::string& num, const std::string& den, double factor) {
    std::string why;
    const auto n = in.get(num, &why);
    const auto d = n ? in.get(den, &why) : std::nullopt;
    if (n && d && *d > 0) {
      out[key] = *n / *d * factor;
    } else {
      out[key] = nullptr;
      reasons[key] = why.empty() ? den + " counted 0" : why;
    }
  };
  ratio("ipc", "instructions", "cycles", 1.0);
  ratio("l1d_mpki", "l1d_load_misses", "instructions", 1000.0);
  ratio("l1i_mpki", "l1i_load_misses", "instructions", 1000.0);
  ratio("llc_mpki", "llc_load_misses", "instructions", 1000.0);
  ratio("dtlb_mpki", "dtlb_load_misses", "instructions", 1000.0);
  ratio("itlb_mpki", "itlb_load_misses", "instructions", 1000.0);
  ratio("branch_mpki", "branch_misses", "instructions", 1000.0);
  out["topdown"] = topdown(in, pipeline_width);
  out["reasons"] = reasons;
  return out;
}

}  // namespace tailscope::prof
