// Every span of one analyzed trace, for a timeline (Gantt chart) of it: the
// per-trace analysis (critical-path sections, RPC pairs, launch stagger) plus
// each span's service, operation, parent and normalized times. Written only
// for the traces a user picks (tailscope-critpath --timeline-trace), since a
// whole run's spans would be as large as the input.
#pragma once

#include <string>
#include <vector>

#include "analyze/trace_analysis.h"

namespace tailscope::analyze {

// Appends {"analysis": <append_trace_analysis_json>, "spans": [...]} (one
// line, no newline) to `out`.
void append_trace_timeline_json(const TraceAnalysis& analysis, const trace::NameTable& names,
                                const std::vector<WhatIfScenario>& scenarios, std::string& out);

}  // namespace tailscope::analyze
