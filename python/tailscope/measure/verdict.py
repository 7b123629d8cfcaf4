"""Verdicts of comparisons between percentiles that carry intervals (measure.intervals): *met*,
*not met*, or *undecided at this length* when the interval straddles the target — with how long a
run would decide it (docs/measurement.md).

The rule is one, free of units (judge_at_most, judge_within); at_most and at_most_other apply it
to percentiles, and a study applies it to any estimate with an interval (a ratio, a median of pairs).

How long: a percentile's interval narrows as 1/√n (the binomial rank spread is √(n q (1 − q)), and
for a fixed density at the quantile the interval's width in values follows), so the n samples that
gave a half-width h give h' = h·√(n/n') at n' samples. Assumed: the estimate stays where it is, the
run keeps its observed rate (samples per second), and the histogram's resolution (0.1 %) is not the
limit. Under that, the run decides when the half-width facing the target fits between the estimate
and the target: n' = n · (h / |estimate − target|)². An estimate on the target is decided by no length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tailscope.measure.intervals import QuantileInterval

MET = "met"
NOT_MET = "not met"
UNDECIDED = "undecided at this length"


@dataclass(frozen=True)
class IntervalVerdict:
    """One comparison's verdict. `verdict` is MET, NOT_MET or UNDECIDED, or "" when `unavailable`
    says why the intervals cannot judge it. An UNDECIDED verdict says how much longer a run would
    decide it (`length_factor` × this run's length: `samples_to_decide` in all, `seconds_to_decide`
    at the observed rate), or why no length would (`why_no_length`)."""

    verdict: str
    unavailable: str = ""
    length_factor: float | None = None
    samples_to_decide: int | None = None
    seconds_to_decide: float | None = None
    why_no_length: str = ""


def _missing(*intervals: QuantileInterval) -> str:
    for i in intervals:
        if not i.available:
            return i.unavailable
        if i.estimate_ns is None:
            return "no estimate"
    return ""


def _ceil(x: float) -> int:
    """ceil, but a product that is an integer up to floating-point noise (4.000000000000009 × 500) is that integer."""
    nearest = round(x)
    return int(nearest) if abs(x - nearest) <= 1e-9 * max(1.0, abs(x)) else math.ceil(x)


def _undecided(factor: float | None, count: int, seconds_now: float | None, why: str = "") -> IntervalVerdict:
    if factor is None:
        return IntervalVerdict(UNDECIDED, why_no_length=why)
    return IntervalVerdict(
        UNDECIDED,
        length_factor=factor,
        samples_to_decide=_ceil(factor * count),
        seconds_to_decide=None if seconds_now is None else factor * seconds_now,
        why_no_length="" if seconds_now is not None else "no observed rate to turn samples into seconds",
    )


def _seconds(count: int, rate_per_s: float | None) -> float | None:
    return count / rate_per_s if rate_per_s else None


ON_THE_TARGET = "the estimate sits on the target: no run length decides it while it stays there"


def length_factor_to_decide(half_width: float, gap: float) -> float | None:
    """How many times this run's length decides a comparison: the interval's half-width facing the
    target (`half_width`, in the estimate's unit) shrinks as 1/√n until it fits in the `gap` between
    the estimate and the target, so n'/n = (half_width / gap)². None when the gap is 0 (no length
    decides an estimate that sits on the target); a factor below 1 means a shorter run would have."""
    if half_width < 0 or gap < 0:
        raise ValueError(f"half-width and gap must be ≥ 0, got {half_width} and {gap}")
    return None if gap == 0 else (half_width / gap) ** 2


def judge_at_most(
    estimate: float, lo: float, hi: float, target: float, count: int, rate_per_s: float | None = None
) -> IntervalVerdict:
    """The one rule, free of units: is the quantity (estimate in [lo, hi], from `count` samples
    recorded at `rate_per_s`) at most `target`? MET when hi ≤ target, NOT_MET when lo > target, else
    UNDECIDED with the length that would decide it."""
    if hi <= target:
        return IntervalVerdict(MET)
    if lo > target:
        return IntervalVerdict(NOT_MET)
    # The side of the interval that must clear the target.
    half = hi - estimate if estimate < target else estimate - lo
    factor = length_factor_to_decide(half, abs(target - estimate))
    if factor is None:
        return _undecided(None, count, None, ON_THE_TARGET)
    return _undecided(factor, count, _seconds(count, rate_per_s))


def judge_within(
    estimate: float,
    lo: float,
    hi: float,
    band: tuple[float, float],
    count: int,
    rate_per_s: float | None = None,
) -> IntervalVerdict:
    """Does the quantity lie inside `band` = (low, high) (a contract such as ±15 % on a ratio)? MET
    when [lo, hi] lies inside the band, NOT_MET when it lies wholly outside, else UNDECIDED: the run
    decides when every side of the interval that crosses a band edge clears it (inside: both edges
    the interval crosses; outside: the edge beside the estimate)."""
    low, high = band
    if not low <= high:
        raise ValueError(f"the band's low end {low} lies above its high end {high}")
    if low <= lo and hi <= high:
        return IntervalVerdict(MET)
    if hi < low or lo > high:
        return IntervalVerdict(NOT_MET)
    if estimate < low:  # outside below: the upper half must fall below the low edge
        needed = [length_factor_to_decide(hi - estimate, low - estimate)]
    elif estimate > high:
        needed = [length_factor_to_decide(estimate - lo, estimate - high)]
    else:  # inside: each crossed edge
        needed = []
        if lo < low:
            needed.append(length_factor_to_decide(estimate - lo, estimate - low))
        if hi > high:
            needed.append(length_factor_to_decide(hi - estimate, high - estimate))
    if any(f is None for f in needed):
        return _undecided(None, count, None, "the estimate sits on the band's edge: no run length decides it there")
    return _undecided(max(f for f in needed if f is not None), count, _seconds(count, rate_per_s))


def decided_together(verdicts: Sequence[IntervalVerdict]) -> IntervalVerdict:
    """A judgement that rests on several undecided comparisons (a ratio whose two ends each rest on a
    point): UNDECIDED, decided when the longest of their lengths is run — each point lengthened by the
    largest factor (`samples_to_decide` and `seconds_to_decide`: the largest of the points'), or no
    length when one of them has none (its reason)."""
    open_ = [v for v in verdicts if v.verdict == UNDECIDED]
    if not open_:
        raise ValueError("decided_together needs at least one undecided verdict")
    stuck = next((v for v in open_ if v.length_factor is None), None)
    if stuck is not None:
        return IntervalVerdict(UNDECIDED, why_no_length=stuck.why_no_length)
    seconds = [v.seconds_to_decide for v in open_]
    return IntervalVerdict(
        UNDECIDED,
        length_factor=max(v.length_factor or 0.0 for v in open_),
        samples_to_decide=max(v.samples_to_decide or 0 for v in open_),
        seconds_to_decide=None if None in seconds else max(s or 0.0 for s in seconds),
        why_no_length="" if None not in seconds else "no observed rate to turn samples into seconds",
    )


def at_most(x: QuantileInterval, target_ns: float, rate_per_s: float | None = None) -> IntervalVerdict:
    """Is x's percentile ≤ target_ns? MET when the whole interval is at or below the target, NOT_MET
    when all of it is above, else UNDECIDED. `rate_per_s`: the samples per second the run recorded."""
    if why := _missing(x):
        return IntervalVerdict("", unavailable=why)
    assert x.lo_ns is not None and x.hi_ns is not None and x.estimate_ns is not None
    return judge_at_most(x.estimate_ns, x.lo_ns, x.hi_ns, target_ns, x.count, rate_per_s)


def at_most_other(
    a: QuantileInterval,
    b: QuantileInterval,
    rate_a_per_s: float | None = None,
    rate_b_per_s: float | None = None,
    share_of_b: float = 1.0,
) -> IntervalVerdict:
    """Is a's percentile ≤ b's (× `share_of_b`: "at most 0.9 × b's") in two runs side by side? MET
    when a's interval lies at or below b's, NOT_MET when entirely above it, UNDECIDED when they overlap. Two disjoint 95 % intervals are a
    stricter test than one of 95 % on the difference: an undecided pair may still differ, a decided
    one does. How long: both runs lengthened by the same factor k (they are run side by side, for
    the same time), until the two half-widths facing each other fit between the estimates:
    k = ((h_a + h_b) / |a − b|)²; `samples_to_decide` counts the larger run's samples."""
    if why := _missing(a, b):
        return IntervalVerdict("", unavailable=why)
    assert a.lo_ns is not None and a.hi_ns is not None and a.estimate_ns is not None
    assert b.lo_ns is not None and b.hi_ns is not None and b.estimate_ns is not None
    if share_of_b <= 0:
        raise ValueError(f"share_of_b must be > 0, got {share_of_b}")
    # "a ≤ share × b": b's estimate and interval scale alike.
    b_est, b_lo, b_hi = b.estimate_ns * share_of_b, b.lo_ns * share_of_b, b.hi_ns * share_of_b
    if a.hi_ns <= b_lo:
        return IntervalVerdict(MET)
    if a.lo_ns > b_hi:
        return IntervalVerdict(NOT_MET)
    gap = abs(b_est - a.estimate_ns)
    if gap == 0:
        return _undecided(
            None, max(a.count, b.count), None, "the two estimates are equal: no run length separates them"
        )
    if a.estimate_ns < b_est:
        halves = (a.hi_ns - a.estimate_ns) + (b_est - b_lo)
    else:
        halves = (a.estimate_ns - a.lo_ns) + (b_hi - b_est)
    seconds_a, seconds_b = _seconds(a.count, rate_a_per_s), _seconds(b.count, rate_b_per_s)
    seconds_now = None if seconds_a is None or seconds_b is None else max(seconds_a, seconds_b)
    return _undecided(length_factor_to_decide(halves, gap), max(a.count, b.count), seconds_now)


def ratio_within(
    a: QuantileInterval,
    b: QuantileInterval,
    band: tuple[float, float],
    rate_a_per_s: float | None = None,
    rate_b_per_s: float | None = None,
    names: tuple[str, str] = ("the first side", "the second side"),
) -> IntervalVerdict:
    """Does a's percentile ÷ b's lie inside `band` (a prediction ÷ a measurement within ±20 %: (0.8,
    1.2)), when each side is a separate run with its own interval? The ratio's interval is the
    quotient of the far corners, [a.lo / b.hi, a.hi / b.lo]: wider than a 95 % interval of the ratio
    (each side holds its value with 95 %), so a MET or NOT_MET it gives holds, and an UNDECIDED may
    be decided by a resampling interval of the two samples (twin/validate.ratio_ci95, where both
    raw samples are at hand). How long: both runs lengthened alike (judge_within on the quotient);
    `samples_to_decide` and `seconds_to_decide` are the slower side's. A side without an interval
    (too few samples: a p99 of 40 requests has none) is unavailable, naming the side (`names`) and why."""
    for side, x in zip(names, (a, b), strict=True):
        if why := _missing(x):
            return IntervalVerdict("", unavailable=f"{side}'s {_pct(x.q)} has no interval ({why}; {x.count} samples)")
    assert a.lo_ns is not None and a.hi_ns is not None and a.estimate_ns is not None
    assert b.lo_ns is not None and b.hi_ns is not None and b.estimate_ns is not None
    if b.lo_ns <= 0 or b.estimate_ns <= 0:
        return IntervalVerdict("", unavailable=f"{names[1]}'s interval reaches 0: no ratio")
    # The side whose samples take longer to gather sets the length (both are lengthened alike).
    seconds = [_seconds(a.count, rate_a_per_s), _seconds(b.count, rate_b_per_s)]
    slower = max(range(2), key=lambda i: seconds[i] or 0.0)
    count = (a.count, b.count)[slower]
    v = judge_within(a.estimate_ns / b.estimate_ns, a.lo_ns / b.hi_ns, a.hi_ns / b.lo_ns, band, count)
    if v.verdict != UNDECIDED or v.length_factor is None:
        return v
    return _undecided(v.length_factor, count, seconds[slower])


def _pct(q: float) -> str:
    return f"p{q * 100:g}"
