// Names a long-lived thread so /proc/PID/task/TID/comm, top -H, perf and gdb
// say what it is ("svc-timer", "svc-loop-0") instead of the program's name.
// Only threads that live as long as their component are named: a thread made
// per call or per request keeps the process name, because the extra prctl
// would be a system call on the path the lab times.
#pragma once

#include <pthread.h>

#include <string>

namespace tailscope {

// Linux keeps 15 bytes of a name; a longer one is cut there, not refused.
inline void name_this_thread(const std::string& name) {
  const std::string cut = name.substr(0, 15);
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace tailscope
