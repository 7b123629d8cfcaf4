#include "load/config.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

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

TEST(ParseLoadIo, NamesTheThreeBackendsAndRejectsOthers) {
  EXPECT_EQ(parse_load_io("auto"), LoadIo::kAuto);
  EXPECT_EQ(parse_load_io("uring"), LoadIo::kUring);
  EXPECT_EQ(parse_load_io("epoll"), LoadIo::kEpoll);
  EXPECT_EQ(to_string(LoadIo::kUring), "uring");
  try {
    parse_load_io("io_uring");
    FAIL() << "accepted io_uring";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--io: 'io_uring'"), std::string::npos) << e.what();
  }
}

TEST(ParseDuration, AcceptsUnits) {
  EXPECT_DOUBLE_EQ(parse_duration_s("10"), 10);
  EXPECT_DOUBLE_EQ(parse_duration_s("10s"), 10);
  EXPECT_DOUBLE_EQ(parse_duration_s("250ms"), 0.25);
  EXPECT_DOUBLE_EQ(parse_duration_s("2m"), 120);
  EXPECT_DOUBLE_EQ(parse_duration_s("1h"), 3600);
  EXPECT_THROW(parse_duration_s("3 fortnights"), std::invalid_argument);
}

// Each of these used to be accepted, misread or reported as "stod": a run must
// refuse what it cannot honour, with a message naming the input.
TEST(ParseOptions, RejectWhatTheRunCannotHonour) {
  auto message = [](auto&& parse) -> std::string {
    try {
      parse();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message([] { parse_count("-c", "1.5", 1, kMaxConnections); }), "-c: '1.5' is not an integer (1 … 1000000)");
  EXPECT_EQ(parse_count("-c", "1.5k", 1, kMaxConnections), 1500);
  EXPECT_EQ(message([] { parse_count("-c", "2M", 1, kMaxConnections); }), "-c: '2M' is out of range (1 … 1000000)");
  EXPECT_EQ(message([] { parse_rate_per_s("-R", "1e400"); }), "-R: '1e400' is out of range");
  EXPECT_EQ(message([] { parse_rate_per_s("-R", "1e308G"); }), "-R: '1e308G' is out of range");
  EXPECT_NE(message([] { parse_rate_per_s("-R", "200M"); }).find("-R: '200M' is out of range"), std::string::npos);
  EXPECT_EQ(message([] { parse_duration_in("-d", "9300000000s", kMinDurationS, kMaxDurationS); }),
            "-d: '9300000000s' is out of range (0.001 s … 86400 s)");
  EXPECT_EQ(message([] { parse_duration_in("-d", "0s", kMinDurationS, kMaxDurationS); }),
            "-d: '0s' is out of range (0.001 s … 86400 s)");
  EXPECT_DOUBLE_EQ(parse_duration_in("-d", "24h", kMinDurationS, kMaxDurationS), 86'400);
  EXPECT_EQ(message([] { parse_number_in("--spin-us", "nan", 0, 10'000); }), "--spin-us: 'nan' is not a number");
  EXPECT_EQ(message([] { parse_number_in("--spin-us", "5us", 0, 10'000); }), "--spin-us: '5us' is not a number");
  EXPECT_EQ(message([] { parse_count("-t", "-1", 1, 256); }), "-t: '-1' is negative; must be ≥ 0");
  EXPECT_EQ(message([] { parse_rate_per_s("-R", "-5"); }), "-R: '-5' is negative; must be ≥ 0");
  EXPECT_EQ(message([] { parse_count("-c", "0x10", 1, 1'000'000); }), "-c: '0x10' is not a decimal number");
  EXPECT_EQ(message([] { parse_rate_per_s("-R", "0x1p3"); }), "-R: '0x1p3' is not a decimal number");
  EXPECT_EQ(message([] { parse_count("-c", "-x", 1, 256); }), "-c: '-x' is not a number");
}

TEST(CheckLoadConfig, AnOpenLoopRunMustIntendARequestInTheWindow) {
  LoadConfig config;
  config.duration_s = 10;
  config.rate_per_s = 0.001;
  EXPECT_THROW(check_load_config(config), std::invalid_argument);
  config.rate_per_s = 0.1;  // one request in 10 s
  EXPECT_NO_THROW(check_load_config(config));
  config.rate_per_s = 0;  // closed loop
  EXPECT_NO_THROW(check_load_config(config));
}

}  // namespace
}  // namespace tailscope::load
