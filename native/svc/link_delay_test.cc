// The link-delay shim on a fake clock: every time below is a number the test
// passes in, so nothing here depends on how fast the machine is.
#include "svc/link_delay.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace tailscope::svc {
namespace {

TEST(LinkDelay, AFrameLeavesAtItsDeadlineAndNotBefore) {
  DelayedFrames q(LinkDelay{2'000'000, 0});
  EXPECT_EQ(q.hold("frame-1", 1'000), 2'001'000);
  EXPECT_EQ(q.next_deadline_ns(), 2'001'000);
  std::string out;
  EXPECT_EQ(q.release_due(2'000'999, out), 0u);
  EXPECT_EQ(out, "");
  EXPECT_EQ(q.release_due(2'001'000, out), 1u);
  EXPECT_EQ(out, "frame-1");
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.next_deadline_ns(), INT64_MAX);
}

TEST(LinkDelay, FramesLeaveInTheOrderTheyWereWritten) {
  DelayedFrames q(LinkDelay{1'000, 0});
  q.hold("a", 0);
  q.hold("b", 10);
  q.hold("c", 20);
  std::string out;
  EXPECT_EQ(q.release_due(1'010, out), 2u);
  EXPECT_EQ(out, "ab");
  EXPECT_EQ(q.next_deadline_ns(), 1'020);
  q.release_due(5'000, out);
  EXPECT_EQ(out, "abc");
}

TEST(LinkDelay, DeadlinesNeverDecreaseUnderJitter) {
  // Large jitter: a later frame may draw a smaller delay, yet never leaves first.
  DelayedFrames q(LinkDelay{1'000'000, 1'000'000}, /*seed=*/42);
  int64_t previous = 0;
  for (int64_t i = 0; i < 10'000; ++i) {
    const int64_t deadline = q.hold(std::to_string(i) + ";", i * 100);
    EXPECT_GE(deadline, previous);
    previous = deadline;
  }
  std::string out;
  q.release_due(INT64_MAX, out);
  std::string expected;
  for (int64_t i = 0; i < 10'000; ++i) expected += std::to_string(i) + ";";
  EXPECT_EQ(out, expected);
}

TEST(LinkDelay, JitterStaysWithinItsBoundsAndUsesThem) {
  const LinkDelay d{500'000, 100'000};
  std::mt19937_64 rng(7);
  int64_t lo = INT64_MAX, hi = 0;
  for (int i = 0; i < 20'000; ++i) {
    const int64_t s = d.sample_ns(rng);
    ASSERT_GE(s, 500'000);
    ASSERT_LE(s, 600'000);
    lo = std::min(lo, s);
    hi = std::max(hi, s);
  }
  // Uniform over 100 001 values: 20 000 draws reach both ends' neighbourhoods.
  EXPECT_LT(lo, 500'000 + 1'000);
  EXPECT_GT(hi, 600'000 - 1'000);
  // Spaced-out frames (no head-of-line wait) get exactly one draw each.
  DelayedFrames q(d, 9);
  for (int64_t t = 0; t < 100; ++t) {
    const int64_t now = t * 1'000'000'000;
    const int64_t added = q.hold("x", now) - now;
    EXPECT_GE(added, 500'000);
    EXPECT_LE(added, 600'000);
  }
}

TEST(LinkDelay, ZeroDelayIsZeroAndTheTableDefaultsToIt) {
  EXPECT_TRUE(LinkDelay{}.zero());
  EXPECT_FALSE((LinkDelay{1, 0}.zero()));
  const LinkDelayTable empty;
  EXPECT_TRUE(empty.for_address("198.18.0.2").zero());
  const auto t = LinkDelayTable::parse("198.18.0.3=2000:100,[::1]=5");
  EXPECT_TRUE(t.for_address("198.18.0.2").zero());  // not configured: no delay
  EXPECT_EQ(t.for_address("198.18.0.3").delay_ns, 2'000'000);
  EXPECT_EQ(t.for_address("198.18.0.3").jitter_ns, 100'000);
  EXPECT_EQ(t.for_address("0:0::1").delay_ns, 5'000);  // canonical form
  EXPECT_EQ(t.for_address("::ffff:198.18.0.3").delay_ns, 2'000'000);
  EXPECT_EQ(t.to_flag(), "198.18.0.3=2000:100,[::1]=5:0");
  EXPECT_EQ(LinkDelayTable::parse(t.to_flag()).to_json(), t.to_json());
}

TEST(LinkDelay, BadTablesAreRefusedNamingTheItem) {
  auto refused = [](const char* text, const char* needle) {
    try {
      LinkDelayTable::parse(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << text << " → " << e.what();
      EXPECT_NE(std::string(e.what()).find("--link-delay"), std::string::npos) << e.what();
    }
  };
  refused("198.18.0.3", "ADDR=DELAY_US");
  refused("198.18.0.3=abc", "not an integer");
  refused("198.18.0.3=10:x", "not an integer");
  refused("198.18.0.3=-1", "outside 0");
  refused("198.18.0.3=10000001", "outside 0");
  refused("198.18.0.3=100:101", "jitter");
  refused("198.18.0.3=100,198.18.0.3=200", "twice");
  refused("192.0.2.1=100", "refused");
  refused("lab-host=100", "not a numeric");
  EXPECT_NO_THROW(LinkDelayTable::parse("198.18.0.3=10000000:10000000"));
  EXPECT_NO_THROW(LinkDelayTable::parse(""));
}

}  // namespace
}  // namespace tailscope::svc
