#include "svc/stores/reconnect_backoff.h"

#include <algorithm>

namespace tailscope::svc::stores {
namespace {

static_assert(ReconnectBackoff::kFirstNs % 1'000'000 == 0 && ReconnectBackoff::kMaxNs % 1'000'000 == 0,
              "policy() writes whole milliseconds");

// 100'000'000 -> "100 ms", 1'000'000'000 -> "1 s".
std::string duration_text(int64_t ns) {
  if (ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + " s";
  return std::to_string(ns / 1'000'000) + " ms";
}

}  // namespace

void ReconnectBackoff::failed(int64_t now_ns, std::string why) {
  last_failure_ = std::move(why);
  next_ns_ = now_ns + delay_ns_;
  delay_ns_ = std::min(2 * delay_ns_, kMaxNs);
}

void ReconnectBackoff::connected() {
  next_ns_ = 0;
  delay_ns_ = kFirstNs;
}

std::string ReconnectBackoff::backing_off() const {
  return store_ + " reconnect backing off after a failed connect (" + last_failure_ + ")";
}

std::string ReconnectBackoff::policy() {
  return "reconnect after a failed connect backs off " + duration_text(kFirstNs) + " doubling to " +
         duration_text(kMaxNs);
}

}  // namespace tailscope::svc::stores
