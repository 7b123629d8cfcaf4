#include "exec/saturation.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

namespace tailscope::exec {
namespace {

int64_t median_of(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

double mean_of(const std::vector<int64_t>& v) {
  double s = 0;
  for (int64_t x : v) s += static_cast<double>(x);
  return s / static_cast<double>(v.size());
}

std::string fmt_ms(int64_t ns) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(ns < 10'000'000 ? 2 : 1);
  o << static_cast<double>(ns) / 1e6 << " ms";
  return o.str();
}

// Recorded = launched, after the warm-up, all five stamps taken.
bool recorded(const CallRecord& rec, size_t index, int64_t warmup_calls) {
  return static_cast<int64_t>(index) >= warmup_calls && rec.launched && rec.probe.complete();
}

// Bodies in start order: a gap from the end of one body to the next start,
// during which the next call was already waiting, is a stall.
void find_stalls(std::span<const CallRecord> records, Backlog& b) {
  std::vector<std::array<int64_t, 3>> bodies;  // fn_start, fn_end, trigger
  for (const auto& rec : records)
    if (rec.launched && rec.probe.fn_start_ns && rec.probe.fn_end_ns)
      bodies.push_back({rec.probe.fn_start_ns, rec.probe.fn_end_ns, rec.probe.trigger_async_fn_ns});
  std::sort(bodies.begin(), bodies.end());
  int64_t busy_until = 0;
  for (size_t k = 0; k < bodies.size(); ++k) {
    if (k > 0) {
      const int64_t gap = bodies[k][0] - std::max(busy_until, bodies[k][2]);
      if (gap > kStallNs) {
        b.stall_ns += gap;
        b.stall_max_ns = std::max(b.stall_max_ns, gap);
        ++b.stalls;
      }
    }
    busy_until = std::max(busy_until, bodies[k][1]);
  }
  if (bodies.size() >= 2) b.starts_span_ns = bodies.back()[0] - bodies.front()[0];
}

}  // namespace

Backlog analyse_backlog(std::span<const CallRecord> records, int64_t warmup_calls, bool deferred, int64_t window_ns) {
  Backlog b;
  b.has_queue = !deferred;
  const size_t n = records.size();
  std::vector<int64_t> starts, receipts;
  std::vector<int64_t> launched_before(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const CallRecord& rec = records[i];
    launched_before[i + 1] = launched_before[i] + (rec.launched ? 1 : 0);
    if (!rec.launched) continue;
    if (rec.probe.fn_start_ns) starts.push_back(rec.probe.fn_start_ns);
    if (rec.probe.val_received_ns) receipts.push_back(rec.probe.val_received_ns);
  }
  std::sort(starts.begin(), starts.end());
  std::sort(receipts.begin(), receipts.end());
  if (!deferred) find_stalls(records, b);
  auto count_before = [](const std::vector<int64_t>& sorted, int64_t t) {
    return static_cast<int64_t>(std::lower_bound(sorted.begin(), sorted.end(), t) - sorted.begin());
  };
  std::vector<int64_t> queue, in_flight, lateness, lag;
  int64_t empty = 0;
  for (size_t i = 0; i < n; ++i) {
    const CallRecord& rec = records[i];
    if (!recorded(rec, i, warmup_calls)) continue;
    const int64_t t = rec.probe.trigger_async_fn_ns;
    const int64_t earlier = launched_before[i];
    // Calls j > i start and complete after t, so "before t" counts earlier calls only.
    const int64_t q = std::max<int64_t>(0, earlier - count_before(starts, t));
    queue.push_back(q);
    in_flight.push_back(std::max<int64_t>(0, earlier - count_before(receipts, t)));
    lateness.push_back(rec.probe.val_received_ns - rec.intended_ns);
    lag.push_back(t - rec.intended_ns);
    if (q == 0) {
      ++empty;
      if (!deferred) b.empty_queue_scheduling.record(std::max<int64_t>(0, rec.probe.scheduling_delay_ns()));
    }
  }
  b.calls = static_cast<int64_t>(queue.size());
  if (b.calls == 0) return b;
  b.queue_mean = mean_of(queue);
  b.queue_max = *std::max_element(queue.begin(), queue.end());
  b.queue_p50 = median_of(queue);
  b.queue_empty_fraction = static_cast<double>(empty) / static_cast<double>(b.calls);
  b.in_flight_mean = mean_of(in_flight);
  b.in_flight_max = *std::max_element(in_flight.begin(), in_flight.end());
  b.producer_lag_p50_ns = median_of(lag);
  const auto quarter = static_cast<std::ptrdiff_t>(std::max<size_t>(1, queue.size() / 4));
  auto first_q = [&](const std::vector<int64_t>& v) { return median_of({v.begin(), v.begin() + quarter}); };
  auto last_q = [&](const std::vector<int64_t>& v) { return median_of({v.end() - quarter, v.end()}); };
  b.in_flight_first_quarter = first_q(in_flight);
  b.in_flight_last_quarter = last_q(in_flight);
  b.lateness_first_quarter_ns = first_q(lateness);
  b.lateness_last_quarter_ns = last_q(lateness);
  b.lateness_growth_limit_ns = std::llround(kBacklogGrowthLimit * static_cast<double>(window_ns));
  b.grew = b.calls >= 8 && b.lateness_last_quarter_ns - b.lateness_first_quarter_ns > b.lateness_growth_limit_ns;
  return b;
}

double achieved_rate_per_s(std::span<const CallRecord> records, int64_t warmup_calls) {
  int64_t calls = 0, first_received = 0, last_received = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const CallRecord& rec = records[i];
    if (!recorded(rec, i, warmup_calls)) continue;
    ++calls;
    first_received = first_received ? std::min(first_received, rec.probe.val_received_ns) : rec.probe.val_received_ns;
    last_received = std::max(last_received, rec.probe.val_received_ns);
  }
  if (calls < 2 || last_received <= first_received) return 0.0;
  return static_cast<double>(calls - 1) * 1e9 / static_cast<double>(last_received - first_received);
}

