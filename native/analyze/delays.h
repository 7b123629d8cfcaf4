// Scheduling and join delays of a trace: the time between a client span and
// the server span it calls (before the server starts, after it ends), and the
// delays tailscope's own async probe recorded as span tags.
#pragma once

#include "analyze/trace_analysis.h"

namespace tailscope::analyze {

// Fills rpc_delays, probe_*_ns and delay_on_path_ns (needs analysis.path);
// negative RPC delays are counted as clock skew.
void extract_delays(const SpanTree& tree, TraceAnalysis& analysis);

}  // namespace tailscope::analyze
