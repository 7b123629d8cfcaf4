// The real-work stage of a topology: `work: {kind: json|sha256|deflate,
// bytes: N, repeat: K}`. Unlike `cpu:` (a busy loop that only burns cycles),
// it runs real library code over an N-byte buffer — a JSON parse and
// re-serialisation (nlohmann), a SHA-256 digest (OpenSSL libcrypto) or a
// deflate compression (zlib) — K times, so the thread-count study sees real
// instruction mixes and cache traffic: a working set of N bytes per thread,
// which more threads on the same cores evict from each other's caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tailscope::svc {

struct WorkSpec {
  enum class Kind { kJson, kSha256, kDeflate };
  Kind kind = Kind::kJson;
  size_t bytes = 4096;  // size of the input buffer (the JSON document's text for json)
  int repeat = 1;       // how many times the operation runs per request
};

inline constexpr size_t kMaxWorkBytes = 16u << 20;
inline constexpr int kMaxWorkRepeat = 100000;

// Parses {kind, bytes, repeat}; throws std::invalid_argument naming `where`
// and what is wrong (unknown kind or key, bytes outside 1 … 16 MiB, repeat
// outside 1 … 100000).
WorkSpec parse_work_spec(const nlohmann::json& j, const std::string& where);
nlohmann::json to_json(const WorkSpec& spec);
const char* work_kind_name(WorkSpec::Kind kind);

// The deterministic input of a spec: a JSON array of small records, `bytes`
// long (text compresses and parses like a real request body). Built once per
// thread and size, so a request pays for the work, not for making its input.
const std::string& work_input(size_t bytes);

// One run of the operation on `input`; returns its output: json — the
// document re-serialised; sha256 — the 32-byte digest; deflate — the zlib
// stream (level 6). Throws std::runtime_error if the library fails.
std::string work_once(WorkSpec::Kind kind, std::string_view input);

// The stage itself: work_once on work_input(spec.bytes), spec.repeat times.
// Returns the CRC-32 of the last output: the caller keeps it (so the work
// cannot be optimised away) and a test can check it.
uint32_t run_work(const WorkSpec& spec);

}  // namespace tailscope::svc
