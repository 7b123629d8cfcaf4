#include "core/affinity.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

namespace tailscope {
namespace {

TEST(CpuList, ParsesSinglesRangesAndDuplicates) {
  EXPECT_EQ(parse_cpu_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(parse_cpu_list("0-3,6"), (std::vector<int>{0, 1, 2, 3, 6}));
  EXPECT_EQ(parse_cpu_list("5,1,1-2"), (std::vector<int>{1, 2, 5}));
}

TEST(CpuList, RejectsMalformedTextWithTheText) {
  for (const char* bad : {"", "a", "1-", "-1", "3-1", "1,,2", "99999", "1.5"}) {
    try {
      parse_cpu_list(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("cpu list"), std::string::npos) << e.what();
    }
  }
}

TEST(CpuList, FormatRoundTrips) {
  for (std::string text : {"0", "0-3", "0-2,5,7-9", "1,3"}) EXPECT_EQ(format_cpu_list(parse_cpu_list(text)), text);
  EXPECT_EQ(format_cpu_list({}), "");
}

TEST(Affinity, PinsToEachAllowedCpuAndUnpins) {
  std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  std::thread([&] {
    for (int cpu : cpus) {
      std::string error;
      ASSERT_TRUE(pin_current_thread(cpu, &error)) << error;
      EXPECT_EQ(current_thread_cpus(), std::vector<int>{cpu});
      EXPECT_EQ(current_cpu(), cpu);
    }
    ASSERT_TRUE(unpin_current_thread());
    EXPECT_EQ(current_thread_cpus(), cpus);
    // allowed_cpus() must not shrink because this thread pinned itself.
    EXPECT_EQ(allowed_cpus(), cpus);
  }).join();
}

TEST(Affinity, RefusesImpossibleCpuWithReason) {
  std::string error;
  EXPECT_FALSE(pin_current_thread(-1, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(pin_current_thread(std::vector<int>{}, &error));
}

TEST(Affinity, DefaultPairUsesDistinctCpusWhenThereAreTwo) {
  CpuPair pair = default_cpu_pair();
  if (allowed_cpus().size() >= 2) {
    EXPECT_NE(pair.server_cpu, pair.client_cpu);
    EXPECT_FALSE(pair.shared);
  } else {
    EXPECT_TRUE(pair.shared);
  }
}

}  // namespace
}  // namespace tailscope
