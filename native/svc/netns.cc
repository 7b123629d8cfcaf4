#include "svc/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace tailscope::svc {

int open_netns(const std::string& host, const std::string& netns) {
  const std::string path = "/run/netns/" + netns;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::invalid_argument("deployment host '" + host + "': network namespace " + path + ": " +
                                std::strerror(errno) + " (make the lab hosts first: tailscope hosts up)");
  return fd;
}

int in_netns(int ns_fd, const std::string& name, const std::function<int()>& fn) {
  if (ns_fd < 0) return fn();
  const int home = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) throw std::runtime_error(std::string("/proc/self/ns/net: ") + std::strerror(errno));
  if (::setns(ns_fd, CLONE_NEWNET) != 0) {
    const int err = errno;
    ::close(home);
    throw std::runtime_error("entering network namespace '" + name + "': " + std::strerror(err) +
                             (err == EPERM ? " (lab hosts need root)" : ""));
  }
  struct Back {
    int fd;
    ~Back() {
      if (::setns(fd, CLONE_NEWNET) != 0) std::abort();  // never go on in the wrong namespace
      ::close(fd);
    }
  } back{home};
  return fn();
}

bool enter_netns(int ns_fd) { return ns_fd < 0 || ::setns(ns_fd, CLONE_NEWNET) == 0; }

}  // namespace tailscope::svc
