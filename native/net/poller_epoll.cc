// The epoll backend of net/poller.h.
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <string>
#include <system_error>
#include <vector>

#include "net/poller.h"

namespace tailscope::net {
namespace {

[[noreturn]] void fail(const char* call, int fd) {
  throw std::system_error(errno, std::generic_category(), std::string(call) + " (fd " + std::to_string(fd) + ")");
}

uint32_t to_epoll(uint32_t interest) {
  uint32_t e = 0;
  if (interest & kExclusive) {
    // EPOLLEXCLUSIVE takes only EPOLLIN/EPOLLOUT (EINVAL with EPOLLRDHUP).
    return EPOLLEXCLUSIVE | ((interest & kReadable) ? EPOLLIN : 0u) | ((interest & kWritable) ? EPOLLOUT : 0u);
  }
  // EPOLLRDHUP only while reading: it is level-triggered, so a half-closed
  // peer whose output is still blocked would otherwise wake the loop forever.
  if (interest & kReadable) e |= EPOLLIN | EPOLLRDHUP;
  if (interest & kWritable) e |= EPOLLOUT;
  return e;
}

uint32_t from_epoll(uint32_t events) {
  uint32_t r = 0;
  if (events & (EPOLLIN | EPOLLRDHUP)) r |= kReadable;
  if (events & EPOLLOUT) r |= kWritable;
  if (events & (EPOLLERR | EPOLLHUP)) r |= kHangup;
  return r;
}

class EpollPoller final : public Poller {
 public:
  EpollPoller() : epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)) {
    if (epoll_fd_ < 0) fail("epoll_create1", -1);
  }
  ~EpollPoller() override { ::close(epoll_fd_); }

  void add(int fd, uint64_t token, uint32_t interest) override { control(EPOLL_CTL_ADD, fd, token, interest); }
  void modify(int fd, uint64_t token, uint32_t interest) override { control(EPOLL_CTL_MOD, fd, token, interest); }
  void remove(int fd) override {
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr) != 0) fail("epoll_ctl DEL", fd);
  }

  size_t wait(std::span<ReadyEvent> out, int64_t timeout_ns) override {
    if (events_.size() < out.size()) events_.resize(out.size());
    const int max = static_cast<int>(out.size());
    int n;
    if (timeout_ns < 0) {
      n = ::epoll_wait(epoll_fd_, events_.data(), max, -1);
    } else {
      // Nanosecond timeouts: the load generator sleeps until a send is due.
      const timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
      n = ::epoll_pwait2(epoll_fd_, events_.data(), max, &ts, nullptr);
      if (n < 0 && errno == ENOSYS) {  // kernel before 5.11: millisecond timeouts, rounded up
        n = ::epoll_wait(epoll_fd_, events_.data(), max, static_cast<int>((timeout_ns + 999'999) / 1'000'000));
      }
    }
    if (n <= 0) return 0;  // timeout or EINTR
    for (int i = 0; i < n; ++i)
      out[static_cast<size_t>(i)] = {events_[static_cast<size_t>(i)].data.u64,
                                     from_epoll(events_[static_cast<size_t>(i)].events)};
    return static_cast<size_t>(n);
  }

 private:
  void control(int op, int fd, uint64_t token, uint32_t interest) {
    epoll_event ev{};
    ev.events = to_epoll(interest);
    ev.data.u64 = token;
    if (::epoll_ctl(epoll_fd_, op, fd, &ev) != 0) fail(op == EPOLL_CTL_ADD ? "epoll_ctl ADD" : "epoll_ctl MOD", fd);
  }

  int epoll_fd_;
  std::vector<epoll_event> events_;
};

}  // namespace

std::unique_ptr<Poller> make_epoll_poller() { return std::make_unique<EpollPoller>(); }

}  // namespace tailscope::net
