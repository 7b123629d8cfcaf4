// The poll() backend of net/poller.h: the interest set is a pollfd array
// handed to the kernel whole on every wait (the cost the echo study's `poll`
// model measures against `epoll`).
#include <poll.h>

#include <cerrno>
#include <ctime>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "net/poller.h"

namespace tailscope::net {
namespace {

[[noreturn]] void fail(const char* what, int fd, int err) {
  throw std::system_error(err, std::generic_category(), std::string(what) + " (fd " + std::to_string(fd) + ")");
}

short to_poll(uint32_t interest) {
  // POLLRDHUP only while reading, as EPOLLRDHUP in the epoll backend.
  return static_cast<short>(((interest & kReadable) ? POLLIN | POLLRDHUP : 0) | ((interest & kWritable) ? POLLOUT : 0));
}

uint32_t from_poll(short revents) {
  uint32_t r = 0;
  if (revents & (POLLIN | POLLRDHUP)) r |= kReadable;
  if (revents & POLLOUT) r |= kWritable;
  if (revents & (POLLERR | POLLHUP | POLLNVAL)) r |= kHangup;
  return r;
}

class PollPoller final : public Poller {
 public:
  void add(int fd, uint64_t token, uint32_t interest) override {
    if (slot_of_.count(fd)) fail("poll add: already registered", fd, EEXIST);
    slot_of_[fd] = pollfds_.size();
    pollfds_.push_back({fd, to_poll(interest), 0});
    tokens_.push_back(token);
  }
  void modify(int fd, uint64_t token, uint32_t interest) override {
    auto it = slot_of_.find(fd);
    if (it == slot_of_.end()) fail("poll modify: not registered", fd, ENOENT);
    pollfds_[it->second].events = to_poll(interest);
    tokens_[it->second] = token;
  }
  void remove(int fd) override {
    auto it = slot_of_.find(fd);
    if (it == slot_of_.end()) fail("poll remove: not registered", fd, ENOENT);
    // Swap-remove keeps the array dense.
    const size_t slot = it->second, last = pollfds_.size() - 1;
    slot_of_.erase(it);
    if (slot != last) {
      pollfds_[slot] = pollfds_[last];
      tokens_[slot] = tokens_[last];
      slot_of_[pollfds_[slot].fd] = slot;
    }
    pollfds_.pop_back();
    tokens_.pop_back();
  }

  size_t wait(std::span<ReadyEvent> out, int64_t timeout_ns) override {
    int n;
    if (timeout_ns < 0) {
      n = ::poll(pollfds_.data(), pollfds_.size(), -1);
    } else {
      const timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
      n = ::ppoll(pollfds_.data(), pollfds_.size(), &ts, nullptr);
    }
    if (n <= 0) return 0;  // timeout or EINTR
    // Report at most out.size(), starting where the last wait stopped, so a
    // descriptor early in the array cannot starve the ones behind it.
    size_t filled = 0;
    const size_t count = pollfds_.size();
    for (size_t k = 0; k < count && filled < out.size(); ++k) {
      const size_t i = (next_ + k) % count;
      if (pollfds_[i].revents == 0) continue;
      out[filled++] = {tokens_[i], from_poll(pollfds_[i].revents)};
    }
    next_ = count ? (next_ + 1) % count : 0;
    return filled;
  }

 private:
  std::vector<pollfd> pollfds_;
  std::vector<uint64_t> tokens_;  // tokens_[i] belongs to pollfds_[i]
  std::unordered_map<int, size_t> slot_of_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<Poller> make_poll_poller() { return std::make_unique<PollPoller>(); }

}  // namespace tailscope::net
