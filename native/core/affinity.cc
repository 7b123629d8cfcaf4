#include "core/affinity.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>

namespace tailscope {
namespace {

bool apply(const std::vector<int>& cpus, std::string* error) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      if (error) *error = "cpu " + std::to_string(cpu) + " out of range";
      return false;
    }
    CPU_SET(cpu, &set);
  }
  int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0) {
    if (error) *error = "pthread_setaffinity_np(" + format_cpu_list(cpus) + "): " + std::strerror(rc);
    return false;
  }
  return true;
}

std::vector<int> from_set(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

int parse_int(std::string_view text, std::string_view whole) {
  int value = -1;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0 || value >= CPU_SETSIZE)
    throw std::invalid_argument("bad cpu list '" + std::string(whole) + "': '" + std::string(text) +
                                "' is not a CPU number in [0, " + std::to_string(CPU_SETSIZE) + ")");
  return value;
}

}  // namespace

// The process's CPU set as it was at start-up, before any thread pinned
// itself: sched_getaffinity() reports the *calling thread's* mask, so reading
// it later from a pinned thread would shrink "allowed" to that one CPU.
static std::vector<int> read_startup_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {0};
  std::vector<int> cpus = from_set(set);
  return cpus.empty() ? std::vector<int>{0} : cpus;
}
static const std::vector<int> g_startup_cpus = read_startup_cpus();

std::vector<int> allowed_cpus() { return g_startup_cpus.empty() ? read_startup_cpus() : g_startup_cpus; }

std::vector<int> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  if (text.empty()) throw std::invalid_argument("bad cpu list: empty");
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string_view item = text.substr(pos, comma == std::string_view::npos ? text.npos : comma - pos);
    size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      cpus.push_back(parse_int(item, text));
    } else {
      int lo = parse_int(item.substr(0, dash), text);
      int hi = parse_int(item.substr(dash + 1), text);
      if (hi < lo)
        throw std::invalid_argument("bad cpu list '" + std::string(text) + "': range " + std::string(item) +
                                    " is reversed");
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus_in) {
  std::vector<int> cpus = cpus_in;
  std::sort(cpus.begin(), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

bool pin_current_thread(const std::vector<int>& cpus, std::string* error) {
  if (cpus.empty()) {
    if (error) *error = "no CPU given";
    return false;
  }
  return apply(cpus, error);
}

bool unpin_current_thread(std::string* error) { return apply(allowed_cpus(), error); }

std::vector<int> current_thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return {};
  return from_set(set);
}

int current_cpu() noexcept { return sched_getcpu(); }

CpuPair default_cpu_pair() {
  std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2) return {cpus.front(), cpus.front(), true};
  return {cpus.back(), cpus.front(), false};
}

}  // namespace tailscope
