#include "svc/work_stage.h"

#include <openssl/evp.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>
#include <utility>

// GCC 12's libstdc++ <regex> trips -Wmaybe-uninitialized inside its own NFA
// code under the sanitizer build's -O1 (GCC bug 105562, a false positive in
// the library, not in this file): silenced for that header alone.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <regex>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "core/clock.h"

namespace tailscope::svc {

namespace {

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

struct KindName {
  WorkSpec::Kind kind;
  const char* name;
};
constexpr KindName kKinds[] = {
    {WorkSpec::Kind::kJson, "json"},
    {WorkSpec::Kind::kSha256, "sha256"},
    {WorkSpec::Kind::kDeflate, "deflate"},
    {WorkSpec::Kind::kText, "text"},
    {WorkSpec::Kind::kUrlHash, "url_hash"},
    {WorkSpec::Kind::kUniqueId, "unique_id"},
    {WorkSpec::Kind::kPostSerde, "post_serde"},
};
constexpr const char* kKindList = "json, sha256, deflate, text, url_hash, unique_id or post_serde";

// A small deterministic generator for the generated texts (the same text on
// every thread and run: a test can count what is in it).
struct TextRng {
  uint64_t state = 0x9E3779B97F4A7C15ULL;
  uint32_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(state >> 33);
  }
  char alnum() {
    static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    return kChars[next() % 62];
  }
};

std::string sha256_of(std::string_view input) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(input.data(), input.size(), digest, &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("work sha256: EVP_Digest failed");
  return std::string(reinterpret_cast<const char*>(digest), len);
}

uint32_t machine_id() {
  // DeathStarBench hashes the host's MAC address; the host name identifies a
  // machine as well and needs no interface lookup.
  static const uint32_t id = [] {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return static_cast<uint32_t>(std::hash<std::string>{}(host)&0x3FF);
  }();
  return id;
}

nlohmann::json user_json(const PostRecord::User& u) { return {{"user_id", u.user_id}, {"username", u.username}}; }

}  // namespace

const char* work_kind_name(WorkSpec::Kind kind) {
  for (const KindName& k : kKinds)
    if (k.kind == kind) return k.name;
  return "json";
}

WorkSpec parse_work_spec(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) bad(where, "a work stage is an object {kind, bytes, repeat, simulated_cpu}");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "kind" && it.key() != "bytes" && it.key() != "repeat" && it.key() != "simulated_cpu")
      bad(where, "unknown key '" + it.key() + "'");
  WorkSpec s;
  if (!j.contains("kind") || !j["kind"].is_string()) bad(where, std::string("needs 'kind': ") + kKindList);
  const std::string kind = j["kind"];
  bool known = false;
  for (const KindName& k : kKinds) {
    if (kind != k.name) continue;
    s.kind = k.kind;
    known = true;
  }
  if (!known) bad(where, std::string("kind must be ") + kKindList + " (got '" + kind + "')");
  if (j.contains("bytes")) {
    if (s.kind == WorkSpec::Kind::kUniqueId)
      bad(where, "'bytes': unique_id builds its id from the clock and a counter and reads no input; drop 'bytes'");
    if (!j["bytes"].is_number_integer() || j["bytes"].get<int64_t>() < 1 ||
        j["bytes"].get<int64_t>() > static_cast<int64_t>(kMaxWorkBytes))
      bad(where, "'bytes' must be an integer in 1 … 16 MiB");
    s.bytes = j["bytes"].get<size_t>();
  }
  if (s.kind == WorkSpec::Kind::kJson && s.bytes < 2) bad(where, "json work needs 'bytes' ≥ 2 (the text \"[]\")");
  if (j.contains("repeat")) {
    if (!j["repeat"].is_number_integer() || j["repeat"].get<int64_t>() < 1 ||
        j["repeat"].get<int64_t>() > kMaxWorkRepeat)
      bad(where, "'repeat' must be an integer in 1 … 100000");
    s.repeat = j["repeat"].get<int>();
  }
  if (j.contains("simulated_cpu")) {
    // Any cpu: distribution (a number is constant µs); errors name the field.
    s.simulated_cpu = parse_distribution(j["simulated_cpu"], where + ".simulated_cpu");
  }
  return s;
}

nlohmann::json to_json(const WorkSpec& spec) {
  nlohmann::json j = {{"kind", work_kind_name(spec.kind)}, {"repeat", spec.repeat}};
  if (spec.kind != WorkSpec::Kind::kUniqueId) j["bytes"] = spec.bytes;
  if (spec.simulated_cpu) j["simulated_cpu"] = spec.simulated_cpu->to_json();
  return j;
}

