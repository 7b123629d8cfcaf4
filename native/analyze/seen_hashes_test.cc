#include "analyze/seen_hashes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_set>

namespace tailscope::analyze {
namespace {

TEST(SeenHashesTest, SaysWhetherAHashIsNew) {
  SeenHashes seen;
  EXPECT_TRUE(seen.insert(42));
  EXPECT_FALSE(seen.insert(42));
  EXPECT_TRUE(seen.insert(43));
  EXPECT_EQ(seen.size(), 2u);
}

TEST(SeenHashesTest, ZeroIsAHashLikeAnyOther) {  // 0 marks an empty slot inside
  SeenHashes seen;
  EXPECT_TRUE(seen.insert(0));
  EXPECT_FALSE(seen.insert(0));
  EXPECT_TRUE(seen.insert(1));
  EXPECT_EQ(seen.size(), 2u);
}

// Agrees with std::unordered_set over many growths, with values that share
// their low or high bits (a weak hash) and random ones, half of them repeats.
TEST(SeenHashesTest, AgreesWithAStandardSetAcrossGrowth) {
  std::mt19937_64 rng(7);
  for (int shape = 0; shape < 3; ++shape) {
    SeenHashes seen;
    std::unordered_set<std::uint64_t> reference;
    std::vector<std::uint64_t> inserted;
    for (int i = 0; i < 200'000; ++i) {
      std::uint64_t h = 0;
      if (!inserted.empty() && rng() % 2 == 0) {
        h = inserted[rng() % inserted.size()];
      } else if (shape == 0) {
        h = rng();
      } else if (shape == 1) {
        h = (rng() % 100'000) << 32;  // low 32 bits all zero
      } else {
        h = rng() % 100'000;  // high bits all zero
      }
      const bool expected = reference.insert(h).second;
      ASSERT_EQ(seen.insert(h), expected) << "value " << h << " at insert " << i << ", shape " << shape;
      if (expected) inserted.push_back(h);
    }
    EXPECT_EQ(seen.size(), reference.size());
  }
}

}  // namespace
}  // namespace tailscope::analyze
