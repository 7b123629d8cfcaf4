// CPU affinity: pinning threads to cores and recording where they ran.
//
// On a 2-core machine a cross-core wake-up costs more than most of what we
// measure, so every engine pins by default and writes the pinning into its
// result document; these helpers make that a one-liner and never fail silently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tailscope {

// CPUs this process may run on (sched_getaffinity), ascending.
std::vector<int> allowed_cpus();

// Parses a Linux cpu list such as "0-3,6,8-9". Throws std::invalid_argument
// with the offending text on malformed input or out-of-range CPU numbers.
std::vector<int> parse_cpu_list(std::string_view text);

// Formats CPUs as a compact cpu list ("0-2,5"); "" for an empty set.
std::string format_cpu_list(const std::vector<int>& cpus);

// Pins the calling thread to `cpus` (one or more). Returns false and fills
// `error` if the kernel refused (e.g. a CPU outside the cgroup's cpuset).
bool pin_current_thread(const std::vector<int>& cpus, std::string* error = nullptr);
inline bool pin_current_thread(int cpu, std::string* error = nullptr) {
  return pin_current_thread(std::vector<int>{cpu}, error);
}

// Removes any pinning of the calling thread (back to every allowed CPU).
bool unpin_current_thread(std::string* error = nullptr);

// CPUs the calling thread may run on now.
std::vector<int> current_thread_cpus();

// CPU the calling thread is on at this instant (sched_getcpu), -1 if unknown.
int current_cpu() noexcept;

// Picks two distinct CPUs for a "server" and a "client" side: the last and the
// first allowed CPU (so CPU 0, which takes most interrupts, goes to the client).
// With one CPU both get the same one and `shared` is set.
struct CpuPair {
  int server_cpu;
  int client_cpu;
  bool shared;
};
CpuPair default_cpu_pair();

}  // namespace tailscope
