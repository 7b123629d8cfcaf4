#include "svc/work_stage.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include "svc/topology.h"

namespace tailscope::svc {
namespace {

using nlohmann::json;

uint32_t crc_of(const std::string& s) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

TEST(WorkStage, InputIsJsonOfExactlyTheRequestedSize) {
  for (size_t bytes : {2u, 50u, 100u, 4096u, 100000u}) {
    const std::string& in = work_input(bytes);
    EXPECT_EQ(in.size(), bytes);
    EXPECT_FALSE(json::parse(in, nullptr, false).is_discarded()) << bytes;
  }
  EXPECT_GT(json::parse(work_input(4096)).size(), 30u);  // real records, not padding
}

TEST(WorkStage, Sha256IsTheStandardDigest) {
  // FIPS 180-2 test vector: the digest of "abc".
  EXPECT_EQ(hex(work_once(WorkSpec::Kind::kSha256, "abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(WorkStage, DeflateOutputInflatesBackToTheInput) {
  const std::string& in = work_input(65536);
  const std::string out = work_once(WorkSpec::Kind::kDeflate, in);
  EXPECT_LT(out.size(), in.size() / 2);  // the records really were compressed
  std::string back(in.size(), '\0');
  uLongf len = back.size();
  ASSERT_EQ(
      uncompress(reinterpret_cast<Bytef*>(back.data()), &len, reinterpret_cast<const Bytef*>(out.data()), out.size()),
      Z_OK);
  back.resize(len);
  EXPECT_EQ(back, in);
}

TEST(WorkStage, JsonOutputIsTheSameDocument) {
  const std::string& in = work_input(8192);
  const std::string out = work_once(WorkSpec::Kind::kJson, in);
  EXPECT_EQ(json::parse(out), json::parse(in));
  EXPECT_LT(out.size(), in.size() + 1);  // re-serialised compactly (padding gone)
}

TEST(WorkStage, RunWorkReturnsTheChecksumOfTheLastOutput) {
  for (auto kind : {WorkSpec::Kind::kJson, WorkSpec::Kind::kSha256, WorkSpec::Kind::kDeflate}) {
    WorkSpec spec{kind, 3000, 3};
    EXPECT_EQ(run_work(spec), crc_of(work_once(kind, work_input(3000)))) << work_kind_name(kind);
  }
  // Different inputs give different outputs: the work depends on its data.
  EXPECT_NE(run_work({WorkSpec::Kind::kSha256, 3000, 1}), run_work({WorkSpec::Kind::kSha256, 3001, 1}));
}

TEST(WorkStage, ParsesAndRejectsBadSpecsNamingTheInput) {
  WorkSpec s = parse_work_spec(json{{"kind", "deflate"}, {"bytes", 1000}, {"repeat", 4}}, "w");
  EXPECT_EQ(s.kind, WorkSpec::Kind::kDeflate);
  EXPECT_EQ(s.bytes, 1000u);
  EXPECT_EQ(s.repeat, 4);
  EXPECT_EQ(to_json(s), (json{{"kind", "deflate"}, {"bytes", 1000}, {"repeat", 4}}));
  auto error_of = [](const json& j) {
    try {
      parse_work_spec(j, "svc 'a' endpoint 'run': stages[0].work");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of(json{{"kind", "md5"}}).find("kind must be json, sha256 or deflate"), std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "json"}, {"bytes", 0}}).find("'bytes'"), std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "json"}, {"bytes", 1}}).find("≥ 2"), std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "sha256"}, {"repeat", 0}}).find("'repeat'"), std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "sha256"}, {"size", 3}}).find("unknown key 'size'"), std::string::npos);
  EXPECT_NE(error_of(json{{"bytes", 3}}).find("needs 'kind'"), std::string::npos);
  EXPECT_EQ(error_of(json{{"kind", "json"}, {"bytes", 1}}).rfind("svc 'a' endpoint 'run': stages[0].work", 0), 0u);
}

TEST(WorkStage, TopologyAcceptsAWorkStage) {
  json doc = json::parse(R"({"services": [{"name": "a", "endpoints": [{"name": "run", "stages": [
      {"work": {"kind": "sha256", "bytes": 512, "repeat": 2}}]}]}]})");
  Topology t = parse_topology(doc, "t.json");
  const Stage& st = t.service("a").endpoints.at("run").stages.at(0);
  EXPECT_EQ(st.kind, Stage::Kind::kWork);
  EXPECT_EQ(st.work.kind, WorkSpec::Kind::kSha256);
  EXPECT_EQ(st.work.repeat, 2);
  doc["services"][0]["endpoints"][0]["stages"][0]["work"]["kind"] = "gzip";
  try {
    parse_topology(doc, "t.json");
    FAIL() << "a bad work kind was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("t.json: service 'a': endpoint 'run': stages[0].work"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tailscope::svc