const std::string& work_input(size_t bytes) {
  // Per thread: a shared cache would need a lock on the request path, and a
  // per-thread copy is what a real handler's request body is anyway.
  thread_local std::map<size_t, std::string> inputs;
  auto [it, fresh] = inputs.try_emplace(bytes);
  if (!fresh) return it->second;
  std::string& text = it->second;
  text = "[";
  for (int i = 0;; ++i) {
    std::string record = std::string(i ? "," : "") + R"({"id":)" + std::to_string(i) + R"(,"user":"user-)" +
                         std::to_string(i * 7919 % 10007) + R"(","score":)" + std::to_string(i * 7 % 1000) + "." +
                         std::to_string(i % 10) + R"(,"tags":["a","b"],"ok":true})";
    if (text.size() + record.size() + 1 > bytes) break;
    text += record;
  }
  text += ']';
  // Exactly `bytes` long: whitespace before the closing bracket keeps it JSON.
  if (text.size() < bytes) text.insert(text.size() - 1, bytes - text.size(), ' ');
  if (text.size() > bytes) text.resize(bytes);  // bytes < 2: only sha256/deflate accept that
  return text;
}

std::string post_text(size_t bytes) {
  TextRng rng;
  std::string text;
  for (int word = 1;; ++word) {
    std::string token;
    if (word % 12 == 0) {
      // DeathStarBench's load script: "http://" and 64 random alphanumerics (no '/': its URL pattern
      // stops there); 12 … 31 of them keep the URLs' share of a few-hundred-byte post like theirs.
      token = word % 24 == 0 ? "https://" : "http://";
      for (int i = 0, n = 12 + static_cast<int>(rng.next() % 20); i < n; ++i) token += rng.alnum();
    } else if (word % 8 == 0) {
      token = "@username_" + std::to_string(rng.next() % 962);  // socfb-Reed98's 962 users
    } else {
      for (int i = 0, n = 2 + static_cast<int>(rng.next() % 8); i < n; ++i)
        token += static_cast<char>('a' + rng.next() % 26);
    }
    if (text.size() + token.size() + 1 > bytes) break;
    if (!text.empty()) text += ' ';
    text += token;
  }
  text.resize(bytes, ' ');  // exactly `bytes`; a space matches neither pattern
  return text;
}

std::string url_text(size_t bytes) {
  TextRng rng;
  std::string url = "https://www.example.com/";
  while (url.size() < bytes) url += (url.size() % 9 == 0) ? '/' : rng.alnum();
  url.resize(bytes);
  return url;
}

TextEntities scan_text(std::string_view text) {
  // Compiled once per thread (DeathStarBench compiles them per request; the
  // scan is the work a request pays for, a compile is not what is compared).
  thread_local const std::regex mention_re("@[a-zA-Z0-9_-]+");
  thread_local const std::regex url_re("(http://|https://)([a-zA-Z0-9_!~*'().&=+$%-]+)");
  TextEntities found;
  using It = std::regex_iterator<std::string_view::const_iterator>;
  for (It it(text.begin(), text.end(), mention_re), end; it != end; ++it) found.mentions.push_back(it->str());
  for (It it(text.begin(), text.end(), url_re), end; it != end; ++it) found.urls.push_back(it->str());
  return found;
}

std::string short_url(std::string_view url) {
  const std::string digest = sha256_of(url);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(digest[static_cast<size_t>(i)]);
  static constexpr char kDigits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  char code[10];
  for (int i = 9; i >= 0; --i) {  // v mod 62^10, most significant digit first
    code[i] = kDigits[v % 62];
    v /= 62;
  }
  return "http://short-url/" + std::string(code, sizeof code);
}

uint64_t pack_unique_id(const UniqueIdParts& p) {
  return ((static_cast<uint64_t>(p.ms_since_epoch) & ((uint64_t{1} << 41) - 1)) << 22) |
         ((static_cast<uint64_t>(p.machine_id) & 0x3FF) << 12) | (p.counter & 0xFFF);
}

UniqueIdParts unpack_unique_id(uint64_t id) {
  return {static_cast<int64_t>((id >> 22) & ((uint64_t{1} << 41) - 1)), static_cast<uint32_t>((id >> 12) & 0x3FF),
          static_cast<uint32_t>(id & 0xFFF)};
}

uint64_t next_unique_id() {
  // One counter per process, as DeathStarBench's (theirs behind a mutex).
  static std::atomic<uint32_t> counter{0};
  return pack_unique_id(
      {realtime_ns() / 1'000'000 - kUniqueIdEpochMs, machine_id(), counter.fetch_add(1, std::memory_order_relaxed)});
}

