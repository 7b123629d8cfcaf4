// Each memory kernel holds a working set within 10 % of the requested size.
#include "prof/stress/kernel.h"

#include <gtest/gtest.h>

namespace tailscope::prof::stress {
namespace {

TEST(StressKernel, WorkingSetWithinTenPercentOfTheRequest) {
  for (const std::string name : {"l1i", "l1d", "l2", "l3", "membw", "memcap"}) {
    for (const size_t request : {size_t{48} << 10, size_t{4} << 20}) {
      if (name == "l1i" && request > (size_t{128} << 10)) continue;  // more code than is generated
      auto kernel = make_kernel(name);
      kernel->prepare(request);
      kernel->set_progress(1.0);
      Pressure p;
      for (int i = 0; i < 200; ++i) kernel->run_chunk(p);
      const double held = static_cast<double>(kernel->working_set_bytes());
      EXPECT_NEAR(held, static_cast<double>(request), 0.1 * request) << name << " asked " << request;
      EXPECT_GT(p.accesses, 0u) << name;
      EXPECT_GT(p.bytes, 0u) << name;
    }
  }
}

TEST(StressKernel, CpuDoesFlopsAndUnknownKernelsAreRefused) {
  auto cpu = make_kernel("cpu");
  cpu->prepare(0);
  Pressure p;
  cpu->run_chunk(p);
  EXPECT_EQ(p.flops, 2ull * 32 * 32 * 32);
  EXPECT_THROW(make_kernel("gpu"), std::invalid_argument);
}

TEST(StressKernel, DefaultsComeFromTheCacheSizes) {
  CacheSizes c;
  c.l1d_bytes = 48 << 10;
  c.l1i_bytes = 32 << 10;
  c.l2_bytes = 2 << 20;
  c.l3_bytes = 30 << 20;
  EXPECT_EQ(default_working_set_bytes("l1d", c, 0, 0.5, 1), size_t{48} << 10);
  EXPECT_EQ(default_working_set_bytes("l2", c, 0, 0.5, 1), size_t{2} << 20);
  EXPECT_EQ(default_working_set_bytes("l3", c, 0, 0.5, 1), size_t{30} << 20);
  EXPECT_GT(default_working_set_bytes("membw", c, 0, 0.5, 1), c.l3_bytes);
  EXPECT_EQ(default_working_set_bytes("memcap", c, 1000, 0.5, 2), 250u);
  EXPECT_EQ(parse_cache_size("32K"), size_t{32} << 10);
  EXPECT_EQ(parse_cache_size("1024K"), size_t{1} << 20);
  EXPECT_EQ(parse_cache_size("32M"), size_t{32} << 20);
}

}  // namespace
}  // namespace tailscope::prof::stress
