// Physical references of this machine: the cheapest possible version of each
// mechanism the studies use (create a thread, wake a parked thread, hand a
// value across cores, a loopback round trip, a syscall). Every later figure is
// stated as a ratio to these, measured in the same run.
//
// One reference per file, all behind this interface, so a reader can diff them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/hdr_histogram.h"

namespace tailscope::baseline {

// How the two sides of a reference are placed. `pinned`: the "client" side
// (creator, waker, sender) on client_cpu, the "server" side (new thread,
// waiter, receiver) on server_cpu. Unpinned: the scheduler decides, and the
// reference reports how often both sides were seen on the same CPU.
struct Placement {
  bool pinned = true;
  int client_cpu = 0;
  int server_cpu = 1;
  std::string variant() const { return pinned ? "pinned" : "unpinned"; }
  nlohmann::json to_json() const;
};

struct ReferenceConfig {
  int64_t iterations = 2000;        // recorded samples
  int64_t warmup_iterations = 200;  // run first, never recorded
  Placement placement;
};

struct ReferenceResult {
  HdrHistogram histogram = HdrHistogram::for_latency_ns();
  nlohmann::json observed = nlohmann::json::object();  // e.g. same_cpu_fraction
  std::string unavailable_reason;                      // non-empty: the reference could not run here
};

struct Reference {
  std::string name;  // stable key, e.g. "condvar_handoff"
  std::string what;  // one line: what one sample is, from which instant to which
  int64_t default_iterations;
  std::function<ReferenceResult(const ReferenceConfig&)> run;
};

// The references in report order.
const std::vector<Reference>& all_references();

// Each reference file defines one of these.
Reference thread_create_reference();
Reference condvar_handoff_reference();
Reference spin_handoff_reference();
Reference tcp_pingpong_reference();
Reference empty_syscall_reference();
Reference clock_read_reference();
// Not in all_references(): tailscope-asyncbench measures it beside the
// coroutine model (docs/async-study.md), so it is reported there, once.
Reference same_thread_resume_reference();

// Builds a Reference whose run() first checks the placement (CPUs inside this
// process's allowed set), so a bad --cpus fails with a message before any
// thread starts rather than terminating inside one.
Reference make_reference(std::string name, std::string what, int64_t default_iterations,
                         std::function<ReferenceResult(const ReferenceConfig&)> run);

// Shared helpers.
// Pins the calling thread as the client/server side of `placement` (no-op when unpinned).
void place_client(const Placement& placement);
void place_server(const Placement& placement);
// Counts samples where both sides ran on the same CPU.
struct SameCpuCounter {
  int64_t same = 0, total = 0;
  void add(int client_cpu, int server_cpu) {
    ++total;
    same += client_cpu == server_cpu ? 1 : 0;
  }
  nlohmann::json to_json() const;
};

}  // namespace tailscope::baseline