PostRecord post_record(size_t text_bytes) {
  PostRecord p;
  p.post_id = static_cast<int64_t>(pack_unique_id({300'000'000'000, 17, 42}));
  p.creator = {123, "username_123"};
  p.req_id = 0x5EED5EED5EEDLL;
  p.text = post_text(text_bytes);
  const TextEntities found = scan_text(p.text);
  for (const std::string& m : found.mentions) {
    const std::string name = m.substr(1);
    const auto digits = name.find_first_of("0123456789");
    p.user_mentions.push_back({digits == std::string::npos ? 0 : std::atoll(name.c_str() + digits), name});
  }
  for (const std::string& u : found.urls) p.urls.push_back({short_url(u), u});
  p.media = {{7001, "png"}, {7002, "jpg"}};
  p.timestamp_ms = kUniqueIdEpochMs + 300'000'000'000;
  p.post_type = "POST";
  return p;
}

std::string serialise_post(const PostRecord& p) {
  nlohmann::json mentions = nlohmann::json::array(), media = nlohmann::json::array(), urls = nlohmann::json::array();
  for (const auto& m : p.user_mentions) mentions.push_back(user_json(m));
  for (const auto& m : p.media) media.push_back({{"media_id", m.media_id}, {"media_type", m.media_type}});
  for (const auto& u : p.urls) urls.push_back({{"shortened_url", u.shortened_url}, {"expanded_url", u.expanded_url}});
  return nlohmann::json{{"post_id", p.post_id},    {"creator", user_json(p.creator)},      {"req_id", p.req_id},
                        {"text", p.text},          {"user_mentions", std::move(mentions)}, {"media", std::move(media)},
                        {"urls", std::move(urls)}, {"timestamp", p.timestamp_ms},          {"post_type", p.post_type}}
      .dump();
}

PostRecord deserialise_post(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) throw std::runtime_error("post: not a JSON object");
  std::string field;
  try {
    auto at = [&](const nlohmann::json& o, const char* name) -> const nlohmann::json& {
      field = name;
      return o.at(name);
    };
    auto user = [&](const nlohmann::json& o) {
      return PostRecord::User{at(o, "user_id").get<int64_t>(), at(o, "username").get<std::string>()};
    };
    PostRecord p;
    p.post_id = at(j, "post_id").get<int64_t>();
    p.creator = user(at(j, "creator"));
    p.req_id = at(j, "req_id").get<int64_t>();
    p.text = at(j, "text").get<std::string>();
    for (const auto& m : at(j, "user_mentions")) p.user_mentions.push_back(user(m));
    for (const auto& m : at(j, "media"))
      p.media.push_back({at(m, "media_id").get<int64_t>(), at(m, "media_type").get<std::string>()});
    for (const auto& u : at(j, "urls"))
      p.urls.push_back({at(u, "shortened_url").get<std::string>(), at(u, "expanded_url").get<std::string>()});
    p.timestamp_ms = at(j, "timestamp").get<int64_t>();
    p.post_type = at(j, "post_type").get<std::string>();
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("post: field '" + field + "': " + e.what());
  }
}

const std::string& work_input_for(WorkSpec::Kind kind, size_t bytes) {
  switch (kind) {
    case WorkSpec::Kind::kJson:
    case WorkSpec::Kind::kSha256:
    case WorkSpec::Kind::kDeflate:
      return work_input(bytes);
    default:
      break;
  }
  thread_local std::map<std::pair<WorkSpec::Kind, size_t>, std::string> inputs;
  auto [it, fresh] = inputs.try_emplace({kind, bytes});
  if (!fresh) return it->second;
  if (kind == WorkSpec::Kind::kText) it->second = post_text(bytes);
  if (kind == WorkSpec::Kind::kUrlHash) it->second = url_text(bytes);
  if (kind == WorkSpec::Kind::kPostSerde) it->second = serialise_post(post_record(bytes));
  return it->second;  // unique_id: "" (it reads no input)
}

std::string work_once(WorkSpec::Kind kind, std::string_view input) {
  switch (kind) {
    case WorkSpec::Kind::kJson: {
      // Parse into a DOM and serialise it again: what a service does to
      // transform a message (allocation, branching on text, number formatting).
      auto doc = nlohmann::json::parse(input, nullptr, false);
      if (doc.is_discarded()) throw std::runtime_error("work json: the input is not JSON (bytes too small?)");
      return doc.dump();
    }
    case WorkSpec::Kind::kSha256:
      return sha256_of(input);
    case WorkSpec::Kind::kDeflate: {
      uLongf len = compressBound(static_cast<uLong>(input.size()));
      std::string out(len, '\0');
      if (compress2(reinterpret_cast<Bytef*>(out.data()), &len, reinterpret_cast<const Bytef*>(input.data()),
                    static_cast<uLong>(input.size()), 6) != Z_OK)
        throw std::runtime_error("work deflate: compress2 failed");
      out.resize(len);
      return out;
    }
    case WorkSpec::Kind::kText: {
      const TextEntities found = scan_text(input);
      std::string out;
      for (const auto& m : found.mentions) out += m + '\n';
      for (const auto& u : found.urls) out += u + '\n';
      return out;
    }
    case WorkSpec::Kind::kUrlHash:
      return short_url(input);
    case WorkSpec::Kind::kUniqueId: {
      // DeathStarBench builds the id as hex text and parses it back (stoul);
      // the same round trip, checked.
      const uint64_t id = next_unique_id();
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016" PRIx64, id);
      if (std::strtoull(hex, nullptr, 16) != id) throw std::runtime_error("work unique_id: the id's text differs");
      return std::string(hex, 16);
    }
    case WorkSpec::Kind::kPostSerde:
      // A storage service's round trip: the post as it arrived, deserialised, then serialised to be stored.
      return serialise_post(deserialise_post(input));
  }
  return {};
}

uint32_t run_work(const WorkSpec& spec) {
  const std::string& input = work_input_for(spec.kind, spec.bytes);
  std::string out;
  for (int i = 0; i < spec.repeat; ++i) out = work_once(spec.kind, input);
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(out.size())));
}

}  // namespace tailscope::svc
