#include "trace/internal/json_scalar.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tailscope::trace::internal {
namespace {

// What std::from_chars says of the whole text, the reference.
DecimalParse reference(std::string_view text, std::int64_t* out) {
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ptr != text.data() + text.size()) return DecimalParse::kInvalid;
  if (ec == std::errc::result_out_of_range) return DecimalParse::kOutOfRange;
  if (ec != std::errc()) return DecimalParse::kInvalid;
  *out = v;
  return DecimalParse::kOk;
}

void expect_as_from_chars(std::string_view text) {
  std::int64_t want = 7, got = 7;
  const DecimalParse want_status = reference(text, &want);
  const DecimalParse got_status = parse_decimal_int64(text, &got);
  EXPECT_EQ(static_cast<int>(got_status), static_cast<int>(want_status)) << "'" << text << "'";
  if (want_status == DecimalParse::kOk) {
    EXPECT_EQ(got, want) << "'" << text << "'";
  }
}

TEST(ParseDecimalInt64, EdgesAsFromChars) {
  const std::vector<std::string> texts = {"0",
                                          "-0",
                                          "7",
                                          "-7",
                                          "00",
                                          "0000000000000000000",
                                          "00000000000000000000000001",  // 19 and 26 digits
                                          "1700000000000000000",
                                          "1700000000123456789",  // OTLP times
                                          "9223372036854775807",
                                          "9223372036854775808",
                                          "9999999999999999999",  // 19 digits
                                          "-9223372036854775808",
                                          "-9223372036854775809",
                                          "-9999999999999999999",
                                          "18446744073709551615",
                                          "18446744073709551616",
                                          "99999999999999999999",  // 20 digits
                                          "-99999999999999999999",
                                          "123456789012345678901234567890",
                                          "",
                                          "-",
                                          "--1",
                                          "+1",
                                          " 1",
                                          "1 ",
                                          "1a",
                                          "a1",
                                          "1.5",
                                          "1e3",
                                          "0x10",
                                          "12345678901234567a9",
                                          std::string("12\0004", 4),                  // a NUL byte inside
                                          std::string{static_cast<char>(0xff), '1'},  // not ASCII
                                          "/",
                                          ":"};
  for (const std::string& t : texts) expect_as_from_chars(t);
}

TEST(ParseDecimalInt64, EveryLengthAndDigitAsFromChars) {
  // Each length up to 21 digits, with and without '-', each digit value, and
  // one non-digit at each position.
  for (std::size_t n = 1; n <= 21; ++n) {
    for (char d = '0'; d <= '9'; ++d) {
      std::string t(n, d);
      expect_as_from_chars(t);
      expect_as_from_chars("-" + t);
      for (std::size_t at = 0; at < n; ++at) {
        std::string bad = t;
        bad[at] = static_cast<char>(d == '0' ? '/' : ':');
        expect_as_from_chars(bad);
      }
    }
  }
}

TEST(ParseDecimalInt64, RandomDigitsAndBytesAsFromChars) {
  // Digits read 8 at a time (8 to 19 of them): random values of every
  // length, and each with one byte replaced by any of the 256 at a random
  // place (bytes just outside '0'..'9' and with a high bit set included).
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int round = 0; round < 20000; ++round) {
    const std::size_t n = 1 + next() % 21;
    std::string t;
    if (next() % 4 == 0) t += '-';
    for (std::size_t i = 0; i < n; ++i) t += static_cast<char>('0' + next() % 10);
    expect_as_from_chars(t);
    t[next() % t.size()] = static_cast<char>(next() % 256);
    expect_as_from_chars(t);
  }
}

TEST(ParseDecimalInt64, TimesSaturateAsBefore) {
  // to_nanoseconds: beyond int64 saturates at the sign's limit; not a number is false.
  JsonScalar s;
  s.type = JsonScalar::Type::kString;
  std::int64_t ns = 0;
  s.text = "99999999999999999999";
  ASSERT_TRUE(s.to_nanoseconds(1, &ns));
  EXPECT_EQ(ns, std::numeric_limits<std::int64_t>::max());
  s.text = "-9223372036854775809";
  ASSERT_TRUE(s.to_nanoseconds(1, &ns));
  EXPECT_EQ(ns, std::numeric_limits<std::int64_t>::min());
  s.text = "1700000000123456789";
  ASSERT_TRUE(s.to_nanoseconds(1, &ns));
  EXPECT_EQ(ns, 1700000000123456789);
  s.text = "9223372036854775";
  ASSERT_TRUE(s.to_nanoseconds(1000, &ns));
  EXPECT_EQ(ns, 9223372036854775000);
  s.text = "9223372036854776";
  ASSERT_TRUE(s.to_nanoseconds(1000, &ns));
  EXPECT_EQ(ns, std::numeric_limits<std::int64_t>::max());
  s.text = "17x";
  EXPECT_FALSE(s.to_nanoseconds(1, &ns));
  s.text = "";
  EXPECT_FALSE(s.to_nanoseconds(1, &ns));
  EXPECT_FALSE(s.to_int64(&ns));
  s.text = "-42";
  ASSERT_TRUE(s.to_int64(&ns));
  EXPECT_EQ(ns, -42);
}

}  // namespace
}  // namespace tailscope::trace::internal
