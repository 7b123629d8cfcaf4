#include "prof/events.h"

#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tailscope::prof {
namespace {

namespace fs = std::filesystem;

class FakePmu : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tailscope-pmu-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "format");
    fs::create_directories(dir_ / "events");
    write("type", "4\n");
    write("format/event", "config:0-7,32-35\n");
    write("format/umask", "config:8-15\n");
    write("format/cmask", "config:24-31\n");
    write("format/any", "config:21\n");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  fs::path dir_;
};

TEST_F(FakePmu, SysfsDescriptionsBecomeConfigBits) {
  EXPECT_EQ(sysfs_event_config("event=0x9c,umask=0x01", dir_), 0x019cu);
  EXPECT_EQ(sysfs_event_config("event=0x3c,any=1", dir_), 0x3cu | (1u << 21));
  EXPECT_EQ(sysfs_event_config("event=0x1a0,umask=0x1e", dir_), 0xa0u | (uint64_t{1} << 32) | (0x1eu << 8));
  EXPECT_EQ(sysfs_event_config("event=0x0e,umask=0x01,cmask=4\n", dir_), 0x010eu | (4u << 24));
  EXPECT_THROW(sysfs_event_config("edge=1", dir_), std::invalid_argument);    // no format/edge
  EXPECT_THROW(sysfs_event_config("any=2", dir_), std::invalid_argument);     // 2 does not fit one bit
  EXPECT_THROW(sysfs_event_config("event=zz", dir_), std::invalid_argument);  // not a number
}

TEST_F(FakePmu, IntelTopdownEventsComeFromSysfsWithTheirScale) {
  write("events/topdown-total-slots", "event=0x3c,umask=0x0,any=1");
  write("events/topdown-total-slots.scale", "2");
  write("events/topdown-fetch-bubbles", "event=0x9c,umask=0x1");
  const CpuIdentity intel{"GenuineIntel", 6, 0x55, "test"};
  const auto table = event_table(intel, dir_, false);
  int found = 0;
  for (const auto& e : table) {
    if (e.name == "topdown_total_slots") {
      ++found;
      EXPECT_EQ(e.type, 4u);
      EXPECT_EQ(e.config, 0x3cu | (1u << 21));
      EXPECT_DOUBLE_EQ(e.scale, 2.0);
    }
    if (e.name == "topdown_fetch_bubbles") ++found;
  }
  EXPECT_EQ(found, 2);
  EXPECT_EQ(sysfs_event_names(dir_), (std::vector<std::string>{"topdown-fetch-bubbles", "topdown-total-slots"}));
}

TEST(EventTable, EveryDocumentedEventIsPresentWithACodeOrAReason) {
  for (const CpuIdentity& cpu : {CpuIdentity{"GenuineIntel", 6, 0x55, ""}, CpuIdentity{"AuthenticAMD", 0x17, 0x31, ""},
                                 CpuIdentity{"AuthenticAMD", 0x19, 0x11, ""}, CpuIdentity{"SomeVendor", 1, 1, ""}}) {
    const auto table = event_table(cpu, "", false);
    std::vector<std::string> names;
    for (const auto& e : table) {
      names.push_back(e.name);
      if (e.type == PERF_TYPE_RAW && e.unavailable.empty()) {
        EXPECT_NE(e.config, 0u) << e.name;
      }
    }
    for (const auto& n : software_event_names()) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end());
    for (const auto& n : hardware_event_names()) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end());
  }
  // An unknown vendor has no raw codes: unavailable with the reason, not a guess.
  for (const auto& e : event_table(CpuIdentity{"SomeVendor", 1, 1, ""}, "", false))
    if (e.type == PERF_TYPE_RAW) {
      EXPECT_NE(e.unavailable.find("no raw code"), std::string::npos) << e.name;
    }
  // AMD Zen 4 brings its dispatch-slot top-down events; Zen 3 does not.
  auto has = [](const std::vector<EventSpec>& t, const std::string& n) {
    return std::any_of(t.begin(), t.end(), [&](const EventSpec& e) { return e.name == n; });
  };
  EXPECT_TRUE(has(event_table(CpuIdentity{"AuthenticAMD", 0x19, 0x11, ""}, "", false), "topdown_frontend_slots"));
  EXPECT_FALSE(has(event_table(CpuIdentity{"AuthenticAMD", 0x19, 0x01, ""}, "", false), "topdown_frontend_slots"));
  // Per-CPU counting has no task: cpu-clock replaces task-clock.
  EXPECT_EQ(event_table(CpuIdentity{}, "", true)[0].config, static_cast<uint64_t>(PERF_COUNT_SW_CPU_CLOCK));
}

TEST(CpuIdentity, ReadsTheFirstCpusBlock) {
  const fs::path p = fs::temp_directory_path() / ("tailscope-cpuinfo-" + std::to_string(::getpid()));
  std::ofstream(p) << "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                      "model name\t: AMD EPYC\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n";
  const CpuIdentity id = read_cpu_identity(p);
  fs::remove(p);
  EXPECT_EQ(id.vendor, "AuthenticAMD");
  EXPECT_EQ(id.family, 25);
  EXPECT_EQ(id.model, 17);
  EXPECT_EQ(id.model_name, "AMD EPYC");
}

}  // namespace
}  // namespace tailscope::prof
