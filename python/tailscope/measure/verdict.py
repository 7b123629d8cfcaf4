"""Verdicts of comparisons between percentiles that carry intervals (measure.intervals): *met*,
*not met*, or *undecided at this length* when the interval straddles the target — with how long a
run would decide it (docs/measurement.md).

How long: a percentile's interval narrows as 1/√n (the binomial rank spread is √(n q (1 − q)), and
for a fixed density at the quantile the interval's width in values follows), so the n samples that
gave a half-width h give h' = h·√(n/n') at n' samples. Assumed: the estimate stays where it is, the
run keeps its observed rate (samples per second), and the histogram's resolution (0.1 %) is not the
limit. Under that, the run decides when the half-width facing the target fits between the estimate
and the target: n' = n · (h / |estimate − target|)². An estimate on the target is decided by no length.
"""

from __future__ import annotations

import math
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


def _undecided(factor: float | None, count: int, seconds_now: float | None, why: str = "") -> IntervalVerdict:
    if factor is None:
        return IntervalVerdict(UNDECIDED, why_no_length=why)
    return IntervalVerdict(
        UNDECIDED,
        length_factor=factor,
        samples_to_decide=math.ceil(factor * count),
        seconds_to_decide=None if seconds_now is None else factor * seconds_now,
        why_no_length="" if seconds_now is not None else "no observed rate to turn samples into seconds",
    )


def _seconds(count: int, rate_per_s: float | None) -> float | None:
    return count / rate_per_s if rate_per_s else None


ON_THE_TARGET = "the estimate sits on the target: no run length decides it while it stays there"


def at_most(x: QuantileInterval, target_ns: float, rate_per_s: float | None = None) -> IntervalVerdict:
    """Is x's percentile ≤ target_ns? MET when the whole interval is at or below the target, NOT_MET
    when all of it is above, else UNDECIDED. `rate_per_s`: the samples per second the run recorded."""
    if why := _missing(x):
        return IntervalVerdict("", unavailable=why)
    assert x.lo_ns is not None and x.hi_ns is not None and x.estimate_ns is not None
    if x.hi_ns <= target_ns:
        return IntervalVerdict(MET)
    if x.lo_ns > target_ns:
        return IntervalVerdict(NOT_MET)
    gap = abs(target_ns - x.estimate_ns)
    if gap == 0:
        return _undecided(None, x.count, None, ON_THE_TARGET)
    # The side of the interval that must clear the target.
    half = x.hi_ns - x.estimate_ns if x.estimate_ns < target_ns else x.estimate_ns - x.lo_ns
    return _undecided((half / gap) ** 2, x.count, _seconds(x.count, rate_per_s))


def at_most_other(
    a: QuantileInterval, b: QuantileInterval, rate_a_per_s: float | None = None, rate_b_per_s: float | None = None
) -> IntervalVerdict:
    """Is a's percentile ≤ b's (two runs side by side)? MET when a's interval lies at or below b's,
    NOT_MET when entirely above it, UNDECIDED when they overlap. Two disjoint 95 % intervals are a
    stricter test than one of 95 % on the difference: an undecided pair may still differ, a decided
    one does. How long: both runs lengthened by the same factor k (they are run side by side, for
    the same time), until the two half-widths facing each other fit between the estimates:
    k = ((h_a + h_b) / |a − b|)²; `samples_to_decide` counts the larger run's samples."""
    if why := _missing(a, b):
        return IntervalVerdict("", unavailable=why)
    assert a.lo_ns is not None and a.hi_ns is not None and a.estimate_ns is not None
    assert b.lo_ns is not None and b.hi_ns is not None and b.estimate_ns is not None
    if a.hi_ns <= b.lo_ns:
        return IntervalVerdict(MET)
    if a.lo_ns > b.hi_ns:
        return IntervalVerdict(NOT_MET)
    gap = abs(b.estimate_ns - a.estimate_ns)
    if gap == 0:
        return _undecided(
            None, max(a.count, b.count), None, "the two estimates are equal: no run length separates them"
        )
    if a.estimate_ns < b.estimate_ns:
        halves = (a.hi_ns - a.estimate_ns) + (b.estimate_ns - b.lo_ns)
    else:
        halves = (a.estimate_ns - a.lo_ns) + (b.hi_ns - b.estimate_ns)
    seconds_a, seconds_b = _seconds(a.count, rate_a_per_s), _seconds(b.count, rate_b_per_s)
    seconds_now = None if seconds_a is None or seconds_b is None else max(seconds_a, seconds_b)
    return _undecided((halves / gap) ** 2, max(a.count, b.count), seconds_now)
