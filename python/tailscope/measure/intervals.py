"""Distribution-free confidence intervals of percentiles, from order statistics.

For the q-quantile ξ of n independent samples of any continuous distribution, the number B of
samples below ξ is Binomial(n, q) whatever the distribution. So the order statistics X_(l) ≤ X_(u)
(1-based ranks) bound ξ with probability P(l ≤ B < u), and choosing the ranks from the binomial
CDF gives an exact interval without resampling: here the equal-tailed one, the largest l with
P(B < l) ≤ (1 − level)/2 and the smallest u with P(B ≥ u) ≤ (1 − level)/2. Its exact coverage is
at least `level` (more where B's discreteness forces it). It needs rank 1 and rank n to be allowed:
(1 − q)^n and q^n ≤ (1 − level)/2, i.e. n ≥ 6 for p50, 368 for p99, 3688 for p99.9 at 95 %;
below that the interval is unavailable with the reason, never made up.

The engines compute the same intervals in C++ (native/core/latency_summary.h) and write them into
every `latency` summary (`percentile_ci`, docs/formats.md); `from_latency` reads them back. The
functions here serve what the driver computes from samples itself (exact values, histograms
decoded from .hlog files).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95


@dataclass(frozen=True)
class RankInterval:
    """1-based ranks of the order statistics that bound a quantile, and their exact coverage."""

    lower_rank: int
    upper_rank: int
    coverage: float  # P(lower_rank ≤ B < upper_rank) for B ~ Binomial(n, q); ≥ the level asked for


def min_samples_for_interval(q: float, level: float = LEVEL) -> int:
    """The smallest n with a two-sided interval at q: (1 − q)^n and q^n both ≤ (1 − level)/2."""
    if not (0 < q < 1 and 0 < level < 1):
        raise ValueError(f"q and level must lie in (0, 1), got q={q}, level={level}")
    tail, m = (1 - level) / 2, max(q, 1 - q)
    n = math.ceil(math.log(tail) / math.log(m))
    # The logarithms can land one off at an exact power: settle on the definition.
    while n > 1 and m ** (n - 1) <= tail:
        n -= 1
    while m**n > tail:
        n += 1
    return n


def order_statistic_ranks(n: int, q: float, level: float = LEVEL) -> RankInterval | None:
    """The ranks of the q-quantile's interval among n samples; None when n is too small for one."""
    if not (0 < q < 1 and 0 < level < 1):
        raise ValueError(f"q and level must lie in (0, 1), got q={q}, level={level}")
    if n < 1:
        return None
    tail = (1 - level) / 2
    mean, sd = n * q, math.sqrt(n * q * (1 - q))
    # Beyond 12 standard deviations (+30 for the Poisson-like tail of an extreme q at small n)
    # the binomial mass is below 1e-30: the window's sum is the CDF, in O(√n) terms.
    k_first = max(0, math.floor(mean - 12 * sd - 30))
    k_last = min(n, math.ceil(mean + 12 * sd + 30))
    steps = np.arange(k_first, k_last, dtype=np.float64)
    # log pmf(k) relative to pmf(k_first) by the ratio pmf(k+1)/pmf(k) = (n−k)/(k+1) · q/(1−q),
    # then normalised over the window: no log-gamma of huge arguments, no error in the first term.
    log_rel = np.concatenate(([0.0], np.cumsum(np.log((n - steps) / (steps + 1)) + math.log(q / (1 - q)))))
    pmf = np.exp(log_rel - log_rel.max())
    cdf = np.cumsum(pmf) / pmf.sum()
    below = np.concatenate(([0.0], cdf[:-1]))  # below[i] = P(B < k_first + i)
    ks = np.arange(k_first, k_last + 1)
    lower_ok = np.flatnonzero((ks >= 1) & (below <= tail))
    upper_ok = np.flatnonzero((ks >= 1) & (1 - below <= tail))
    if lower_ok.size == 0 or upper_ok.size == 0:
        return None
    li, ui = int(lower_ok[-1]), int(upper_ok[0])
    return RankInterval(int(ks[li]), int(ks[ui]), float(below[ui] - below[li]))


def nearest_rank(n: int, q: float) -> int:
    """ceil(q·n), at least 1: the rank HdrHistogram's value_at_percentile reports. A product that is
    an integer up to floating-point noise (0.999 · 1000) is taken as that integer, as the engines do."""
    product = q * n
    nearest = round(product)
    rank = nearest if abs(product - nearest) <= 1e-9 * max(1.0, product) else math.ceil(product)
    return min(max(int(rank), 1), n)


