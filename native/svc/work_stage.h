// The real-work stage of a topology: `work: {kind, bytes: N, repeat: K,
// simulated_cpu: DIST}`. Unlike `cpu:` (a busy loop that only burns cycles),
// it runs real code, K times per request, so a service has the instruction mix
// and cache traffic of real request handling:
//
// - generic kinds over an N-byte buffer: a JSON parse and re-serialisation
//   (nlohmann), a SHA-256 digest (OpenSSL libcrypto) or a deflate compression
//   (zlib) — a working set of N bytes per thread, which more threads on the
//   same cores evict from each other's caches (the threads study);
// - the work DeathStarBench's social-network services do (issue 27): `text`
//   (text-service's regular-expression scan for @mentions and URLs over an
//   N-byte post), `url_hash` (url-shorten's short code of an N-byte URL),
//   `unique_id` (unique-id's id from time, a counter and the machine) and
//   `post_serde` (a post record with an N-byte text serialised to JSON and
//   deserialised back, as post-storage and compose-post move a post).
//
// `simulated_cpu` keeps the busy loop the stage replaces: `tailscope-svc --work
// simulated` burns a draw from it instead of doing the work, so one topology
// file runs both ways and the CPU per call of each is compared in one run
// (docs/microservices.md says why it is a switch and not a second file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "svc/distribution.h"

namespace tailscope::svc {

struct WorkSpec {
  enum class Kind { kJson, kSha256, kDeflate, kText, kUrlHash, kUniqueId, kPostSerde };
  Kind kind = Kind::kJson;
  size_t bytes = 4096;  // size of the input (the JSON text; the post's text for text/post_serde; the URL)
  int repeat = 1;       // how many times the operation runs per request
  // The busy loop this stage stands for (`--work simulated` runs it); none: the stage only has real work.
  std::optional<LatencyDistribution> simulated_cpu;
};

inline constexpr size_t kMaxWorkBytes = 16u << 20;
inline constexpr int kMaxWorkRepeat = 100000;

// Parses {kind, bytes, repeat, simulated_cpu}; throws std::invalid_argument
// naming `where` and the field that is wrong (unknown kind or key, bytes
// outside 1 … 16 MiB, repeat outside 1 … 100000, `bytes` given to unique_id,
// which has no input, a bad simulated_cpu distribution).
WorkSpec parse_work_spec(const nlohmann::json& j, const std::string& where);
nlohmann::json to_json(const WorkSpec& spec);
const char* work_kind_name(WorkSpec::Kind kind);

// The deterministic input of the generic kinds: a JSON array of small
// records, `bytes` long (text compresses and parses like a real request
// body). Built once per thread and size, so a request pays for the work, not
// for making its input.
const std::string& work_input(size_t bytes);
// The input of `kind` at `bytes` (work_input, post_text, url_text, the
// serialised post, or "" for unique_id), built once per thread, kind and size.
const std::string& work_input_for(WorkSpec::Kind kind, size_t bytes);

// A post text of exactly `bytes` bytes like DeathStarBench's compose-post load
// script sends: words with @mentions and http(s) URLs among them (every 8th
// token a mention unless it is a URL, every 12th a URL). Deterministic.
std::string post_text(size_t bytes);
// A URL of exactly `bytes` bytes: "https://www.example.com/" and a path (cut
// to `bytes` when shorter).
std::string url_text(size_t bytes);

// text-service's scan: the @mentions and URLs of `text`, in order, found by
// DeathStarBench's own patterns (@[a-zA-Z0-9_-]+ and
// (http://|https://)[a-zA-Z0-9_!~*'().&=+$%-]+) with std::regex, the
// library DeathStarBench's TextHandler uses (so its cost is theirs).
struct TextEntities {
  std::vector<std::string> mentions;
  std::vector<std::string> urls;
};
TextEntities scan_text(std::string_view text);

// url-shorten's short URL: "http://short-url/" and 10 base-62 digits
// (0-9, A-Z, a-z) of the first 8 bytes of the URL's SHA-256, read big-endian,
// modulo 62^10. Deterministic, so a URL keeps its code.
std::string short_url(std::string_view url);

// unique-id's 64-bit id: bit 63 zero (a positive int64, as DeathStarBench
// masks it), 41 bits of milliseconds since 2018-01-01 UTC (DeathStarBench's
// custom epoch), 10 bits of machine id, 12 bits of counter.
struct UniqueIdParts {
  int64_t ms_since_epoch = 0;  // 0 … 2^41 − 1
  uint32_t machine_id = 0;     // 0 … 1023
  uint32_t counter = 0;        // 0 … 4095
};
inline constexpr int64_t kUniqueIdEpochMs = 1514764800000;  // 2018-01-01T00:00:00Z
uint64_t pack_unique_id(const UniqueIdParts& parts);        // fields wrap to their widths
UniqueIdParts unpack_unique_id(uint64_t id);
// An id for now on this machine (the host name's hash) with the process's
// next counter value.
uint64_t next_unique_id();

// The post record DeathStarBench's services pass along (social-network's
// Post struct): ids, creator, text, its mentions, media and URLs.
struct PostRecord {
  struct User {
    int64_t user_id = 0;
    std::string username;
    bool operator==(const User&) const = default;
  };
  struct Media {
    int64_t media_id = 0;
    std::string media_type;
    bool operator==(const Media&) const = default;
  };
  struct Url {
    std::string shortened_url, expanded_url;
    bool operator==(const Url&) const = default;
  };
  int64_t post_id = 0;
  User creator;
  int64_t req_id = 0;
  std::string text;
  std::vector<User> user_mentions;
  std::vector<Media> media;
  std::vector<Url> urls;
  int64_t timestamp_ms = 0;
  std::string post_type;
  bool operator==(const PostRecord&) const = default;
};
// The deterministic post whose text is post_text(text_bytes), with the
// mentions and URLs that text holds.
PostRecord post_record(size_t text_bytes);
std::string serialise_post(const PostRecord& post);
// Throws std::runtime_error naming the field when `text` is not a post.
PostRecord deserialise_post(std::string_view text);

// One run of the operation on `input` (work_input_for's); returns its output:
// json — the document re-serialised; sha256 — the 32-byte digest; deflate —
// the zlib stream (level 6); text — the mentions and URLs found, each on its
// line; url_hash — short_url(input); unique_id — the id's 16 hex digits (made,
// as DeathStarBench does, by formatting the parts and parsing the text back);
// post_serde — the post deserialised from `input` and serialised again.
// Throws std::runtime_error if the library fails or the input is not a post.
std::string work_once(WorkSpec::Kind kind, std::string_view input);

// The stage itself: work_once on work_input_for(spec.kind, spec.bytes),
// spec.repeat times. Returns the CRC-32 of the last output: the caller keeps
// it (so the work cannot be optimised away) and a test can check it.
uint32_t run_work(const WorkSpec& spec);

}  // namespace tailscope::svc