std::vector<std::string> saturation_reasons(const Backlog& backlog, int64_t in_flight_limited, int64_t launch_failures,
                                            bool deadline_hit) {
  std::vector<std::string> why;
  if (backlog.grew)
    why.push_back("backlog grew during the step (median lateness " + fmt_ms(backlog.lateness_first_quarter_ns) + " → " +
                  fmt_ms(backlog.lateness_last_quarter_ns) + " from the first to the last quarter)");
  if (in_flight_limited > 0) why.push_back("in-flight limit reached");
  if (launch_failures > 0) why.push_back("thread creation failed");
  if (deadline_hit) why.push_back("step time limit reached");
  return why;
}

RampResult find_max_rate(const RampSearch& search,
                         const std::function<RampStepOutcome(double rate_per_s, int attempt)>& run_step) {
  RampResult out;
  // True when the rate was sustained (on the first attempt or on the repeat).
  auto step = [&](double rate) {
    for (int attempt = 0;; ++attempt) {
      const RampStepOutcome s = run_step(rate, attempt);
      ++out.steps;
      // Never above what was offered: a burst of late completions can
      // briefly exceed it.
      if (!s.saturated) {
        out.max_rate_per_s = std::max(out.max_rate_per_s, std::min(rate, s.achieved_per_s));
        return true;
      }
      out.best_saturated_per_s = std::max(out.best_saturated_per_s, s.achieved_per_s);
      if (attempt >= 1 || !s.repeatable) return false;
    }
  };
  double good = 0, bad = 0, rate = search.start_rate_per_s;
  for (int i = 0; i < search.max_doublings && rate <= search.max_rate_per_s; ++i, rate *= 2) {
    if (!step(rate)) {
      bad = rate;
      break;
    }
    good = rate;
  }
  if (bad > 0) {
    out.saturation_found = true;
    for (int k = 0; k < search.refinements && good > 0; ++k) {
      const double mid = std::sqrt(good * bad);
      if (step(mid))
        good = mid;
      else
        bad = mid;
    }
  }
  if (out.max_rate_per_s <= 0) out.max_rate_per_s = out.best_saturated_per_s;
  return out;
}

}  // namespace tailscope::exec
