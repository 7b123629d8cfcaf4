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
inline bool Is(std::string_view key, const char (&literal)[N]) {
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
  bool ToInt64(std::int64_t* out) const {
    switch (type) {
      case Type::kInt: *out = integer; return true;
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
      default: return false;
    }
  }

  // A time in `unit_ns` units (1000 for Jaeger's microseconds) as nanoseconds.
  // Doubles keep their fraction (1.5 µs = 1500 ns).
  bool ToNanoseconds(std::int64_t unit_ns, std::int64_t* out) const {
    if (type == Type::kDouble) {
      const double ns = number * static_cast<double>(unit_ns);
      if (!std::isfinite(ns) || std::fabs(ns) >= 9.2e18) return false;
      *out = static_cast<std::int64_t>(std::llround(ns));
      return true;
    }
    std::int64_t v = 0;
    if (!ToInt64(&v)) return false;
    if (v > std::numeric_limits<std::int64_t>::max() / unit_ns ||
        v < std::numeric_limits<std::int64_t>::min() / unit_ns) {
      return false;
    }
    *out = v * unit_ns;
    return true;
  }

  // Tags like error=true arrive as bools, "true" strings or 1.
  bool IsTruthy() const {
    switch (type) {
      case Type::kBool: return boolean;
      case Type::kInt: return integer != 0;
      case Type::kUint: return unsigned_integer != 0;
      case Type::kString: return text == "true" || text == "True" || text == "TRUE" || text == "1";
      default: return false;
    }
  }
};

}  // namespace tailscope::trace::internal
