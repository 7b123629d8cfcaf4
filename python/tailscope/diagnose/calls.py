"""How one parent calls one child operation: bounded fan-out ("waves of k") and sequential chains.

A call site is (parent service, parent operation) → (child service, child operation); an instance is
one parent span with its n ≥ 2 children of that operation. Within an instance all children are on one
clock (the child's service), so their overlaps are measured as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# A finding needs this many instances that show it, and this share of the instances that could.
MIN_INSTANCES = 3
MIN_SHARE = 0.9


@dataclass(frozen=True)
class Children:
    """The children of one operation under one parent span, as (start, end), sorted by start."""

    trace_id: str
    parent_span_id: str
    intervals: tuple[tuple[int, int], ...]


def max_overlap(intervals: Sequence[tuple[int, int]]) -> int:
    """The most intervals in flight at once (touching ends do not overlap)."""
    events = sorted([(e, -1) for s, e in intervals if e > s] + [(s, 1) for s, e in intervals if e > s])
    level = top = 0
    for _, step in events:
        level += step
        top = max(top, level)
    return max(top, 1 if intervals else 0)


def gated_launches(intervals: Sequence[tuple[int, int]], k: int, launch_gap_ns: int) -> bool:
    """The first k children launched together (within `launch_gap_ns` of the first), and every later
    one launched within `launch_gap_ns` after an earlier sibling ended: a launch waited for a slot."""
    if len(intervals) <= k:
        return False
    first = intervals[0][0]
    if any(s - first > launch_gap_ns for s, _ in intervals[:k]):
        return False
    for i in range(k, len(intervals)):
        start = intervals[i][0]
        ended = [e for _, e in intervals[:i] if e <= start]
        if not ended or start - max(ended) > launch_gap_ns:
            return False
    return True


@dataclass(frozen=True)
class BoundedFanOut:
    """Children launched together but never more than `k` in flight while n > k were launched."""

    parent_service: str
    parent_operation: str
    service: str
    operation: str
    k: int
    instances: int  # instances with n > k
    bounded: int  # of them: never more than k in flight, launches gated by completions
    calls_p50: float  # n per instance (median)
    calls_max: int
    # Per bounded instance: first launch → last end, and the longest child (what n in parallel would take).
    span_p50_ns: float
    longest_p50_ns: float


@dataclass(frozen=True)
class SequentialChain:
    """n calls of one child operation from one parent that never overlap."""

    parent_service: str
    parent_operation: str
    service: str
    operation: str
    instances: int  # instances with n ≥ 2
    sequential: int  # of them: no two calls overlap
    calls_p50: float
    calls_max: int
    gap_p50_ns: float  # from one call's end to the next call's start (median over all gaps)
    chain_p50_ns: float  # first start → last end
    longest_p50_ns: float  # the longest call: what the chain would take run in parallel


def _span_ns(iv: Sequence[tuple[int, int]]) -> int:
    return max(e for _, e in iv) - iv[0][0]


def _longest_ns(iv: Sequence[tuple[int, int]]) -> int:
    return max(e - s for s, e in iv)


def bounded_fan_out(
    site: tuple[str, str, str, str], instances: Sequence[Children], *, launch_gap_ns: int
) -> BoundedFanOut | None:
    """The call site's bound k when its instances show one (None otherwise)."""
    bounds = []
    for inst in instances:
        k = max_overlap(inst.intervals)
        if 2 <= k < len(inst.intervals) and gated_launches(inst.intervals, k, launch_gap_ns):
            bounds.append(k)
    if not bounds:
        return None
    k = int(np.bincount(bounds).argmax())
    could = [inst for inst in instances if len(inst.intervals) > k]
    bounded = [
        inst for inst in could if max_overlap(inst.intervals) == k and gated_launches(inst.intervals, k, launch_gap_ns)
    ]
    if len(bounded) < MIN_INSTANCES or len(bounded) < MIN_SHARE * len(could):
        return None
    counts = [len(inst.intervals) for inst in could]
    return BoundedFanOut(
        *site,
        k=k,
        instances=len(could),
        bounded=len(bounded),
        calls_p50=float(np.median(counts)),
        calls_max=max(counts),
        span_p50_ns=float(np.median([_span_ns(i.intervals) for i in bounded])),
        longest_p50_ns=float(np.median([_longest_ns(i.intervals) for i in bounded])),
    )


def sequential_chain(site: tuple[str, str, str, str], instances: Sequence[Children]) -> SequentialChain | None:
    could = [inst for inst in instances if len(inst.intervals) >= 2]
    chains = [inst for inst in could if max_overlap(inst.intervals) == 1]
    if len(chains) < MIN_INSTANCES or len(chains) < MIN_SHARE * len(could):
        return None
    gaps = [b[0] - a[1] for inst in chains for a, b in zip(inst.intervals, inst.intervals[1:])]
    counts = [len(inst.intervals) for inst in could]
    return SequentialChain(
        *site,
        instances=len(could),
        sequential=len(chains),
        calls_p50=float(np.median(counts)),
        calls_max=max(counts),
        gap_p50_ns=float(np.median(gaps)),
        chain_p50_ns=float(np.median([_span_ns(i.intervals) for i in chains])),
        longest_p50_ns=float(np.median([_longest_ns(i.intervals) for i in chains])),
    )
