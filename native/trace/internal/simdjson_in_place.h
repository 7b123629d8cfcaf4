// simdjson On-Demand read in place: an iteration's field without copying it
// out, and a string as a view into the (padded) input when it holds no
// escape, instead of simdjson's unescaping copy. Shared by the readers
// (simdjson_value_reader.cc) and the critical-path bench's parse floor, which
// must read no slower than the readers do to be a floor.
#pragma once

#include <simdjson.h>

#include <bit>
#include <string_view>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tailscope::trace::internal {

// Gives up on the value (the RapidJSON re-read reports the error).
struct GiveUp {};

// The value in an iteration's result, in place. Copied out instead, the
// compiler writes the field (key pointer and 24-byte value) to the stack
// piecewise and reads it back whole: a store-forwarding stall for every
// member of every span, measured (perf annotate) as a quarter of the walk.
template <typename T>
inline T& in_place(simdjson::simdjson_result<T>& result) {
  if (result.error() != simdjson::SUCCESS) throw GiveUp{};
  T&& value = std::move(result).value_unsafe();
  return value;
}

// The first '"' or '\\' at or after p, 16 bytes at a time: ids and names
// are 10-30 bytes, so one or two compares instead of a branch per byte. The
// string's closing quote is inside the value and the padding after the value
// is readable, so a block may run past the quote but not past the buffer.
inline const char* quote_or_backslash(const char* p) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  for (;; p += 16) {
    const __m128i block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const auto mask = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(block, quote), _mm_cmpeq_epi8(block, backslash))));
    if (mask != 0) return p + std::countr_zero(mask);
  }
#else
  while (*p != '"' && *p != '\\') ++p;
  return p;
#endif
}

// The text of a string whose raw bytes (from just after its opening quote)
// hold no escape: a view into the input, no copy. Stage 1 has checked the
// whole value (strings closed, valid UTF-8, no raw control characters), so
// the closing quote is there. False when an escape needs decoding.
inline bool unescaped_in_place(const char* raw, std::string_view* out) {
  const char* end = quote_or_backslash(raw);
  if (*end != '"') return false;
  *out = std::string_view(raw, static_cast<std::size_t>(end - raw));
  return true;
}

// The value of a result, or GiveUp.
template <typename T>
inline T value_or_give_up(simdjson::simdjson_result<T> result) {
  T out{};
  if (std::move(result).get(out) != simdjson::SUCCESS) throw GiveUp{};
  return out;
}

// A member's key, in place unless it holds an escape.
inline std::string_view key_of(simdjson::ondemand::field& field) {
  std::string_view key;
  if (unescaped_in_place(field.key().raw(), &key)) return key;
  return value_or_give_up(field.unescaped_key());
}

// Always inline: the walks grew with the nesting check (skip_unused) and
// the compiler stopped inlining this at some of its ~20 call sites; forced,
// a Jaeger span reads in ~270 fewer instructions (callgrind; forcing key_of
// and type_of too measured worse).
[[gnu::always_inline]] inline std::string_view string_of(simdjson::ondemand::value& v) {
  std::string_view text;
  if (unescaped_in_place(value_or_give_up(v.get_raw_json_string()).raw(), &text)) return text;
  return value_or_give_up(v.get_string());
}

}  // namespace tailscope::trace::internal
