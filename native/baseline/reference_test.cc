#include "baseline/reference.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "core/affinity.h"

namespace tailscope::baseline {
namespace {

// Behaviour, not speed: every reference records exactly the requested number
// of samples (warm-up excluded), values are positive, pinning is honoured.
class EveryReference : public ::testing::TestWithParam<bool> {};

// The listed references and the one tailscope-asyncbench measures itself.
std::vector<Reference> references_under_test() {
  std::vector<Reference> refs = all_references();
  refs.push_back(same_thread_resume_reference());
  return refs;
}

TEST_P(EveryReference, RecordsRequestedSamplesExcludingWarmup) {
  const bool pinned = GetParam();
  CpuPair pair = default_cpu_pair();
  for (const Reference& ref : references_under_test()) {
    ReferenceConfig config;
    config.iterations = 50;
    config.warmup_iterations = 7;
    config.placement = {pinned, pair.client_cpu, pair.server_cpu};
    ReferenceResult result = ref.run(config);
    SCOPED_TRACE(ref.name);
    EXPECT_TRUE(result.unavailable_reason.empty()) << result.unavailable_reason;
    EXPECT_EQ(result.histogram.total_count(), 50);
    EXPECT_EQ(result.histogram.out_of_range_count(), 0);
    EXPECT_GT(result.histogram.min(), 0);
    if (result.observed.contains("observed_samples")) {
      EXPECT_EQ(result.observed["observed_samples"].get<int64_t>(), 50);
      if (pinned && !pair.shared) {
        EXPECT_EQ(result.observed["same_cpu_samples"].get<int64_t>(), 0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Placement, EveryReference, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "pinned" : "unpinned"; });

TEST(References, NamesAreUniqueAndDescribed) {
  std::set<std::string> names;
  for (const Reference& ref : all_references()) {
    EXPECT_TRUE(names.insert(ref.name).second) << ref.name;
    EXPECT_FALSE(ref.what.empty());
    EXPECT_GT(ref.default_iterations, 0);
  }
  EXPECT_EQ(names.size(), 6u);
  EXPECT_EQ(names.count(same_thread_resume_reference().name), 0u);  // reported by tailscope-asyncbench only
}

TEST(References, PinningToACpuOutsideTheSetIsAnError) {
  ReferenceConfig config;
  config.iterations = 5;
  config.warmup_iterations = 0;
  config.placement = {true, 100000, 100001};
  EXPECT_THROW(condvar_handoff_reference().run(config), std::runtime_error);
}

}  // namespace
}  // namespace tailscope::baseline
