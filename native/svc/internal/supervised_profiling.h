// Per-service placement and counters under the supervisor (--all;
// docs/microservices.md, docs/prof.md). Kept apart from the supervisor's own
// logic (svc/supervisor.cc): it calls these at three points — in the forked
// child before exec, in the parent after fork, and on each tick — and once
// more when it writes the result.
#pragma once

#include <sys/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "prof/counters.h"
#include "prof/placement.h"
#include "svc/deployment.h"
#include "svc/service_options.h"
#include "svc/topology.h"

namespace tailscope::svc::internal {

// What the supervisor applies to and learns about one service.
struct ServiceProfile {
  std::vector<int> cpus;  // empty: no placement
  prof::ThreadAffinityObserver observer;
  std::vector<prof::CounterSet> counter_sets;  // one per incarnation (process mode) or one (cpu mode)
  std::string counters_reason;                 // why counting could not start, "" if it did
};

struct SupervisedProfiling {
  prof::PlacementMechanism mechanism = prof::PlacementMechanism::kAffinity;
  prof::CounterMode counter_mode = prof::CounterMode::kProcess;
  std::vector<prof::EventSpec> events;
  int pipeline_width = 4;
  std::optional<prof::CgroupCpuset> cgroup;
  std::map<std::string, ServiceProfile> services;
};

// Validates every placement and counter flag before any process starts: bad
// input exits 1 with nothing started and nothing written.
// A deployment's cpus (the service's, else its host's) take the place of the
// topology's; --placement still wins over both.
SupervisedProfiling prepare_profiling(const ServiceOptions& options, const Topology& topology,
                                      const Deployment* deployment);

// In the forked child, before exec, while it has one thread: the affinity set
// here is inherited by every thread and process the service creates later.
void apply_placement_in_child(const SupervisedProfiling& p, const ServiceProfile& s);

// In the parent, after fork and before the child may exec: the placement's
// affinity (also set again by the child itself), cgroup membership and the
// counter group (inherit + enable_on_exec), so no thread escapes. The parent
// sets the affinity too because it samples the child's threads from its first
// tick on, and on 2 cores a child just forked may not have run yet: it would
// be seen with the supervisor's CPUs. Throws when the affinity cannot be set.
void attach_profiling(SupervisedProfiling& p, const std::string& service, pid_t pid);

// The per-service `placement` and `counters` sections of the --all document.
void add_profiling_sections(const SupervisedProfiling& p, const std::string& service, nlohmann::json& out);

}  // namespace tailscope::svc::internal
