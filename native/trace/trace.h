// The trace model shared by the readers, the writers and the critical-path
// analyzer: one trace in memory at a time, spans in input order, strings in a
// per-trace arena and service/operation names interned once per run.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tailscope::trace {

enum class SpanKind : std::uint8_t { kUnspecified, kInternal, kServer, kClient, kProducer, kConsumer };
// How a span refers to its parent. Jaeger has both; OTLP's parentSpanId is kChildOf.
enum class RefType : std::uint8_t { kNone, kChildOf, kFollowsFrom };

std::string_view span_kind_name(SpanKind kind);
// Parses "server", "SPAN_KIND_SERVER", "Server"…; unknown text gives kUnspecified.
SpanKind parse_span_kind(std::string_view text);

// What a cache read with a miss path found (tag tailscope.cache = "hit" | "miss",
// written by tailscope-svc on a real store's answer): the twin's inference tells a
// read's miss path from a sibling stage by it, even when every read missed.
enum class CacheResult : std::uint8_t { kNone, kHit, kMiss };
inline constexpr std::string_view kCacheTag = "tailscope.cache";
// "hit", "miss"; "" for kNone.
std::string_view cache_result_name(CacheResult result);
// "hit" / "miss"; any other text gives kNone.
CacheResult parse_cache_result(std::string_view text);

using NameId = std::uint32_t;

// Interns service and operation names so the analyzer keys its aggregates on
// integers. Names are stored as valid UTF-8 (invalid bytes become U+FFFD) so
// every writer downstream can emit them unchanged. The table is bounded: past
// kMaxNames distinct names, new ones map to kOverflowName.
class NameTable {
 public:
  static constexpr std::size_t kMaxNames = 1u << 20;
  static constexpr NameId kUnknownService = 0;  // "unknown_service"
  static constexpr NameId kOverflowName = 1;    // "(name table full)"

  NameTable();
  NameId intern(std::string_view name);
  std::string_view name(NameId id) const { return names_[id]; }
  std::size_t size() const { return names_.size(); }

 private:
  NameId intern_slow(std::string_view name);

  // Direct-mapped cache in front of the map: readers intern the operation of
  // every span, and most are repeats.
  struct CacheEntry {
    const std::string* name = nullptr;
    NameId id = 0;
  };
  std::array<CacheEntry, 1024> cache_{};
  std::deque<std::string> names_;          // deque: stable addresses for the map's keys
  std::deque<std::string> raw_spellings_;  // invalid-UTF-8 spellings that map to a repaired name
  std::unordered_map<std::string_view, NameId> ids_;
};

// A string stored in Trace::arena.
struct StrRef {
  std::uint32_t offset = 0;
  std::uint32_t length = 0;
};

struct Span {
  StrRef span_id;
  StrRef parent_span_id;  // empty when parent_ref == kNone
  StrRef process_id;      // Jaeger processID, resolved to `service` by the reader
  RefType parent_ref = RefType::kNone;
  SpanKind kind = SpanKind::kUnspecified;
  bool error = false;
  CacheResult cache = CacheResult::kNone;  // tag tailscope.cache
  NameId service = NameTable::kUnknownService;
  NameId operation = NameTable::kUnknownService;
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;  // may be negative in dirty input; the analyzer fixes it
  // Delays measured by tailscope's own async probe (tags tailscope.scheduling_delay_ns,
  // tailscope.join_delay_ns); -1 when the span carries none.
  std::int64_t probe_scheduling_delay_ns = -1;
  std::int64_t probe_join_delay_ns = -1;

  std::int64_t end_ns() const { return start_ns + duration_ns; }
};

struct Trace {
  std::string trace_id;
  std::vector<Span> spans;
  // The spans' strings: [0, arena_used) holds them, the rest is room. A
  // reader stores two or three ids per span; std::string::append was an
  // out-of-line call for each (measured with callgrind: ~45 instructions a
  // store, more than the copy), this is a bounds check and a copy.
  std::string arena;
  std::size_t arena_used = 0;

  std::string_view str(StrRef ref) const { return std::string_view(arena.data() + ref.offset, ref.length); }
  StrRef store(std::string_view text) {
    if (arena.size() - arena_used < text.size()) [[unlikely]]
      grow_arena(text.size());
    const StrRef ref{static_cast<std::uint32_t>(arena_used), static_cast<std::uint32_t>(text.size())};
    char* const to = arena.data() + arena_used;
    const std::size_t n = text.size();
    if (n >= 8 && n <= 16) {
      // A 16-hex-digit span id: two overlapping 8-byte moves, not a call to memcpy.
      std::memcpy(to, text.data(), 8);
      std::memcpy(to + n - 8, text.data() + n - 8, 8);
    } else if (n != 0) {
      std::memcpy(to, text.data(), n);
    }
    arena_used += text.size();
    return ref;
  }
  std::string_view span_id(const Span& span) const { return str(span.span_id); }
  std::string_view parent_span_id(const Span& span) const { return str(span.parent_span_id); }
  // Keeps capacity: the readers reuse one Trace for every trace of a file.
  void clear();

 private:
  void grow_arena(std::size_t n);  // out of line: store() stays small enough to inline
};

// A fast hash of short strings (ids, names): length, first and last 8 bytes.
std::size_t quick_hash(std::string_view s);

// a == b, inline for the 16 to 32 bytes most ids and names are (an OTLP
// traceId is 32 hex digits): two overlapping 16-byte compares, not a call to
// memcmp.
inline bool same_text(std::string_view a, std::string_view b) {
  const std::size_t n = a.size();
  if (n != b.size()) return false;
  if (n >= 16 && n <= 32) {
    return std::memcmp(a.data(), b.data(), 16) == 0 && std::memcmp(a.data() + n - 16, b.data() + n - 16, 16) == 0;
  }
  return a == b;
}

// Returns `text` unchanged when it is valid UTF-8, else a copy with every
// invalid byte replaced by U+FFFD.
std::string valid_utf8(std::string_view text);
bool is_valid_utf8(std::string_view text);

}  // namespace tailscope::trace
