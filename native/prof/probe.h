// `tailscope-stress --probe-counters`: which events open on this machine, and
// which count, for `tailscope doctor`. Opens the full table on the calling
// process (and per CPU on one CPU), runs a short known loop, and reports each
// event as counted / opened-but-not-counting / failed with the errno.
#pragma once

#include <nlohmann/json.hpp>

namespace tailscope::prof {

nlohmann::json probe_counters();

}  // namespace tailscope::prof
