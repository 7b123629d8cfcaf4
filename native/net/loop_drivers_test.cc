#include "net/loop_drivers.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace tailscope::net {
namespace {

// Records what it was given; registers one end of a socket pair with its member bits.
struct Recorder final : LoopDriven {
  std::vector<uint64_t> tokens;
  int64_t due_ns = INT64_MAX;
  int serviced = 0;
  void on_ready(const ReadyEvent& e) override { tokens.push_back(e.token); }
  int64_t service() override {
    ++serviced;
    return due_ns;
  }
};

TEST(LoopDrivers, RoutesEachEventToTheMemberWhoseBitsItCarries) {
  LoopDrivers drivers;
  Recorder a, b;
  EXPECT_EQ(drivers.add(&a), 0u);  // member 0: no bits, so pointer tokens route unchanged
  const uint64_t b_bits = drivers.add(&b);
  EXPECT_EQ(b_bits, uint64_t{1} << 56);

  EventLoop loop;
  int pa[2], pb[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pa), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pb), 0);
  const uint64_t token_a = LoopDriven::kTokenTag | 0x7f00'1234'5678;  // like a heap pointer
  const uint64_t token_b = LoopDriven::kTokenTag | b_bits | 42;
  loop.add(pa[0], token_a, kReadable);
  loop.add(pb[0], token_b, kReadable);
  ASSERT_EQ(::write(pa[1], "x", 1), 1);
  ASSERT_EQ(::write(pb[1], "y", 1), 1);
  for (const ReadyEvent& e : loop.wait(1'000'000'000)) drivers.on_ready(e);
  ASSERT_EQ(a.tokens.size(), 1u);
  ASSERT_EQ(b.tokens.size(), 1u);
  EXPECT_EQ(a.tokens[0], token_a);
  EXPECT_EQ(b.tokens[0], token_b);
  EXPECT_EQ(b.tokens[0] & LoopDrivers::kPayloadMask, 42u);  // the member's own part comes back intact

  // A token of a member that does not exist is dropped, not given to another.
  drivers.on_ready(ReadyEvent{LoopDriven::kTokenTag | LoopDrivers::member_bits(5) | 1, kReadable});
  EXPECT_EQ(a.tokens.size() + b.tokens.size(), 2u);
  for (int fd : {pa[0], pa[1], pb[0], pb[1]}) ::close(fd);
}

TEST(LoopDrivers, ServicesEveryMemberAndReturnsTheEarliestDue) {
  LoopDrivers drivers;
  Recorder a, b, c;
  drivers.add(&a);
  drivers.add(&b);
  drivers.add(&c);
  a.due_ns = 300;
  b.due_ns = 100;
  EXPECT_EQ(drivers.service(), 100);
  EXPECT_EQ(a.serviced + b.serviced + c.serviced, 3);
  b.due_ns = INT64_MAX;
  EXPECT_EQ(drivers.service(), 300);
  a.due_ns = INT64_MAX;
  EXPECT_EQ(drivers.service(), INT64_MAX);
}

TEST(LoopDrivers, RefusesMoreMembersThanItsTokenBitsHold) {
  LoopDrivers drivers;
  Recorder r;
  for (size_t i = 0; i < LoopDrivers::kMaxMembers; ++i) drivers.add(&r);
  EXPECT_THROW(drivers.add(&r), std::length_error);
}

}  // namespace
}  // namespace tailscope::net
