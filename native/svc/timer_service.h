// One thread that fires callbacks at monotonic deadlines: per-call timeouts
// of the multiplexed RPC client, and the simulated store latency of the
// non-blocking models (pool-callback, coroutine), which must wait without
// holding a thread. Callbacks run on the timer thread and must be short (post
// the real work elsewhere). Timers are never cancelled: a timeout that finds
// its call already answered does nothing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace tailscope::svc {

class TimerService {
 public:
  TimerService();
  ~TimerService();
  TimerService(const TimerService&) = delete;
  TimerService& operator=(const TimerService&) = delete;

  void schedule(int64_t deadline_ns, std::function<void()> fn);
  // Fires nothing more; pending callbacks are dropped (their owners handle it).
  void stop();
  size_t pending() const;

 private:
  struct Entry {
    int64_t deadline_ns;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Entry& o) const {
      return deadline_ns != o.deadline_ns ? deadline_ns > o.deadline_ns : seq > o.seq;
    }
  };
  void run();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  uint64_t seq_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tailscope::svc
