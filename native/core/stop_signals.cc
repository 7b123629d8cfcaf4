#include "core/stop_signals.h"

#include <csignal>
#include <initializer_list>

namespace tailscope {

void install_stop_handler(StopHandler handler) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace tailscope
