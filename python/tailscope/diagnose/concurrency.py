"""How many spans of one population are in flight over time: a sweep over their intervals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# A cap shows as mass piled up at the maximum: time at the max at least this share of the time at
# max − 1. Without a cap the in-flight count's distribution thins out towards its maximum (a Poisson
# or geometric tail), so the maximum is a rare, brief state.
PLATEAU_RATIO = 1.0


@dataclass(frozen=True)
class Concurrency:
    """In-flight spans over the time at least one was in flight (`busy_ns`)."""

    spans: int
    max_in_flight: int
    mean_in_flight: float  # time-weighted, over the busy time
    busy_ns: int
    # share_by_level[k - 1]: the share of the busy time with exactly k spans in flight, k = 1 … max.
    share_by_level: tuple[float, ...]
    share_at_max: float
    # time at max ÷ time at max − 1 (None when the max is 1: no level below it to compare)
    plateau_ratio: float | None
    plateau: bool


def sweep(starts_ns: Sequence[int] | np.ndarray, ends_ns: Sequence[int] | np.ndarray) -> Concurrency:
    """The in-flight count over time. A span that ends when another starts does not overlap it
    (ends are applied before starts at equal times), so back-to-back calls are never concurrent."""
    starts = np.asarray(starts_ns, dtype=np.int64)
    ends = np.asarray(ends_ns, dtype=np.int64)
    n = len(starts)
    # A zero-length span overlaps nothing (and its end, applied before its start, would dip below 0).
    timed = ends > starts
    starts, ends = starts[timed], ends[timed]
    if len(starts) == 0:
        return Concurrency(n, 0, 0.0, 0, (), 0.0, None, False)
    m = len(starts)
    times = np.concatenate([ends, starts])
    steps = np.concatenate([-np.ones(m, dtype=np.int64), np.ones(m, dtype=np.int64)])
    order = np.lexsort((steps, times))  # by time, then -1 before +1
    times, steps = times[order], steps[order]
    level = np.cumsum(steps)  # in flight after each event
    held_ns = np.diff(times)  # how long each level after an event lasted
    max_in_flight = int(level.max())
    time_at = np.bincount(level[:-1], weights=held_ns, minlength=max_in_flight + 1)
    busy_ns = int(time_at[1:].sum())
    shares = tuple(float(t) / busy_ns for t in time_at[1:])
    mean = float(np.dot(np.arange(1, max_in_flight + 1), time_at[1:]) / busy_ns)
    at_max = shares[-1]
    ratio = at_max / shares[-2] if max_in_flight >= 2 and shares[-2] > 0 else None
    plateau = ratio is not None and ratio >= PLATEAU_RATIO
    return Concurrency(n, max_in_flight, mean, busy_ns, shares, at_max, ratio, plateau)
