// Runs the workers of one tailscope-load run and merges what they measured.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/hdr_histogram.h"
#include "load/config.h"
#include "load/worker.h"

namespace tailscope::load {

struct MergedResult {
  WorkerResult totals;                        // histograms and counters summed
  std::vector<IntervalHistograms> intervals;  // merged per interval (--hlog)
  int64_t start_ns = 0, measure_start_ns = 0, measure_end_ns = 0, finished_ns = 0;
  int64_t start_late_ns = 0;  // --start-at: how far after it the schedule started (connecting overran it)
  double measured_s = 0;      // the window actually measured (shorter if aborted)
  bool complete = true;
  std::string aborted_reason;
  nlohmann::json server_resources, generator_resources;
  nlohmann::json io;                          // which --io path ran and why (plan_load_io)
  std::vector<double> busy_share_per_thread;  // per load thread: 1 − idle loop time ÷ loop time in the window
};

// Resolves --io: the path the workers use and the document's "io" object
// ({requested, used, reason, ring_setup, registered_files}). --io uring on a
// kernel without what it needs throws std::runtime_error with the reason;
// auto falls back to epoll and says why.
struct LoadIoPlan {
  LoadIo used = LoadIo::kEpoll;
  UringLoadPlan uring;
  nlohmann::json document;
};
LoadIoPlan plan_load_io(LoadIo requested);

// `interrupted` is polled (SIGINT/SIGTERM); server_pid > 0 samples that
// process during the window. Progress lines go to stderr.
MergedResult run_load(const LoadConfig& config, const std::atomic<bool>& interrupted, pid_t server_pid);

// The result document body (measurements, load summary, self-checks).
void fill_document(nlohmann::json& doc, const LoadConfig& config, const MergedResult& result);

// Exit code policy: 0 complete and error-free; 3 errors or incomplete.
inline constexpr int kExitErrors = 3;

}  // namespace tailscope::load
