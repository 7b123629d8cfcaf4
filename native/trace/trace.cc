#include "trace/trace.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace tailscope::trace {

std::string_view span_kind_name(SpanKind kind) {
  switch (kind) {
    case SpanKind::kInternal:
      return "internal";
    case SpanKind::kServer:
      return "server";
    case SpanKind::kClient:
      return "client";
    case SpanKind::kProducer:
      return "producer";
    case SpanKind::kConsumer:
      return "consumer";
    case SpanKind::kUnspecified:
      break;
  }
  return "unspecified";
}

namespace {
bool equals_ignore_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}
}  // namespace

SpanKind parse_span_kind(std::string_view text) {
  // The common spellings first: this runs for every span.
  if (text == "server") return SpanKind::kServer;
  if (text == "client") return SpanKind::kClient;
  constexpr std::string_view kOtlpPrefix = "SPAN_KIND_";
  if (text.size() > kOtlpPrefix.size() && text.substr(0, kOtlpPrefix.size()) == kOtlpPrefix) {
    text.remove_prefix(kOtlpPrefix.size());
  }
  if (equals_ignore_case(text, "server")) return SpanKind::kServer;
  if (equals_ignore_case(text, "client")) return SpanKind::kClient;
  if (equals_ignore_case(text, "producer")) return SpanKind::kProducer;
  if (equals_ignore_case(text, "consumer")) return SpanKind::kConsumer;
  if (equals_ignore_case(text, "internal")) return SpanKind::kInternal;
  return SpanKind::kUnspecified;
}

std::string_view cache_result_name(CacheResult result) {
  switch (result) {
    case CacheResult::kHit:
      return "hit";
    case CacheResult::kMiss:
      return "miss";
    case CacheResult::kNone:
      break;
  }
  return "";
}

CacheResult parse_cache_result(std::string_view text) {
  if (text == "hit") return CacheResult::kHit;
  if (text == "miss") return CacheResult::kMiss;
  return CacheResult::kNone;
}

NameTable::NameTable() {
  intern("unknown_service");
  intern("(name table full)");
}

std::size_t quick_hash(std::string_view s) {
  std::uint64_t head = 0, tail = 0;
  if (s.empty()) return 0;  // an empty view's data() may be null, which memcpy may not be given
  std::memcpy(&head, s.data(), std::min<std::size_t>(8, s.size()));
  if (s.size() > 8) std::memcpy(&tail, s.data() + s.size() - 8, 8);
  // Multiplication only carries differences upwards, and ids often differ
  // only in their last byte (the top of `tail`): finish with murmur3's fmix64,
  // which folds the high bits into the low ones the tables use.
  std::uint64_t h = head ^ (tail * 0x9E3779B97F4A7C15ull) ^ (s.size() * 0xC2B2AE3D27D4EB4Full);
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  return static_cast<std::size_t>(h);
}

NameId NameTable::intern(std::string_view name) {
  CacheEntry& entry = cache_[quick_hash(name) & (cache_.size() - 1)];
  if (entry.name != nullptr && same_text(*entry.name, name)) return entry.id;
  const NameId id = intern_slow(name);
  entry.name = &names_[id];
  entry.id = id;
  return id;
}

NameId NameTable::intern_slow(std::string_view name) {
  if (auto it = ids_.find(name); it != ids_.end()) return it->second;
  if (names_.size() >= kMaxNames) return kOverflowName;
  std::string stored = is_valid_utf8(name) ? std::string(name) : valid_utf8(name);
  if (stored != name) {
    // The repaired spelling may already be interned.
    if (auto it = ids_.find(stored); it != ids_.end()) return it->second;
  }
  const auto id = static_cast<NameId>(names_.size());
  names_.push_back(std::move(stored));
  ids_.emplace(names_.back(), id);
  if (names_.back() != name) {
    // Map the raw spelling too, so the next lookup of it is a hit. The raw key
    // must outlive the map: keep it beside the names.
    raw_spellings_.emplace_back(name);
    ids_.emplace(raw_spellings_.back(), id);
  }
  return id;
}

void Trace::grow_arena(std::size_t n) {
  // Doubling: a trace of a million spans stores tens of MB.
  arena.resize(std::max(2 * arena.size(), arena_used + n + 256));
}

void Trace::clear() {
  trace_id.clear();
  spans.clear();
  arena_used = 0;  // the room stays
}

namespace {
// Length of the valid UTF-8 sequence starting at s[i], or 0 when invalid.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto c0 = static_cast<unsigned char>(s[i]);
  if (c0 < 0x80) return 1;
  auto cont = [&](std::size_t k) { return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80; };
  if (c0 >= 0xC2 && c0 <= 0xDF) return cont(1) ? 2 : 0;
  if (c0 >= 0xE0 && c0 <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c0 == 0xE0 && c1 < 0xA0) return 0;  // overlong
    if (c0 == 0xED && c1 > 0x9F) return 0;  // surrogates
    return 3;
  }
  if (c0 >= 0xF0 && c0 <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c0 == 0xF0 && c1 < 0x90) return 0;  // overlong
    if (c0 == 0xF4 && c1 > 0x8F) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;
}
}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      out.append("\xEF\xBF\xBD");
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace tailscope::trace
