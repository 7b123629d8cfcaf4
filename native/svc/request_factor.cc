#include "svc/request_factor.h"

#include <cmath>
#include <limits>
#include <numbers>

namespace tailscope::svc {
namespace {

// SplitMix64's finaliser: every input bit flips about half the output bits, so
// trace ids that differ in a few bits (sequential, or a counter) give
// unrelated factors.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Acklam's coefficients (P. J. Acklam, "An algorithm for computing the inverse
// normal cumulative distribution function", 2003): the central region's
// numerator and denominator, and the tails'.
constexpr double kA[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                         1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
constexpr double kB[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
                         -1.328068155288572e+01};
constexpr double kC[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                         -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
constexpr double kD[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00};
constexpr double kTail = 0.02425;  // below it (and above 1 − it) the tail form

// The lower tail's form, for p ≤ kTail (the upper tail is its mirror).
double lower_tail(double p) {
  const double q = std::sqrt(-2 * std::log(p));
  return (((((kC[0] * q + kC[1]) * q + kC[2]) * q + kC[3]) * q + kC[4]) * q + kC[5]) /
         ((((kD[0] * q + kD[1]) * q + kD[2]) * q + kD[3]) * q + 1);
}

}  // namespace

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); }

double normal_quantile(double p) {
  if (!(p > 0)) return -std::numeric_limits<double>::infinity();
  if (!(p < 1)) return std::numeric_limits<double>::infinity();
  double x;
  if (p < kTail) {
    x = lower_tail(p);
  } else if (p > 1 - kTail) {
    x = -lower_tail(1 - p);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((kA[0] * r + kA[1]) * r + kA[2]) * r + kA[3]) * r + kA[4]) * r + kA[5]) * q /
        (((((kB[0] * r + kB[1]) * r + kB[2]) * r + kB[3]) * r + kB[4]) * r + 1);
  }
  // One Halley step on Φ(x) − p brings the approximation to double precision.
  const double e = normal_cdf(x) - p;
  const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

RequestFactor request_factor(uint64_t trace_id_high, uint64_t trace_id_low) {
  if (trace_id_high == 0 && trace_id_low == 0) return {};
  // Salted, so the factor is unrelated to anything else derived from the id.
  const uint64_t h = mix64(mix64(trace_id_high ^ 0x7a115c09e0000001ULL) ^ trace_id_low);
  // The top 53 bits, centred in their cell: a uniform strictly inside (0, 1).
  const double u = (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
  return {true, normal_quantile(u)};
}

}  // namespace tailscope::svc
