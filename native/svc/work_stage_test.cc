#include "svc/work_stage.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <sstream>

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
    WorkSpec spec{kind, 3000, 3, std::nullopt};
    EXPECT_EQ(run_work(spec), crc_of(work_once(kind, work_input(3000)))) << work_kind_name(kind);
  }
  // Different inputs give different outputs: the work depends on its data.
  EXPECT_NE(run_work({WorkSpec::Kind::kSha256, 3000, 1, std::nullopt}),
            run_work({WorkSpec::Kind::kSha256, 3001, 1, std::nullopt}));
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
  EXPECT_NE(error_of(json{{"kind", "md5"}})
                .find("kind must be json, sha256, deflate, text, url_hash, unique_id or post_serde"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "json"}, {"bytes", 0}}).find("'bytes'"), std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "json"}, {"bytes", 1}}).find("≥ 2"), std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "sha256"}, {"repeat", 0}}).find("'repeat'"), std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "sha256"}, {"size", 3}}).find("unknown key 'size'"), std::string::npos);
  EXPECT_NE(error_of(json{{"bytes", 3}}).find("needs 'kind'"), std::string::npos);
  EXPECT_EQ(error_of(json{{"kind", "json"}, {"bytes", 1}}).rfind("svc 'a' endpoint 'run': stages[0].work", 0), 0u);
}

TEST(WorkStage, TextFindsDeathStarBenchsMentionsAndUrls) {
  // Its patterns: a mention is @ and [a-zA-Z0-9_-]; a URL stops at the first character outside
  // [a-zA-Z0-9_!~*'().&=+$%-] ('/' and ',' included). "a@b" is a mention to them too.
  const TextEntities found = scan_text("hi @alice and @bob-2 see http://x.org/a?b=1 ok https://y.io/p_q, @ end a@b");
  EXPECT_EQ(found.mentions, (std::vector<std::string>{"@alice", "@bob-2", "@b"}));
  EXPECT_EQ(found.urls, (std::vector<std::string>{"http://x.org", "https://y.io"}));
  EXPECT_EQ(work_once(WorkSpec::Kind::kText, "@a http://b"), "@a\nhttp://b\n");
}

TEST(WorkStage, PostTextHoldsTheMentionsAndUrlsItWasBuiltWith) {
  for (size_t bytes : {1u, 64u, 600u, 4096u}) {
    const std::string text = post_text(bytes);
    EXPECT_EQ(text.size(), bytes);
    EXPECT_EQ(post_text(bytes), text);  // deterministic
    // Counted by splitting on spaces, not by the regular expressions under test.
    size_t mentions = 0, urls = 0;
    std::istringstream words(text);
    for (std::string w; words >> w;) {
      mentions += w[0] == '@';
      urls += w.rfind("http", 0) == 0;
    }
    const TextEntities found = scan_text(text);
    EXPECT_EQ(found.mentions.size(), mentions) << bytes;
    EXPECT_EQ(found.urls.size(), urls) << bytes;
    if (bytes >= 600) {
      EXPECT_GE(std::min(mentions, urls), 3u) << bytes;  // a post with entities, not just words
    }
  }
}

TEST(WorkStage, UrlHashIsTheBase62OfTheSha256) {
  // Expected values computed independently (Python hashlib: the first 8 digest bytes, big-endian, mod 62^10).
  EXPECT_EQ(short_url("http://example.com/a?b=1"), "http://short-url/Ytd5oThXqU");
  EXPECT_EQ(work_once(WorkSpec::Kind::kUrlHash, "https://github.com/delimitrou/DeathStarBench"),
            "http://short-url/VfuCk6oCnK");
  EXPECT_EQ(url_text(100).size(), 100u);
  EXPECT_EQ(url_text(100).rfind("https://www.example.com/", 0), 0u);
}

