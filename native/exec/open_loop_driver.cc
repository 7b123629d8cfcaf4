#include "exec/open_loop_driver.h"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <system_error>
#include <thread>

#include "core/affinity.h"
#include "core/clock.h"
#include "exec/async_models.h"
#include "exec/internal/idle_parking.h"

namespace tailscope::exec {
namespace {

// The value a call's body constructs between fn_start and fn_end.
template <class T>
struct PayloadMaker;
template <>
struct PayloadMaker<void> {
  static void make(int64_t) {}
};
template <>
struct PayloadMaker<long long> {
  static long long make(int64_t) { return 42; }
};
template <>
struct PayloadMaker<std::vector<int>> {
  static std::vector<int> make(int64_t) { return std::vector<int>(10'000, 1); }
};
template <>
struct PayloadMaker<std::vector<char>> {
  static std::vector<char> make(int64_t n) { return std::vector<char>(static_cast<size_t>(n), 'x'); }
};

void place(bool pin, int cpu) {
  if (pin) pin_current_thread(cpu);
}

}  // namespace

template <class T>
PointResult run_open_loop_point(AsyncModel<T>& model, ResultMechanism mechanism, const OpenLoopPoint& point) {
  PointResult r;
  r.offered_per_s = point.rate_per_s;
  const double period_ns = 1e9 / point.rate_per_s;
  const int64_t warmup_ns = point.warmup_ns;
  int64_t n = std::llround(static_cast<double>(warmup_ns + point.duration_ns) / period_ns);
  n = std::clamp<int64_t>(n, 2, kMaxCallsPerPoint);
  const int64_t warmup_calls = std::min<int64_t>(n - 1, std::llround(static_cast<double>(warmup_ns) / period_ns));
  r.calls = n;
  r.warmup_calls = warmup_calls;
  // Production stops at this deadline even if the model cannot keep up.
  const int64_t planned_ns = std::llround(static_cast<double>(n) * period_ns);
  const int64_t max_ns = 3 * planned_ns + 2'000'000'000;

  std::vector<CallRecord> records(static_cast<size_t>(n));
  std::vector<std::unique_ptr<PendingCall<T>>> pending(static_cast<size_t>(n));
  std::atomic<uint32_t> launched{0};  // published count: records[0..launched) are ready for the consumer
  std::atomic<int64_t> consumed{0};
  std::atomic<bool> producer_done{false};
  internal::IdleParking consumer_parking;
  const bool pin_producer = point.pinned && !creates_thread_per_call(model.name());
  const bool deferred = model.deferred();
  const std::optional<ExecutorCounters> pool_before = model.pool_counters();
  const auto threads_before = other_threads_schedstat();
  const int64_t sched_from = monotonic_ns();

  std::thread consumer([&] {
    place(point.pinned, point.consumer_cpu);
    const auto sched_begin = current_thread_schedstat();
    int64_t last_received = 0;
    for (uint32_t i = 0;; ++i) {
      // Spin briefly, then sleep until the producer publishes call i or ends.
      for (int spins = 0; launched.load(std::memory_order_acquire) <= i; ++spins) {
        if (producer_done.load() && launched.load() <= i) goto done;
        if (spins < 200)
          internal::cpu_relax();
        else
          consumer_parking.park_unless([&] { return launched.load() > i || producer_done.load(); });
      }
      {
        CallRecord& rec = records[i];
        if (rec.launched) {
          rec.probe.stamp_request();
          try {
            pending[i]->join([&rec](ValueOf<T> v) {
              rec.probe.stamp_received();
              (void)v;
            });
            if (static_cast<int64_t>(i) >= warmup_calls) {
              r.delays.record(rec.probe);
              r.total_from_intended.record(rec.probe.val_received_ns - rec.intended_ns);
              ++r.recorded;
              last_received = std::max(last_received, rec.probe.val_received_ns);
            }
          } catch (const std::exception& e) {
            if (r.call_errors++ == 0) r.call_error = e.what();
          }
          pending[i].reset();
        }
        consumed.fetch_add(1, std::memory_order_release);
      }
    }
  done:
    r.end_ns = last_received;
    if (const auto sched_end = current_thread_schedstat(); sched_begin && sched_end)
      r.consumer_sched = *sched_end - *sched_begin;
  });

  std::thread producer([&] {
    place(pin_producer, point.producer_cpu);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // nanosleep wakes on time, not 50 µs late
    const auto sched_begin = current_thread_schedstat();
    const int64_t t0 = monotonic_ns() + 1'000'000;
    r.begin_ns = t0 + warmup_ns;
    for (int64_t i = 0; i < n; ++i) {
      CallRecord& rec = records[static_cast<size_t>(i)];
      rec.intended_ns = t0 + std::llround(static_cast<double>(i) * period_ns);
      if (monotonic_ns() < rec.intended_ns) precise_wait_until_ns(rec.intended_ns, 10'000);
      // Bound what is outstanding: waiting here makes the producer late,
      // which the achieved rate then shows.
      for (bool limited = false;;) {
        const int64_t in_flight = i - consumed.load(std::memory_order_acquire);
        r.max_in_flight_seen = std::max(r.max_in_flight_seen, in_flight);
        if (in_flight < point.max_in_flight) break;
        if (!limited) ++r.in_flight_limited, limited = true;
        if (monotonic_ns() - t0 > max_ns) break;
        std::this_thread::yield();
      }
      const int64_t now = monotonic_ns();
      if (now - t0 > max_ns) {
        r.deadline_hit = true;
        break;
      }
      r.producer_lag_max_ns = std::max(r.producer_lag_max_ns, now - rec.intended_ns);
      rec.probe.deferred = deferred;
      rec.probe.stamp_trigger();
      try {
        pending[static_cast<size_t>(i)] = model.launch(mechanism, [&rec, bytes = point.payload_bytes]() {
          rec.probe.stamp_fn_start();
          if constexpr (std::is_void_v<T>) {
            static_cast<void>(bytes);  // a void call carries no payload
            rec.probe.stamp_fn_end();
          } else {
            T value = PayloadMaker<T>::make(bytes);
            rec.probe.stamp_fn_end();
            return value;
          }
        });
        rec.launched = true;
      } catch (const std::system_error& e) {  // EAGAIN: no thread for this call
        if (r.launch_failures++ == 0) r.launch_error = e.what();
      }
      launched.store(static_cast<uint32_t>(i + 1));  // seq_cst: pairs with the consumer's parking
      consumer_parking.wake_one();
    }
    producer_done.store(true);
    consumer_parking.wake_one();
    if (const auto sched_end = current_thread_schedstat(); sched_begin && sched_end)
      r.producer_sched = *sched_end - *sched_begin;
  });
  producer.join();
  consumer.join();
  r.workers_sched = long_lived_delta(threads_before, other_threads_schedstat());
  r.sched_window_ns = monotonic_ns() - sched_from;
  if (const auto after = model.pool_counters(); after && pool_before)
    r.pool = ExecutorCounters{after->parks - pool_before->parks,
                              after->wake_syscalls < 0 ? -1 : after->wake_syscalls - pool_before->wake_syscalls};
  r.consumer_parks = consumer_parking.parks();
  r.consumer_wake_syscalls = consumer_parking.wake_syscalls();

  r.backlog = analyse_backlog(records, warmup_calls, deferred, point.duration_ns);
  r.achieved_per_s = achieved_rate_per_s(records, warmup_calls);
  r.why_saturated = saturation_reasons(r.backlog, r.in_flight_limited, r.launch_failures, r.deadline_hit);
  r.saturated = !r.why_saturated.empty();
  return r;
}

template PointResult run_open_loop_point<void>(AsyncModel<void>&, ResultMechanism, const OpenLoopPoint&);
template PointResult run_open_loop_point<long long>(AsyncModel<long long>&, ResultMechanism, const OpenLoopPoint&);
template PointResult run_open_loop_point<std::vector<int>>(AsyncModel<std::vector<int>>&, ResultMechanism,
                                                           const OpenLoopPoint&);
template PointResult run_open_loop_point<std::vector<char>>(AsyncModel<std::vector<char>>&, ResultMechanism,
                                                            const OpenLoopPoint&);

}  // namespace tailscope::exec
