#include "svc/internal/supervised_profiling.h"

#include <unistd.h>

#include <cstring>
#include <set>
#include <stdexcept>

#include "core/affinity.h"

namespace tailscope::svc::internal {

using nlohmann::json;

SupervisedProfiling prepare_profiling(const ServiceOptions& options, const Topology& topology,
                                      const Deployment* deployment) {
  SupervisedProfiling p;
  p.mechanism = prof::parse_placement_mechanism(options.placement_mechanism);
  p.counter_mode = prof::parse_counter_mode(options.counters);
  std::map<std::string, std::string> topology_cpus;
  std::set<std::string> names;
  for (const auto& [name, s] : topology.services) {
    names.insert(name);
    const std::string cpus = deployment && !deployment->cpus_of(name).empty() ? deployment->cpus_of(name) : s.cpus;
    if (!cpus.empty()) topology_cpus[name] = cpus;
  }
  const auto placed = prof::resolve_placements(options.placements, topology_cpus, names, allowed_cpus());
  for (const auto& name : names) p.services[name].cpus = placed.count(name) ? placed.at(name) : std::vector<int>{};
  if (p.mechanism == prof::PlacementMechanism::kCgroup && !placed.empty()) {
    p.cgroup.emplace(prof::CgroupCpuset::create("tailscope-svc-" + std::to_string(getpid())));
    for (const auto& [name, cpus] : placed) p.cgroup->add_service(name, cpus);
  }
  if (p.counter_mode != prof::CounterMode::kOff) {
    const prof::CpuIdentity cpu = prof::read_cpu_identity();
    p.events = prof::event_table(cpu, prof::core_pmu_dir(), p.counter_mode == prof::CounterMode::kCpu);
    p.pipeline_width = prof::default_pipeline_width(cpu);
  }
  return p;
}

void apply_placement_in_child(const SupervisedProfiling& p, const ServiceProfile& s) {
  if (s.cpus.empty() || p.mechanism != prof::PlacementMechanism::kAffinity) return;
  if (prof::set_process_affinity(s.cpus) != 0) _exit(125);
}

void attach_profiling(SupervisedProfiling& p, const std::string& service, pid_t pid) {
  ServiceProfile& s = p.services[service];
  if (!s.cpus.empty() && p.mechanism == prof::PlacementMechanism::kAffinity) {
    if (const int err = prof::set_process_affinity(s.cpus, pid))
      throw std::runtime_error("placement of " + service + ": sched_setaffinity: " + std::strerror(err));
  }
  if (p.cgroup && !s.cpus.empty()) p.cgroup->attach(service, pid);
  if (p.counter_mode == prof::CounterMode::kProcess) {
    s.counter_sets.push_back(prof::CounterSet::for_process(pid, p.events, true));
  } else if (p.counter_mode == prof::CounterMode::kCpu && s.counter_sets.empty()) {
    if (s.cpus.empty())
      s.counters_reason = "--counters cpu counts the CPUs a service is placed on; this service has no placement";
    else
      s.counter_sets.push_back(prof::CounterSet::for_cpus(s.cpus, p.events));
  }
}

void add_profiling_sections(const SupervisedProfiling& p, const std::string& service, nlohmann::json& out) {
  const ServiceProfile& s = p.services.at(service);
  out["placement"] = s.observer.to_json(s.cpus, prof::to_string(p.mechanism));
  json counters;
  if (p.counter_mode == prof::CounterMode::kOff) {
    counters = prof::counters_unavailable_json(p.counter_mode, "--counters off");
  } else if (s.counter_sets.empty()) {
    counters = prof::counters_unavailable_json(p.counter_mode, s.counters_reason);
  } else {
    std::vector<std::vector<prof::EventReading>> parts;
    for (const auto& set : s.counter_sets) parts.push_back(set.read());
    counters = prof::counters_json(p.counter_mode, prof::sum_readings(parts), p.pipeline_width);
    if (p.counter_mode == prof::CounterMode::kCpu)
      counters["note"] = "per-CPU counts include everything that ran on " + format_cpu_list(s.cpus);
  }
  // The service's own request counters live in the same object; these keys are new.
  if (!out.contains("counters") || !out["counters"].is_object()) out["counters"] = json::object();
  for (const auto& [key, value] : counters.items()) out["counters"][key] = value;
}

}  // namespace tailscope::svc::internal