TEST(WorkStage, UniqueIdPacksTimeMachineAndCounter) {
  EXPECT_EQ(pack_unique_id({1234567890, 0x2AB, 0xFFF}), 0x126580b4aabfffULL);
  const UniqueIdParts back = unpack_unique_id(0x126580b4aabfffULL);
  EXPECT_EQ(back.ms_since_epoch, 1234567890);
  EXPECT_EQ(back.machine_id, 0x2ABu);
  EXPECT_EQ(back.counter, 0xFFFu);
  // The largest time fits and the sign bit stays clear; wider fields wrap to their widths.
  EXPECT_EQ(pack_unique_id({(int64_t{1} << 41) - 1, 1023, 4095}), 0x7FFFFFFFFFFFFFFFULL);
  EXPECT_EQ(pack_unique_id({0, 1024, 4096}), 0u);
  // Now: two ids differ by the counter, carry this machine's id and today's time.
  const uint64_t a = next_unique_id(), b = next_unique_id();
  EXPECT_NE(a, b);
  EXPECT_EQ(unpack_unique_id(a).machine_id, unpack_unique_id(b).machine_id);
  EXPECT_EQ((unpack_unique_id(a).counter + 1) & 0xFFF, unpack_unique_id(b).counter);
  const int64_t ms = unpack_unique_id(a).ms_since_epoch;
  EXPECT_GT(ms, int64_t{8} * 365 * 86400 * 1000);  // after 2026 (8 years past the 2018 epoch)
  EXPECT_LT(ms, int64_t{1} << 41);
  const std::string text = work_once(WorkSpec::Kind::kUniqueId, "");
  EXPECT_EQ(text.size(), 16u);
  EXPECT_EQ(unpack_unique_id(std::stoull(text, nullptr, 16)).machine_id, unpack_unique_id(a).machine_id);
}

TEST(WorkStage, PostSerdeRoundTripsThePost) {
  const PostRecord post = post_record(600);
  EXPECT_EQ(post.text, post_text(600));
  EXPECT_EQ(post.user_mentions.size(), scan_text(post.text).mentions.size());
  EXPECT_FALSE(post.urls.empty());
  EXPECT_EQ(post.urls[0].shortened_url, short_url(post.urls[0].expanded_url));
  const std::string text = serialise_post(post);
  EXPECT_EQ(deserialise_post(text), post);
  EXPECT_EQ(work_once(WorkSpec::Kind::kPostSerde, text), text);  // byte for byte
  EXPECT_EQ(work_input_for(WorkSpec::Kind::kPostSerde, 600), text);
  PostRecord other = post;
  other.urls.pop_back();
  EXPECT_NE(deserialise_post(serialise_post(other)), post);  // the comparison sees a lost field
  // A record that is not a post names the field.
  json broken = json::parse(text);
  broken["creator"].erase("username");
  try {
    deserialise_post(broken.dump());
    FAIL() << "a post without creator.username was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'username'"), std::string::npos) << e.what();
  }
}

TEST(WorkStage, NewKindsRunAndTheirInputsAreDeterministic) {
  for (auto kind : {WorkSpec::Kind::kText, WorkSpec::Kind::kUrlHash, WorkSpec::Kind::kPostSerde}) {
    WorkSpec spec{kind, 700, 2, std::nullopt};
    EXPECT_EQ(run_work(spec), crc_of(work_once(kind, work_input_for(kind, 700)))) << work_kind_name(kind);
  }
  EXPECT_NE(run_work({WorkSpec::Kind::kUniqueId, 4096, 1, std::nullopt}),
            run_work({WorkSpec::Kind::kUniqueId, 4096, 1, std::nullopt}));  // a new id each time
}

TEST(WorkStage, SimulatedCpuIsParsedAndErrorsNameTheField) {
  WorkSpec s = parse_work_spec(json::parse(R"({"kind": "text", "bytes": 600,
      "simulated_cpu": {"kind": "lognormal", "median_us": 25, "sigma": 0.3}})"),
                               "w");
  ASSERT_TRUE(s.simulated_cpu.has_value());
  EXPECT_DOUBLE_EQ(s.simulated_cpu->a_ns, 25000);
  EXPECT_EQ(to_json(s)["simulated_cpu"], s.simulated_cpu->to_json());
  EXPECT_EQ(parse_work_spec(to_json(s), "w").simulated_cpu->to_json(), s.simulated_cpu->to_json());  // round trip
  EXPECT_DOUBLE_EQ(parse_work_spec(json{{"kind", "unique_id"}, {"simulated_cpu", 5}}, "w").simulated_cpu->a_ns, 5000);
  EXPECT_FALSE(parse_work_spec(json{{"kind", "unique_id"}}, "w").simulated_cpu.has_value());
  auto error_of = [](const json& j) {
    try {
      parse_work_spec(j, "stages[0].work");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of(json{{"kind", "text"}, {"simulated_cpu", {{"kind", "lognormal"}, {"median_ms", 3}}}})
                .find("stages[0].work.simulated_cpu"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "text"}, {"simulated_cpu", "fast"}}).find("simulated_cpu"), std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "unique_id"}, {"bytes", 64}}).find("'bytes'"), std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "url_hash"}, {"bytes", 0}}).find("'bytes'"), std::string::npos);
  EXPECT_NE(error_of(json{{"kind", "post_serde"}, {"repeat", 100001}}).find("'repeat'"), std::string::npos);
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
