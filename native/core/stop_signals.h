#pragma once
// How a long-running engine (a server, the load generator) learns it should stop:
// SIGINT, SIGTERM and SIGHUP call one async-signal-safe handler (it sets a flag or
// writes an eventfd; the engine's loop notices and ends cleanly, writing its
// document), and SIGPIPE is ignored so a peer that closes mid-write is an EPIPE
// from send(), not a dead engine.
//
// An engine whose main thread has nothing else to do (tailscope-svc, the stress
// driver) waits instead: it blocks the stop signals in every thread (the mask is
// inherited, so block them before starting any) and takes them synchronously
// with wait_for_stop, without a handler.

#include <signal.h>

#include <cstdint>
#include <initializer_list>

namespace tailscope {

using StopHandler = void (*)(int signal_number);

// Installs `handler` for SIGINT, SIGTERM and SIGHUP (no SA_RESTART: a blocking
// call returns EINTR so the loop can look at the flag) and ignores SIGPIPE.
void install_stop_handler(StopHandler handler);

// The set of `signals`, for pthread_sigmask and wait_for_stop.
sigset_t signal_set(std::initializer_list<int> signals);

// Waits for one of `signals` (blocked in the calling thread, so it is taken
// here, not delivered) until `deadline_ns` (monotonic_ns(); 0 = no deadline).
// Returns the signal, or 0 at the deadline. With `tick_ns` > 0 it also returns
// 0 after that long without one, so a supervisor can look at its children
// between waits.
int wait_for_stop(const sigset_t& signals, int64_t deadline_ns, int64_t tick_ns = 0);

}  // namespace tailscope
