// The per-request common factor of correlated stage delays (docs/twin.md,
// "Correlated stage delays"). A slow request in a real graph is slow in many
// of its spans at once; a stage whose distribution has a loading `shared` = λ
// draws its normal as z = λ·Z + √(1−λ²)·ε, where Z is this factor: one
// standard normal per request, the same in every service the request visits.
//
// Z travels without a wire field: every service sees the request's trace id
// (the trace context of each call), so each derives Z from it, by a hash to a
// uniform in (0, 1) and Φ⁻¹. The front of a topology with such stages gives
// every request an id, unsampled ones too (ServiceRuntime::begin). A request
// without one (all zero: an RPC sent with no trace context) has no factor,
// and its stages draw independently whatever their loading.
#pragma once

#include <cstdint>

namespace tailscope::svc {

struct RequestFactor {
  bool known = false;  // false: no trace id; every stage draws independently
  double z = 0;        // standard normal
};

// The factor of the request with this 128-bit trace id (unknown for 0).
RequestFactor request_factor(uint64_t trace_id_high, uint64_t trace_id_low);

// Φ(z), the standard normal CDF.
double normal_cdf(double z);
// Φ⁻¹(p) for p in (0, 1); ∓infinity at 0 and 1. Acklam's rational
// approximation (relative error < 1.2e-9) refined by one Halley step on Φ.
double normal_quantile(double p);

}  // namespace tailscope::svc
