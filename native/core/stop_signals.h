#pragma once
// How a long-running engine (a server, the load generator) learns it should stop:
// SIGINT, SIGTERM and SIGHUP call one async-signal-safe handler (it sets a flag or
// writes an eventfd; the engine's loop notices and ends cleanly, writing its
// document), and SIGPIPE is ignored so a peer that closes mid-write is an EPIPE
// from send(), not a dead engine.

namespace tailscope {

using StopHandler = void (*)(int signal_number);

// Installs `handler` for SIGINT, SIGTERM and SIGHUP (no SA_RESTART: a blocking
// call returns EINTR so the loop can look at the flag) and ignores SIGPIPE.
void install_stop_handler(StopHandler handler);

}  // namespace tailscope
