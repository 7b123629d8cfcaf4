// One JSON scalar as the SAX readers see it; strings are views valid only for
// the duration of the callback that produced them.
#pragma once

#include <bit>
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

// Eight ASCII digits as a little-endian load holds them (the first, most
// significant, in the lowest byte): nonzero when a byte is not '0'..'9' —
// its high nibble not 3, or not 3 once 6 is added (0x3A..0x3F); adding 6
// carries into no other byte when every high nibble is 3, and when one is
// not, the first term already says so.
inline std::uint64_t non_digit_bits(std::uint64_t bytes) {
  constexpr std::uint64_t kHighNibbles = 0xF0F0F0F0F0F0F0F0ull;
  constexpr std::uint64_t kZeros = 0x3030303030303030ull;
  return ((bytes & kHighNibbles) ^ kZeros) | (((bytes + 0x0606060606060606ull) & kHighNibbles) ^ kZeros);
}

// Their value (when non_digit_bits() is 0): three multiply-and-shift steps
// combine neighbouring digits, then pairs, then the two halves — ~14
// instructions for 8 digits instead of ~8 a digit.
inline std::uint64_t eight_digits_value(std::uint64_t bytes) {
  std::uint64_t v = bytes - 0x3030303030303030ull;    // a digit a byte
  v = (v * 10 + (v >> 8)) & 0x00FF00FF00FF00FFull;    // two digits a 16-bit lane
  v = (v * 100 + (v >> 16)) & 0x0000FFFF0000FFFFull;  // four digits a 32-bit lane
  return (v & 0xFFFFFFFFull) * 10000 + (v >> 32);     // eight digits
}

inline std::uint64_t load_le64(const char* p) {
  std::uint64_t v = 0;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// The value of the n digits at p, 8 <= n <= 19 (they fit a uint64): the
// first 1 to 8 (so that 8 remain a step) as eight digits with '0's in
// front — the first 8 bytes loaded, shifted up, '0' shifted in — then 8 at
// a time; one check of every byte at the end. False when a byte is not a
// digit.
inline bool long_digits_value(const char* p, std::size_t n, std::uint64_t* out) {
  constexpr std::uint64_t kZeros = 0x3030303030303030ull;
  const std::size_t head = (n - 1) % 8 + 1;
  const unsigned pad_bits = 8 * static_cast<unsigned>(8 - head);  // 0 .. 56
  const std::uint64_t first = (load_le64(p) << pad_bits) | (kZeros & ~(~std::uint64_t{0} << pad_bits));
  std::uint64_t bad = non_digit_bits(first);
  std::uint64_t v = eight_digits_value(first);
  for (const char *q = p + head, *const end = p + n; q != end; q += 8) {
    const std::uint64_t group = load_le64(q);
    bad |= non_digit_bits(group);
    v = v * 100000000 + eight_digits_value(group);
  }
  *out = v;
  return bad == 0;
}

// std::from_chars on a whole decimal integer (no '+', no space, every byte
// used), with its outcome: kOk, kOutOfRange, kInvalid. Up to 19 digits, the
// common case (OTLP writes every time as a 19-digit string), are read here
// without from_chars' overflow check per digit (measured: from_chars was ~10
// instructions a digit), from 8 digits on 8 at a time (long_digits_value;
// callgrind: a 19-digit time ~220 instructions digit by digit, ~70 so): 19
// digits fit in a uint64, then one range check. Longer text, and text that is
// not all digits, goes to from_chars, so the outcome is its own in every case.
enum class DecimalParse : std::uint8_t { kOk, kOutOfRange, kInvalid };
inline DecimalParse parse_decimal_int64(std::string_view text, std::int64_t* out) {
  const char* p = text.data();
  const char* const end = p + text.size();
  const bool negative = p != end && *p == '-';
  const std::size_t digits = text.size() - (negative ? 1 : 0);
  if (digits >= 1 && digits <= 19) {
    p += negative ? 1 : 0;
    std::uint64_t v = 0;
    bool all_digits = true;
    if (digits >= 8) {
      all_digits = long_digits_value(p, digits, &v);
    } else {
      for (; p != end; ++p) {
        const auto d = static_cast<unsigned>(static_cast<unsigned char>(*p)) - '0';
        all_digits = all_digits && d <= 9;
        v = v * 10 + d;
      }
    }
    if (all_digits) {
      constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
      if (v > kMax + (negative ? 1 : 0)) return DecimalParse::kOutOfRange;
      *out = negative ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
      return DecimalParse::kOk;
    }
  }
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ptr != end) return DecimalParse::kInvalid;
  if (ec == std::errc::result_out_of_range) return DecimalParse::kOutOfRange;
  if (ec != std::errc()) return DecimalParse::kInvalid;
  *out = v;
  return DecimalParse::kOk;
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
      case Type::kString:
        return parse_decimal_int64(text, out) == DecimalParse::kOk;
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
      case Type::kString:
        switch (parse_decimal_int64(text, &v)) {
          case DecimalParse::kOk:
            break;
          case DecimalParse::kOutOfRange:
            *out = text[0] == '-' ? kMin : kMax;
            return true;
          case DecimalParse::kInvalid:
            return false;
        }
        break;
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
