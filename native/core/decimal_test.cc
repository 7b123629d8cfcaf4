#include "core/decimal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace tailscope {
namespace {

// What std::to_chars writes, the reference for every value below.
template <typename T>
std::string reference(T v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

// Writes into a buffer of '#' and checks that no byte past the returned end
// was touched.
std::string written_unsigned(std::uint64_t v) {
  char buf[kMaxDecimalChars + 8];
  std::fill(std::begin(buf), std::end(buf), '#');
  char* end = write_unsigned_decimal(buf, v);
  EXPECT_LE(end - buf, static_cast<std::ptrdiff_t>(kMaxDecimalChars));
  for (char* p = end; p < std::end(buf); ++p) EXPECT_EQ(*p, '#') << v;
  return std::string(buf, end);
}

std::string written_signed(std::int64_t v) {
  char buf[kMaxDecimalChars + 8];
  std::fill(std::begin(buf), std::end(buf), '#');
  char* end = write_signed_decimal(buf, v);
  EXPECT_LE(end - buf, static_cast<std::ptrdiff_t>(kMaxDecimalChars));
  for (char* p = end; p < std::end(buf); ++p) EXPECT_EQ(*p, '#') << v;
  return std::string(buf, end);
}

// Every power of ten and its neighbours (each digit count and each 8-digit
// block boundary), and the extremes.
std::vector<std::uint64_t> edge_values() {
  std::vector<std::uint64_t> values = {0,
                                       1,
                                       9,
                                       99,
                                       100'000'000 - 1,
                                       std::numeric_limits<std::uint64_t>::max(),
                                       std::numeric_limits<std::uint64_t>::max() - 1,
                                       1'700'000'000'123'456'789u};
  for (std::uint64_t p = 1;; p *= 10) {
    values.push_back(p);
    values.push_back(p - 1);
    values.push_back(p + 1);
    if (p > std::numeric_limits<std::uint64_t>::max() / 10) break;
  }
  return values;
}

TEST(Decimal, UnsignedEdgesAreExact) {
  for (const std::uint64_t v : edge_values()) {
    EXPECT_EQ(written_unsigned(v), reference(v)) << v;
    EXPECT_EQ(decimal_digits(v), reference(v).size()) << v;
  }
  EXPECT_EQ(written_unsigned(0), "0");
  EXPECT_EQ(written_unsigned(std::numeric_limits<std::uint64_t>::max()), "18446744073709551615");
}

TEST(Decimal, SignedEdgesAreExact) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  for (const std::uint64_t u : edge_values()) {
    if (u > static_cast<std::uint64_t>(kMax)) continue;
    const auto v = static_cast<std::int64_t>(u);
    EXPECT_EQ(written_signed(v), reference(v)) << v;
    EXPECT_EQ(written_signed(-v), reference(-v)) << -v;
  }
  EXPECT_EQ(written_signed(0), "0");
  EXPECT_EQ(written_signed(-1), "-1");
  EXPECT_EQ(written_signed(kMax), "9223372036854775807");
  EXPECT_EQ(written_signed(kMin), "-9223372036854775808");
  EXPECT_EQ(written_signed(kMin).size(), kMaxDecimalChars);
}

TEST(Decimal, PseudoRandomValuesMatchToChars) {
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 100'000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    const std::uint64_t v = x >> (x % 64);    // every magnitude
    ASSERT_EQ(written_unsigned(v), reference(v));
    ASSERT_EQ(written_signed(static_cast<std::int64_t>(v)), reference(static_cast<std::int64_t>(v)));
  }
}

}  // namespace
}  // namespace tailscope
