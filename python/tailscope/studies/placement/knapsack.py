"""0-1 knapsack, exact, by dynamic programming: which services go on the performance pool.

The placement study (docs/placement-study.md) gives each service a *weight* — the CPU it needs
under the study's load, in integer millicores (peak CPU % × 10, rounded up) — and a *value* — its
sensitivity score (how much it slows down under interference). The performance pool has a
capacity in the same unit (its CPUs × 1000). The knapsack picks the set of services with the
greatest total score whose total need fits the pool; the rest share the general pool.

Own code, not a solver library: the instances are tiny (≤ a few dozen services, capacity ≤ a few
hundred thousand millicores) and the table is the whole algorithm. `O(n × capacity)` time; the
choice is recovered from a keep-table of booleans, so memory is `n × (capacity + 1)` bytes.

Exactness: values are floats, but the DP compares sums of the same values added in the same
order, and ties (equal best value) are broken deterministically: the smaller total weight wins,
then the earlier items in input order — the same input always gives the same placement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# A table of n × (capacity + 1) cells beyond this is refused (a unit slip, not a placement).
MAX_TABLE_CELLS = 50_000_000


@dataclass(frozen=True)
class Item:
    name: str
    weight: int  # e.g. millicores needed; ≥ 0
    value: float  # e.g. sensitivity score; finite, ≥ 0 (a negative value is never worth taking)


@dataclass(frozen=True)
class Choice:
    chosen: tuple[str, ...]  # names, in input order
    value: float
    weight: int
    capacity: int


def _check(items: Sequence[Item], capacity: int) -> None:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise ValueError(f"knapsack capacity must be an integer ≥ 0 (got {capacity!r})")
    names = set()
    for it in items:
        if isinstance(it.weight, bool) or not isinstance(it.weight, int) or it.weight < 0:
            raise ValueError(f"knapsack item '{it.name}': weight must be an integer ≥ 0 (got {it.weight!r})")
        if not isinstance(it.value, (int, float)) or not math.isfinite(it.value):
            raise ValueError(f"knapsack item '{it.name}': value must be a finite number (got {it.value!r})")
        if it.name in names:
            raise ValueError(f"knapsack item '{it.name}' appears twice")
        names.add(it.name)
    if len(items) * (capacity + 1) > MAX_TABLE_CELLS:
        raise ValueError(
            f"knapsack of {len(items)} items × capacity {capacity} needs a table of more than "
            f"{MAX_TABLE_CELLS} cells: use a coarser weight unit"
        )


def solve(items: Sequence[Item], capacity: int) -> Choice:
    """The subset of `items` of greatest total value with total weight ≤ capacity."""
    _check(items, capacity)
    # best[w] = (value, -weight) of the best subset of the items seen so far with weight ≤ w.
    # Comparing (value, -weight) tuples breaks value ties towards the lighter subset.
    best: list[tuple[float, int]] = [(0.0, 0)] * (capacity + 1)
    keep: list[bytearray] = []
    for it in items:
        row = bytearray(capacity + 1)
        if it.value > 0 and it.weight <= capacity:
            new = best[:]
            for w in range(it.weight, capacity + 1):
                v, negw = best[w - it.weight]
                cand = (v + it.value, negw - it.weight)
                if cand > best[w]:
                    new[w] = cand
                    row[w] = 1
            best = new
        keep.append(row)
    # Walk back from the full capacity: the lightest way to reach the best value.
    chosen: list[int] = []
    w = capacity
    for i in range(len(items) - 1, -1, -1):
        if keep[i][w]:
            chosen.append(i)
            w -= items[i].weight
    chosen.reverse()
    return Choice(
        chosen=tuple(items[i].name for i in chosen),
        value=sum(items[i].value for i in chosen),
        weight=sum(items[i].weight for i in chosen),
        capacity=capacity,
    )


def brute_force(items: Sequence[Item], capacity: int) -> Choice:
    """Every subset (2^n): the reference the tests hold `solve` to. n ≤ 20."""
    _check(items, capacity)
    if len(items) > 20:
        raise ValueError("brute_force: at most 20 items")
    best: tuple[float, int] | None = None
    best_mask = 0
    for mask in range(1 << len(items)):
        w = sum(items[i].weight for i in range(len(items)) if mask >> i & 1)
        if w > capacity:
            continue
        v = sum(items[i].value for i in range(len(items)) if mask >> i & 1)
        if best is None or (v, -w) > best:
            best, best_mask = (v, -w), mask
    idx = [i for i in range(len(items)) if best_mask >> i & 1]
    return Choice(
        chosen=tuple(items[i].name for i in idx),
        value=sum(items[i].value for i in idx),
        weight=sum(items[i].weight for i in idx),
        capacity=capacity,
    )
