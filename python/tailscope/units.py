"""Formatting durations and counts for people (the store keeps raw ns)."""

from __future__ import annotations

import math


def fmt_ns(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    v = float(value)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} ns"


def fmt_ns_interval(lo_ns: float, hi_ns: float) -> str:
    """A compact interval in one unit, the unit of its larger end: "[0.983–1.35 ms]"."""
    top = max(abs(lo_ns), abs(hi_ns))
    unit, scale = next(((u, s) for u, s in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)) if top >= s), ("ns", 1.0))
    return f"[{lo_ns / scale:.3g}–{hi_ns / scale:.3g} {unit}]"


def fmt_ratio(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    if value >= 1000:
        return f"{value:,.0f}×".replace(",", "\u2009")
    return f"{value:.3g}×"


def fmt_count(n: int | float | None) -> str:
    if n is None:
        return "—"
    n = int(n)
    return f"{n:,}".replace(",", "\u2009")  # thin space: readable, unambiguous
