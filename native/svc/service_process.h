// tailscope-svc --service NAME: one service of a topology in this process.
// It listens (on its own socket, or one inherited from the supervisor),
// prints {"listening", "address", "service", "pid"} once it serves, runs
// until SIGINT/SIGTERM or --duration, and writes one result document: the
// service's counters, latency, CPU (core/rusage.h), resources, and with
// --traces its span file.
#pragma once

#include "svc/service_options.h"

namespace tailscope::svc {

// The options have passed check_service_options. Returns the exit code;
// throws on bad input found only now (an unknown service, a bad --cpus).
int run_service_process(const ServiceOptions& options, int argc, char** argv);

}  // namespace tailscope::svc
