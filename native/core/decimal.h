// Decimal text of 64-bit integers, written in place: eight digits per 64-bit
// division, then four independent digit-pair lookups, where std::to_chars
// chains a division per pair (~235 instructions for a 19-digit Unix-ns stamp).
// One mechanism for the writers that format integers by the million: the
// tracer's span lines (svc/tracer.cc) and the analyzer's per-trace results
// (analyze/analysis_json.cc).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tailscope {

// The longest text: "-9223372036854775808" and "18446744073709551615".
inline constexpr std::size_t kMaxDecimalChars = 20;

namespace decimal_internal {

// The two ASCII digits of every number below 100.
inline constexpr std::array<char, 200> kDigitPairs = [] {
  std::array<char, 200> pairs{};
  for (int i = 0; i < 100; ++i) {
    pairs[2 * i] = static_cast<char>('0' + i / 10);
    pairs[2 * i + 1] = static_cast<char>('0' + i % 10);
  }
  return pairs;
}();

inline constexpr std::uint64_t kPowersOf10[20] = {1,
                                                  10,
                                                  100,
                                                  1'000,
                                                  10'000,
                                                  100'000,
                                                  1'000'000,
                                                  10'000'000,
                                                  100'000'000,
                                                  1'000'000'000,
                                                  10'000'000'000,
                                                  100'000'000'000,
                                                  1'000'000'000'000,
                                                  10'000'000'000'000,
                                                  100'000'000'000'000,
                                                  1'000'000'000'000'000,
                                                  10'000'000'000'000'000,
                                                  100'000'000'000'000'000,
                                                  1'000'000'000'000'000'000,
                                                  10'000'000'000'000'000'000u};

// out[0, 8) = the 8 digits of v < 10^8, leading zeros kept: four pairs that
// do not wait on each other.
inline void eight_digits(std::uint32_t v, char* out) {
  const std::uint32_t high = v / 10000;
  const std::uint32_t low = v % 10000;
  std::memcpy(out, &kDigitPairs[2 * (high / 100)], 2);
  std::memcpy(out + 2, &kDigitPairs[2 * (high % 100)], 2);
  std::memcpy(out + 4, &kDigitPairs[2 * (low / 100)], 2);
  std::memcpy(out + 6, &kDigitPairs[2 * (low % 100)], 2);
}

}  // namespace decimal_internal

// The number of decimal digits of v (1 for 0).
inline std::size_t decimal_digits(std::uint64_t v) {
  // log10(2) ~ 1233 / 4096: a guess from the bit width, low by at most one.
  const auto guess = static_cast<std::size_t>((std::bit_width(v) * 1233) >> 12);
  return guess + (v >= decimal_internal::kPowersOf10[guess] ? 1 : 0) + (v == 0 ? 1 : 0);
}

// Writes the digits of v at `out` (no terminator) and returns their end.
// `out` needs room for decimal_digits(v) bytes (kMaxDecimalChars always do).
inline char* write_unsigned_decimal(char* out, std::uint64_t v) {
  using decimal_internal::kDigitPairs;
  char* const end = out + decimal_digits(v);
  char* p = end;
  while (v >= 100'000'000) {
    p -= 8;
    decimal_internal::eight_digits(static_cast<std::uint32_t>(v % 100'000'000), p);
    v /= 100'000'000;
  }
  auto rest = static_cast<std::uint32_t>(v);
  while (rest >= 100) {
    p -= 2;
    std::memcpy(p, &kDigitPairs[2 * (rest % 100)], 2);
    rest /= 100;
  }
  if (rest >= 10) {
    std::memcpy(p - 2, &kDigitPairs[2 * rest], 2);
  } else {
    p[-1] = static_cast<char>('0' + rest);
  }
  return end;
}

// The same with a '-' before a negative v (exact for INT64_MIN too).
inline char* write_signed_decimal(char* out, std::int64_t v) {
  if (v < 0) {
    *out++ = '-';
    return write_unsigned_decimal(out, 0 - static_cast<std::uint64_t>(v));
  }
  return write_unsigned_decimal(out, static_cast<std::uint64_t>(v));
}

}  // namespace tailscope
