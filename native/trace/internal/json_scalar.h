// One JSON scalar as the SAX readers see it; strings are views valid only for
// the duration of the callback that produced them.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>

namespace tailscope::trace::internal {

// key == literal, with a constant-length memcmp the compiler inlines (SAX
// handlers compare every key; string_view's == calls memcmp).
template <std::size_t N>
inline bool is_literal(std::string_view key, const char (&literal)[N]) {
  return key.size() == N - 1 && std::memcmp(key.data(), literal, N - 1) == 0;
}

struct JsonScalar {
  enum class Type : std::uint8_t { kNull, kBool, kInt, kUint, kDouble, kString };
  Type type = Type::kNull;
  bool boolean = false;
  std::int64_t integer = 0;
  std::uint64_t unsigned_integer = 0;
  double number = 0;
  std::string_view text;

  bool is_string() const { return type == Type::kString; }

  // Integers, integral doubles and decimal strings ("1700000000000000000", as
  // OTLP writes 64-bit times). False when out of range or not a number.
  bool to_int64(std::int64_t* out) const {
    switch (type) {
      case Type::kInt:
        *out = integer;
        return true;
      case Type::kUint:
        if (unsigned_integer > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
        *out = static_cast<std::int64_t>(unsigned_integer);
        return true;
      case Type::kDouble:
        if (!std::isfinite(number) || std::fabs(number) >= 9.2e18) return false;
        *out = static_cast<std::int64_t>(std::llround(number));
        return true;
      case Type::kString: {
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, *out);
        return ec == std::errc() && ptr == end && !text.empty();
      }
      default:
        return false;
    }
  }

  // A time in `unit_ns` units (1000 for Jaeger's microseconds) as nanoseconds.
  // Doubles keep their fraction (1.5 µs = 1500 ns). A number beyond int64
  // (as a JSON number or a decimal string) saturates at the int64 limit of
  // its sign: the analyzer then clamps it to ±2^61 ns and counts
  // time_out_of_range (docs/critical-path.md). False only for what is not a
  // number at all (bad_timestamp).
  bool to_nanoseconds(std::int64_t unit_ns, std::int64_t* out) const {
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
    std::int64_t v = 0;
    switch (type) {
      case Type::kDouble: {
        const double ns = number * static_cast<double>(unit_ns);
        if (std::isnan(ns)) return false;
        // 2^63 is exactly representable; anything at or past it saturates.
        if (ns >= 9223372036854775808.0)
          *out = kMax;
        else if (ns <= -9223372036854775808.0)
          *out = kMin;
        else
          *out = static_cast<std::int64_t>(std::llround(ns));
        return true;
      }
      case Type::kUint:
        if (unsigned_integer > static_cast<std::uint64_t>(kMax)) {
          *out = kMax;
          return true;
        }
        v = static_cast<std::int64_t>(unsigned_integer);
        break;
      case Type::kString: {
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ptr != end) return false;
        if (ec == std::errc::result_out_of_range) {
          *out = text[0] == '-' ? kMin : kMax;
          return true;
        }
        if (ec != std::errc()) return false;
        break;
      }
      default:
        if (!to_int64(&v)) return false;
        break;
    }
    if (__builtin_mul_overflow(v, unit_ns, out)) *out = v < 0 ? kMin : kMax;
    return true;
  }

  // Tags like error=true arrive as bools, "true" strings or 1.
  bool is_truthy() const {
    switch (type) {
      case Type::kBool:
        return boolean;
      case Type::kInt:
        return integer != 0;
      case Type::kUint:
        return unsigned_integer != 0;
      case Type::kString:
        return text == "true" || text == "True" || text == "TRUE" || text == "1";
      default:
        return false;
    }
  }
};

}  // namespace tailscope::trace::internal
