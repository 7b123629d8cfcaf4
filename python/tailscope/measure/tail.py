"""Tail analysis of a latency distribution: how heavy is the tail, with evidence.

Percentiles say *where* the tail is; the tail index says how fast it thins out, which decides
whether a rarer event is much worse (heavy, power law) or only a little worse (exponential).

- **Hill estimator** of the tail index α on the top k order statistics:
  α̂ = k / Σ_{i=1..k} ln(X_(i) / X_(k+1)), X_(1) ≥ X_(2) ≥ … the sample in decreasing order.
  For a power-law tail P(X > x) ∝ x^−α it converges to α; for a lighter tail it grows with n.
  **k rule**: k = ⌊√n⌋, at least 10, at most n/5 (a common choice balancing the estimator's
  variance, which falls as 1/√k, against the bias of reaching into the body of the distribution);
  fewer than 50 samples → no estimate.
  **Confidence interval**: percentile bootstrap (B = 400 resamples, 95 %). A resample's top k + 1
  only involve the largest order statistics, so a resample is drawn exactly but cheaply: the number
  of its draws that land among the top m = min(n, max(20 k, 2000)) values is Binomial(n, m/n), and
  those draws are uniform over the top m (if fewer than k + 1 land there, which has negligible
  probability, the whole sample is resampled).
- **Mean-excess function** e(u) = E[X − u | X > u] at thresholds u from the 50th to the
  99th percentile (only thresholds with ≥ 20 exceedances), and the slope of a least-squares line
  through it (scipy.stats.linregress; dimensionless: both axes are times). A power law has
  e(u) = u / (α − 1), rising; an exponential tail has a flat e(u); a light (bounded) tail a falling one.
- **Classification** from the generalized Pareto distribution fitted to the k excesses over
  X_(k+1) (scipy.stats.genpareto, location 0; by the Pickands–Balkema–de Haan theorem excesses over a
  high threshold are GPD): shape ξ > 0 is a power law with α = 1/ξ, ξ = 0 exponential, ξ < 0 a
  bounded tail. The 95 % interval is ξ̂ ± 1.96 (1 + ξ̂)/√k (the MLE's asymptotic standard error,
  valid for ξ > −0.5; a fitted ξ̂ ≤ −0.5 only comes from a tail with an end, and counts as light).
  **heavy** if the interval lies above 0, **light** if below, **exponential-like** otherwise. The
  Hill α and the mean-excess slope are reported beside it as corroborating evidence.

Samples come from an HdrHistogram (the load generator's .hlog): `samples_from_hlog` reconstructs
them from the buckets (see its docstring for the resolution this gives).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from tailscope.measure.hlog import HlogError, histogram_from_hlog

MIN_SAMPLES = 50
BOOTSTRAP_RESAMPLES = 400
CONFIDENCE = 0.95
MEAN_EXCESS_MIN_EXCEEDANCES = 20
HEAVY, EXPONENTIAL, LIGHT = "heavy", "exponential-like", "light"

# tailscope's latency histograms: 1 ns … 1 h, 3 significant digits (docs/hdr-histogram.md).


class TailError(ValueError):
    """The samples cannot support the estimate (too few, not positive); the message says why."""


def k_rule(n: int) -> int:
    """Order statistics the Hill estimator uses for n samples (module docstring)."""
    if n < MIN_SAMPLES:
        raise TailError(f"{n} samples: the tail index needs at least {MIN_SAMPLES}")
    return int(min(max(10, math.isqrt(n)), n // 5))


def _hill_from_top(top_desc: np.ndarray, k: int) -> float:
    """Hill α from the k + 1 largest values in decreasing order."""
    threshold = top_desc[k]
    logs = np.log(top_desc[:k] / threshold)
    s = float(logs.sum())
    return k / s if s > 0 else math.inf


def _top(x: np.ndarray, count: int) -> np.ndarray:
    """The `count` largest values of x, decreasing."""
    part = np.partition(x, x.size - count)[x.size - count :]
    return np.sort(part)[::-1]


@dataclass
class HillEstimate:
    alpha: float
    ci_low: float
    ci_high: float
    k: int
    n: int
    threshold: float  # X_(k+1): the tail starts above it

    def contains(self, alpha: float) -> bool:
        return self.ci_low <= alpha <= self.ci_high


def hill(samples, k: int | None = None, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> HillEstimate:
    x = np.asarray(samples, dtype=float)
    x = x[np.isfinite(x)]
    if x.size and x.min() <= 0:
        raise TailError("latencies must be positive for the Hill estimator")
    k = k_rule(x.size) if k is None else k
    if not 1 <= k < x.size:
        raise TailError(f"k = {k} must be in 1 … n − 1 = {x.size - 1}")
    n = x.size
    m = int(min(n, max(20 * k, 2000)))
    top_m = _top(x, m)
    alpha = _hill_from_top(top_m, k)
    rng = np.random.default_rng(seed)
    draws_in_top = rng.binomial(n, m / n, size=resamples)
    boots = np.empty(resamples)
    for b in range(resamples):
        if draws_in_top[b] >= k + 1:
            resample = top_m[rng.integers(0, m, draws_in_top[b])]
        else:  # practically never: fall back to an ordinary resample of everything
            resample = x[rng.integers(0, n, n)]
        boots[b] = _hill_from_top(_top(resample, k + 1), k)
    boots = boots[np.isfinite(boots)]
    lo, hi = np.quantile(boots, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2]) if boots.size else (math.nan, math.nan)
    return HillEstimate(alpha, float(lo), float(hi), k, n, float(top_m[k]))


@dataclass
class MeanExcess:
    thresholds: list[float]
    mean_excess: list[float]
    exceedances: list[int]
    slope: float | None  # d e(u) / d u of the least-squares line (dimensionless)
    slope_stderr: float | None


def mean_excess(samples, quantiles=None) -> MeanExcess:
    x = np.sort(np.asarray(samples, dtype=float))
    qs = np.linspace(0.5, 0.99, 25) if quantiles is None else np.asarray(quantiles)
    us, es, cs = [], [], []
    for u in np.unique(np.quantile(x, qs)):
        exc = x[x > u] - u
        if exc.size < MEAN_EXCESS_MIN_EXCEEDANCES:
            continue
        us.append(float(u))
        es.append(float(exc.mean()))
        cs.append(int(exc.size))
    slope = stderr = None
    if len(us) >= 3:
        fit = stats.linregress(us, es)
        slope, stderr = float(fit.slope), float(fit.stderr)
    return MeanExcess(us, es, cs, slope, stderr)


@dataclass
class TailVerdict:
    kind: str  # heavy | exponential-like | light
    xi: float
    xi_low: float
    xi_high: float
    hill: HillEstimate
    mean_excess_slope: float | None
    exponential_scale: float  # mean excess over the Hill threshold: the fitted exponential tail's scale
    tail_fraction: float  # k / n: the fraction of samples the fits describe
    evidence: str

    def to_json(self) -> dict:
        d = asdict(self)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()} | {
            "hill": {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d["hill"].items()}
        }


def classify(samples, seed: int = 0) -> TailVerdict:
    """heavy / exponential-like / light, with the numbers that decided it (module docstring)."""
    x = np.asarray(samples, dtype=float)
    h = hill(x, seed=seed)
    excesses = _top(x, h.k) - h.threshold
    excesses = excesses[excesses > 0]
    if excesses.size < 10:
        raise TailError(f"only {excesses.size} distinct values above the tail threshold: too coarse to fit")
    xi, _loc, _scale = stats.genpareto.fit(excesses, floc=0)
    z = stats.norm.ppf((1 + CONFIDENCE) / 2)
    if xi > -0.5:
        se = (1 + xi) / math.sqrt(excesses.size)
        lo, hi = xi - z * se, xi + z * se
    else:
        # Below −0.5 the MLE is not asymptotically normal (the support's end is estimated from the
        # largest value); such a shape only arises from a tail that ends, so it is taken as light.
        lo, hi = -math.inf, xi
    kind = HEAVY if lo > 0 else LIGHT if hi < 0 else EXPONENTIAL
    me = mean_excess(x)
    slope = me.slope
    alpha_txt = f"α = 1/ξ ≈ {1 / xi:.2g}; " if xi > 0 else ""
    evidence = (
        f"GPD shape ξ = {xi:+.2f} [{lo:+.2f}, {hi:+.2f}] on the top {h.k} of {h.n} samples ({alpha_txt}"
        f"Hill α = {h.alpha:.2f} [{h.ci_low:.2f}, {h.ci_high:.2f}]); mean-excess slope "
        + (f"{slope:+.2f}" if slope is not None else "unavailable (too few thresholds)")
    )
    return TailVerdict(kind, float(xi), float(lo), float(hi), h, slope, float(excesses.mean()), h.k / h.n, evidence)


# ---- samples from an HdrHistogram log ------------------------------------------------------------


def samples_from_histogram(h) -> np.ndarray:
    """Reconstructs samples from an HdrHistogram's buckets.

    A bucket holding c samples covers [lowest equivalent value, highest equivalent value]; its c
    samples are placed evenly inside that range (at the midpoints of c equal slices) rather than
    all at one value, so ties do not put zeros into the Hill sums. With 3 significant digits a
    bucket is at most 1/1024 of its value wide, so a reconstructed sample is within 0.1 % of the
    real one and ln(X_i / X_(k+1)) — what the Hill estimator sums — is off by at most ~0.001, far
    below the estimator's own spread (α/√k).
    """
    chunks = []
    for item in h.get_recorded_iterator():
        v, c = item.value_iterated_to, item.count_at_value_iterated_to
        lo, hi = h.get_lowest_equivalent_value(v), h.get_highest_equivalent_value(v)
        width = max(hi - lo + 1, 1)
        chunks.append(lo + width * (np.arange(c) + 0.5) / c)
    return np.concatenate(chunks) if chunks else np.empty(0)


def samples_from_hlog(path: str | Path, tag: str = "latency_intended") -> np.ndarray:
    try:
        return samples_from_histogram(histogram_from_hlog(path, tag))
    except HlogError as e:
        raise TailError(str(e)) from e


def ccdf_points(samples, max_points: int = 200) -> tuple[list[float], list[float]]:
    """Empirical survival function P(X > x) at up to max_points log-spaced ranks, for plotting."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    if n == 0:
        return [], []
    # Ranks from the top, log-spaced, so the tail keeps its resolution.
    ranks = np.unique(np.clip(np.round(np.logspace(0, math.log10(n), max_points)).astype(int), 1, n))
    xs = x[n - ranks]
    surv = (ranks - 0.5) / n
    return [float(v) for v in xs[::-1]], [float(s) for s in surv[::-1]]