@dataclass(frozen=True)
class QuantileInterval:
    """A percentile's estimate and its interval, or why there is no interval.

    `lo_ns`/`hi_ns` are None exactly when `unavailable` says why; `estimate_ns` may still be set
    then (a percentile of too few samples is a number without an interval)."""

    q: float  # 0 < q < 1
    count: int  # samples behind it
    estimate_ns: float | None
    lo_ns: float | None = None
    hi_ns: float | None = None
    level: float = LEVEL
    unavailable: str = ""

    @property
    def available(self) -> bool:
        return not self.unavailable

    @property
    def samples_beyond(self) -> int:
        """The samples above the percentile's rank (count − ceil(q·count)): below 10 the report calls
        its interval unavailable (docs/measurement.md)."""
        return self.count - nearest_rank(self.count, self.q) if self.count > 0 else 0


def _too_few(q: float, count: int, estimate_ns: float | None, level: float) -> QuantileInterval:
    return QuantileInterval(
        q, count, estimate_ns, level=level, unavailable=f"fewer than {min_samples_for_interval(q, level)} samples"
    )


def quantile_ci(values_sorted: Sequence[float] | np.ndarray, q: float, level: float = LEVEL) -> QuantileInterval:
    """The q-quantile of exact sample values (sorted ascending) with its interval [X_(l), X_(u)]."""
    x = np.asarray(values_sorted, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError("quantile_ci: the values must be one-dimensional")
    n = int(x.size)
    if n == 0:
        return QuantileInterval(q, 0, None, level=level, unavailable="no samples")
    if np.any(np.diff(x) < 0):
        raise ValueError("quantile_ci: the values must be sorted ascending")
    estimate = float(x[nearest_rank(n, q) - 1])
    ranks = order_statistic_ranks(n, q, level)
    if ranks is None:
        return _too_few(q, n, estimate, level)
    return QuantileInterval(q, n, estimate, float(x[ranks.lower_rank - 1]), float(x[ranks.upper_rank - 1]), level)


def quantile_ci_from_buckets(
    buckets: Iterable[tuple[int, int, int]], q: float, level: float = LEVEL
) -> QuantileInterval:
    """The q-quantile of a histogram with its interval. `buckets`: (lowest value, highest value,
    count) of every non-empty bucket in value order (measure.hlog.buckets). The interval runs from
    the lowest value of the bucket holding rank l to the highest of the one holding rank u, so the
    bucketing only widens it; the estimate is the highest value of the bucket holding rank ceil(q·n),
    as HdrHistogram reports a percentile."""
    rows = [(int(lo), int(hi), int(c)) for lo, hi, c in buckets if c > 0]
    if not rows:
        return QuantileInterval(q, 0, None, level=level, unavailable="no samples")
    cumulative = np.cumsum([c for _, _, c in rows])
    n = int(cumulative[-1])

    def bucket(rank: int) -> tuple[int, int, int]:
        return rows[int(np.searchsorted(cumulative, rank, side="left"))]

    estimate = float(bucket(nearest_rank(n, q))[1])
    ranks = order_statistic_ranks(n, q, level)
    if ranks is None:
        return _too_few(q, n, estimate, level)
    return QuantileInterval(
        q, n, estimate, float(bucket(ranks.lower_rank)[0]), float(bucket(ranks.upper_rank)[1]), level
    )


# A document written before the engines added intervals (their stored runs stay readable).
NO_INTERVALS_IN_DOCUMENT = "the document has no percentile intervals (written before engines added them)"


def percentile_key_q(key: str) -> float | None:
    """q of a percentile key ("99.9" → 0.999); None for a key that is not a percentile strictly
    between 0 and 100 (a document's keys are read, not trusted)."""
    try:
        q = float(key) / 100
    except ValueError:
        return None
    return q if 0 < q < 1 else None


def from_latency(latency: dict, key: str) -> QuantileInterval:
    """Percentile `key` ("50", "99", "99.9" …) of a document's `latency` summary (docs/formats.md)
    with the interval the engine computed: `percentile_ci[key]`, or the reason in
    `percentile_ci_unavailable[key]`. ValueError for a key that is not a percentile in (0, 100)."""
    q = percentile_key_q(key)
    if q is None:
        raise ValueError(f"{key!r} is not a percentile strictly between 0 and 100")
    count = int(latency.get("count") or 0)
    raw = (latency.get("percentiles") or {}).get(key)
    estimate = None if raw is None else float(raw)
    level = float(latency.get("percentile_ci_level") or LEVEL)
    bounds = (latency.get("percentile_ci") or {}).get(key)
    if bounds is not None:
        lo, hi = bounds
        return QuantileInterval(q, count, estimate, float(lo), float(hi), level)
    why = (latency.get("percentile_ci_unavailable") or {}).get(key)
    if why is None:
        why = latency.get("unavailable") or ("no samples" if count == 0 else NO_INTERVALS_IN_DOCUMENT)
    return QuantileInterval(q, count, estimate, level=level, unavailable=str(why))
