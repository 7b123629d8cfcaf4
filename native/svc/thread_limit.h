// How many more threads this process may start, and which limit says so.
//
// `tailscope-svc --workers N` is swept up to 1000+ by the thread-count study;
// a value the machine cannot honour must fail before anything starts, with
// the limit named, rather than die half-way through pool creation. Threads
// are tasks to the kernel, so every task limit applies: kernel.threads-max,
// kernel.pid_max, RLIMIT_NPROC (per user; not enforced for root), the pids
// cgroup (v1 or v2), and RLIMIT_AS ÷ the default thread stack.
#pragma once

#include <cstdint>
#include <string>

namespace tailscope::svc {

struct ThreadHeadroom {
  int64_t available = 0;  // threads that may still be created (the tightest limit)
  std::string limit;      // which limit, e.g. "kernel.pid_max 32768 with 412 tasks in use"
};

ThreadHeadroom thread_headroom();

// Throws std::invalid_argument naming --workers when `workers` threads in each
// of `processes` processes (plus `reserve_per_process` threads of their own)
// do not fit the headroom, or when workers is 0.
void check_workers_fit(int64_t workers, int64_t processes, int64_t reserve_per_process);

}  // namespace tailscope::svc
