#include "svc/link_delay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <stdexcept>

#include "net/allow_list.h"

namespace tailscope::svc {
namespace {

int64_t parse_us(std::string_view text, std::string_view what, std::string_view name) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw std::invalid_argument(std::string(what) + ": " + std::string(name) + " '" + std::string(text) +
                                "' is not an integer number of microseconds");
  return v;
}

}  // namespace

int64_t LinkDelay::sample_ns(std::mt19937_64& rng) const {
  if (jitter_ns <= 0) return delay_ns;
  return delay_ns + std::uniform_int_distribution<int64_t>(0, jitter_ns)(rng);
}

std::string canonical_address(std::string_view address) {
  const std::string text(address == "localhost" ? std::string_view("127.0.0.1") : address);
  char out[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return inet_ntop(AF_INET, &v4, out, sizeof out);
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_V4MAPPED(&v6)) return inet_ntop(AF_INET, &v6.s6_addr[12], out, sizeof out);
    return inet_ntop(AF_INET6, &v6, out, sizeof out);
  }
  return {};
}

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  char out[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) return inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, out, sizeof out);
  if (ss.ss_family == AF_INET6) {
    const auto* a = &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr;
    return canonical_address(inet_ntop(AF_INET6, a, out, sizeof out));
  }
  return {};
}

void LinkDelayTable::add(std::string_view address, int64_t delay_us, int64_t jitter_us, std::string_view what) {
  const std::string where = std::string(what) + " '" + std::string(address) + "'";
  net::check_allowed_target(address, std::string(what) + " address");
  if (delay_us < 0 || delay_us > kMaxLinkDelayUs)
    throw std::invalid_argument(where + ": delay " + std::to_string(delay_us) + " µs is outside 0 … " +
                                std::to_string(kMaxLinkDelayUs));
  if (jitter_us < 0 || jitter_us > delay_us)
    throw std::invalid_argument(where + ": jitter " + std::to_string(jitter_us) + " µs is outside 0 … the delay (" +
                                std::to_string(delay_us) + ")");
  const std::string key = canonical_address(address);
  if (by_address_.count(key)) throw std::invalid_argument(where + ": this address is given twice");
  by_address_[key] = LinkDelay{delay_us * 1000, jitter_us * 1000};
}

LinkDelayTable LinkDelayTable::parse(std::string_view text, std::string_view flag) {
  LinkDelayTable table;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const std::string what = std::string(flag) + " '" + std::string(item) + "'";
    const size_t eq = item.rfind('=');
    if (eq == std::string_view::npos) throw std::invalid_argument(what + ": expected ADDR=DELAY_US[:JITTER_US]");
    std::string_view address = item.substr(0, eq);
    if (address.size() >= 2 && address.front() == '[' && address.back() == ']')
      address = address.substr(1, address.size() - 2);
    const std::string_view value = item.substr(eq + 1);
    const size_t colon = value.find(':');
    const int64_t delay_us = parse_us(value.substr(0, colon), what, "delay");
    const int64_t jitter_us = colon == std::string_view::npos ? 0 : parse_us(value.substr(colon + 1), what, "jitter");
    if (canonical_address(address).empty())
      throw std::invalid_argument(what + ": '" + std::string(address) + "' is not a numeric IPv4/IPv6 address");
    table.add(address, delay_us, jitter_us, flag);
  }
  return table;
}

LinkDelay LinkDelayTable::for_address(std::string_view address) const {
  if (by_address_.empty()) return {};
  const auto it = by_address_.find(canonical_address(address));
  return it == by_address_.end() ? LinkDelay{} : it->second;
}

std::string LinkDelayTable::to_flag() const {
  std::string out;
  for (const auto& [address, d] : by_address_) {
    if (!out.empty()) out += ',';
    // Appended piece by piece: gcc 12 warns (-Wrestrict, a false positive) on "[" + address + "]".
    const bool v6 = address.find(':') != std::string::npos;
    if (v6) out += '[';
    out += address;
    if (v6) out += ']';
    out += '=';
    out += std::to_string(d.delay_ns / 1000);
    out += ':';
    out += std::to_string(d.jitter_ns / 1000);
  }
  return out;
}

nlohmann::json LinkDelayTable::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [address, d] : by_address_)
    out.push_back({{"address", address}, {"delay_us", d.delay_ns / 1000}, {"jitter_us", d.jitter_ns / 1000}});
  return out;
}

DelayedFrames::DelayedFrames(LinkDelay delay, uint64_t seed) : delay_(delay), rng_(seed) {}

int64_t DelayedFrames::hold(std::string_view bytes, int64_t now_ns) {
  // Never earlier than the frame before it: TCP order holds.
  const int64_t deadline = std::max(last_deadline_ns_, now_ns + delay_.sample_ns(rng_));
  last_deadline_ns_ = deadline;
  if (!held_.empty() && held_.back().deadline_ns == deadline)
    held_.back().bytes.append(bytes);  // same instant: one send
  else
    held_.push_back(Held{deadline, std::string(bytes)});
  return deadline;
}

size_t DelayedFrames::release_due(int64_t now_ns, std::string& out) {
  size_t moved = 0;
  while (!held_.empty() && held_.front().deadline_ns <= now_ns) {
    out += held_.front().bytes;
    held_.pop_front();
    ++moved;
  }
  return moved;
}

int64_t DelayedFrames::next_deadline_ns() const {
  return held_.empty() ? std::numeric_limits<int64_t>::max() : held_.front().deadline_ns;
}

}  // namespace tailscope::svc
