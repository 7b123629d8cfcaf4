#include "load/config.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tailscope::load {
namespace {

TEST(ParseSiNumber, AcceptsWrk2Suffixes) {
  EXPECT_DOUBLE_EQ(parse_si_number("500"), 500);
  EXPECT_DOUBLE_EQ(parse_si_number("10k"), 10'000);
  EXPECT_DOUBLE_EQ(parse_si_number("2.5M"), 2.5e6);
  EXPECT_DOUBLE_EQ(parse_si_number("1G"), 1e9);
  EXPECT_THROW(parse_si_number("ten"), std::invalid_argument);
  EXPECT_THROW(parse_si_number("5x"), std::invalid_argument);
  EXPECT_THROW(parse_si_number("-5"), std::invalid_argument);
}

TEST(ParseDuration, AcceptsUnits) {
  EXPECT_DOUBLE_EQ(parse_duration_s("10"), 10);
  EXPECT_DOUBLE_EQ(parse_duration_s("10s"), 10);
  EXPECT_DOUBLE_EQ(parse_duration_s("250ms"), 0.25);
  EXPECT_DOUBLE_EQ(parse_duration_s("2m"), 120);
  EXPECT_DOUBLE_EQ(parse_duration_s("1h"), 3600);
  EXPECT_THROW(parse_duration_s("3 fortnights"), std::invalid_argument);
}

}  // namespace
}  // namespace tailscope::load
