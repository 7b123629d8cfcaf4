// l1d: a random pointer chase sized to the l1d cache (pointer_chase.h); the
// size comes from sysfs (default_working_set_bytes) or --working-set-bytes.
#include "prof/stress/pointer_chase.h"

namespace tailscope::prof::stress {

std::unique_ptr<StressKernel> make_l1d_kernel() { return std::make_unique<PointerChaseKernel>(); }

}  // namespace tailscope::prof::stress
