#include "svc/work_stage.h"

#include <openssl/evp.h>
#include <zlib.h>

#include <map>
#include <stdexcept>

namespace tailscope::svc {

namespace {

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

}  // namespace

const char* work_kind_name(WorkSpec::Kind kind) {
  switch (kind) {
    case WorkSpec::Kind::kJson:
      return "json";
    case WorkSpec::Kind::kSha256:
      return "sha256";
    case WorkSpec::Kind::kDeflate:
      return "deflate";
  }
  return "json";
}

WorkSpec parse_work_spec(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) bad(where, "a work stage is an object {kind, bytes, repeat}");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "kind" && it.key() != "bytes" && it.key() != "repeat") bad(where, "unknown key '" + it.key() + "'");
  WorkSpec s;
  if (!j.contains("kind") || !j["kind"].is_string()) bad(where, "needs 'kind': json, sha256 or deflate");
  const std::string kind = j["kind"];
  if (kind == "json")
    s.kind = WorkSpec::Kind::kJson;
  else if (kind == "sha256")
    s.kind = WorkSpec::Kind::kSha256;
  else if (kind == "deflate")
    s.kind = WorkSpec::Kind::kDeflate;
  else
    bad(where, "kind must be json, sha256 or deflate (got '" + kind + "')");
  if (j.contains("bytes")) {
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
  return s;
}

nlohmann::json to_json(const WorkSpec& spec) {
  return {{"kind", work_kind_name(spec.kind)}, {"bytes", spec.bytes}, {"repeat", spec.repeat}};
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

std::string work_once(WorkSpec::Kind kind, std::string_view input) {
  switch (kind) {
    case WorkSpec::Kind::kJson: {
      // Parse into a DOM and serialise it again: what a service does to
      // transform a message (allocation, branching on text, number formatting).
      auto doc = nlohmann::json::parse(input, nullptr, false);
      if (doc.is_discarded()) throw std::runtime_error("work json: the input is not JSON (bytes too small?)");
      return doc.dump();
    }
    case WorkSpec::Kind::kSha256: {
      unsigned char digest[EVP_MAX_MD_SIZE];
      unsigned int len = 0;
      if (EVP_Digest(input.data(), input.size(), digest, &len, EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("work sha256: EVP_Digest failed");
      return std::string(reinterpret_cast<const char*>(digest), len);
    }
    case WorkSpec::Kind::kDeflate: {
      uLongf len = compressBound(static_cast<uLong>(input.size()));
      std::string out(len, '\0');
      if (compress2(reinterpret_cast<Bytef*>(out.data()), &len, reinterpret_cast<const Bytef*>(input.data()),
                    static_cast<uLong>(input.size()), 6) != Z_OK)
        throw std::runtime_error("work deflate: compress2 failed");
      out.resize(len);
      return out;
    }
  }
  return {};
}

uint32_t run_work(const WorkSpec& spec) {
  const std::string& input = work_input(spec.bytes);
  std::string out;
  for (int i = 0; i < spec.repeat; ++i) out = work_once(spec.kind, input);
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(out.size())));
}

}  // namespace tailscope::svc
