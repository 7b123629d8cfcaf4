#include "net/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace tailscope::net {

std::string_view to_string(PollMechanism m) { return m == PollMechanism::kEpoll ? "epoll" : "poll"; }

std::unique_ptr<Poller> make_poller(PollMechanism m) {
  return m == PollMechanism::kEpoll ? make_epoll_poller() : make_poll_poller();
}

EventLoop::EventLoop(PollMechanism mechanism)
    : poller_(make_poller(mechanism)), wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  poller_->add(wake_fd_, kWakeToken, kReadable);
}

EventLoop::~EventLoop() { ::close(wake_fd_); }

std::span<const ReadyEvent> EventLoop::wait(int64_t timeout_ns) {
  size_t n = poller_->wait(events_, timeout_ns);
  for (size_t i = 0; i < n;) {
    if (events_[i].token != kWakeToken) {
      ++i;
      continue;
    }
    uint64_t count;
    [[maybe_unused]] ssize_t r = ::read(wake_fd_, &count, sizeof count);
    events_[i] = events_[--n];
  }
  return {events_.data(), n};
}

void EventLoop::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t w = ::write(wake_fd_, &one, sizeof one);
}

}  // namespace tailscope::net
