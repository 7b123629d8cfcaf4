// Dirty-data warnings: every repair the analyzer makes to an input trace is
// counted, never silently applied and never a crash.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace tailscope::analyze {

enum class Warning : std::uint8_t {
  kEmptyTrace,           // no spans
  kMissingRoot,          // no span without a parent: the longest orphan was used as root
  kMultipleRoots,        // extra parentless spans (their subtrees are not analyzed)
  kOrphanSpan,           // parent id not in the trace (subtree not analyzed)
  kDuplicateSpanId,      // later spans with an id already seen are ignored
  kNegativeDuration,     // read as 0
  kCycle,                // spans whose parent chain loops (never reachable from a root)
  kChildOutlivesParent,  // child overflows its parent: clipped (as Jaeger UI does)
  kChildOutsideParent,   // child entirely outside its parent: dropped
  kClockSkew,            // cross-service child outside its parent, or a negative RPC delay
  kTimeOutOfRange,       // start or duration beyond ±2^61 ns: clamped
  kSpanWithoutId,        // reader: span dropped
  kSpanWithoutService,   // reader: unknown processID / no service.name
  kSpanOverLimit,        // reader: span past --max-spans-per-trace dropped
  kBadTimestamp,         // reader: non-numeric time read as 0
  kDuplicateTraceId,     // a trace id seen earlier in the input (split or repeated trace)
  kCount
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(Warning::kCount)> kWarningNames = {
    "empty_trace",        "missing_root",    "multiple_roots",        "orphan_span",          "duplicate_span_id",
    "negative_duration",  "cycle",           "child_outlives_parent", "child_outside_parent", "clock_skew",
    "time_out_of_range",  "span_without_id", "span_without_service",  "span_over_limit",      "bad_timestamp",
    "duplicate_trace_id",
};

struct Warnings {
  std::array<std::uint64_t, static_cast<std::size_t>(Warning::kCount)> counts{};

  void add(Warning w, std::uint64_t n = 1) { counts[static_cast<std::size_t>(w)] += n; }
  std::uint64_t get(Warning w) const { return counts[static_cast<std::size_t>(w)]; }
  void merge(const Warnings& o) {
    for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += o.counts[i];
  }
  void clear() { counts.fill(0); }
  bool any() const {
    for (auto c : counts) {
      if (c != 0) return true;
    }
    return false;
  }
};

}  // namespace tailscope::analyze
