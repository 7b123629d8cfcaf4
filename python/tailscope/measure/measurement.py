"""Typed views of what an engine's result document measured (docs/formats.md), and the flags
that say which points a finding may compare without a caveat."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from tailscope.measure.intervals import QuantileInterval, from_latency, percentile_key_q

T = TypeVar("T")


def achieved_per_s(doc: dict) -> float:
    """tailscope-load's achieved rate; 0.0 when the run served nothing (or no load section)."""
    return float(doc.get("load", {}).get("achieved_per_s") or 0.0)


@dataclass(frozen=True)
class Measurement:
    """One entry of a result document's `measurements` (docs/formats.md), typed."""

    name: str
    variant: str
    count: int
    mean_ns: float | None
    percentiles_ns: dict[str, float]
    low_confidence: frozenset[str]
    cdf: list[tuple[float, float]]  # (value_ns, percentile 0..100)
    raw: dict
    # Per percentile key, its 95 % interval or why there is none (docs/formats.md `percentile_ci`).
    intervals: dict[str, QuantileInterval] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, m: dict) -> Measurement:
        lat = m.get("latency") or {}
        return cls(
            name=str(m.get("name", "")),
            variant=str(m.get("variant", "")),
            count=int(lat.get("count") or 0),
            mean_ns=None if lat.get("mean") is None else float(lat["mean"]),
            percentiles_ns={k: float(v) for k, v in (lat.get("percentiles") or {}).items() if v is not None},
            low_confidence=frozenset(lat.get("low_confidence") or ()),
            cdf=[(float(v), float(p)) for v, p in m.get("cdf") or []],
            raw=m,
            intervals={
                k: from_latency(lat, k) for k in lat.get("percentiles") or {} if percentile_key_q(k) is not None
            },
        )

    def p_ns(self, key: str) -> float | None:
        """Percentile `key` ("50", "99", "99.9" ...) in ns, or None if the document lacks it."""
        return self.percentiles_ns.get(key)

    def interval(self, key: str) -> QuantileInterval:
        """Percentile `key` with its 95 % interval as the engine wrote it (`percentile_ci`), or
        unavailable with the engine's reason (too few samples; a document older than intervals)."""
        return self.intervals.get(key) or from_latency(self.raw.get("latency") or {}, key)


def measurements(doc: dict | None) -> list[Measurement]:
    return [Measurement.from_dict(m) for m in (doc or {}).get("measurements", []) if isinstance(m, dict)]


def measurement(doc: dict | None, name: str, variant: str | None = None) -> Measurement | None:
    """The first measurement called `name` (and `variant`, if given), or None."""
    for m in (doc or {}).get("measurements", []):
        if isinstance(m, dict) and m.get("name") == name and (variant is None or m.get("variant", "") == variant):
            return Measurement.from_dict(m)
    return None


def point_flags(point: dict) -> list[str]:
    """Why a study flagged a point (saturated, generator-limited, errors ...), from the point itself:
    its `flags` list, and `saturated` / `why_saturated` of an engine measurement. Empty: clean."""
    flags = [str(f) for f in point.get("flags") or []]
    if point.get("saturated"):
        why = [str(w) for w in (point.get("observed") or {}).get("why_saturated") or point.get("why_saturated") or []]
        flags.append("saturated" + (f" ({', '.join(why)})" if why else ""))
    if point.get("generator_limited"):
        flags.append("generator-limited")
    return flags


def unflagged(points: Iterable[T], flags: Callable[[T], Sequence[str]]) -> list[T]:
    """The points a finding may compare without a caveat."""
    return [p for p in points if not flags(p)]


# Descriptors the load generator needs besides its connections.
FD_MARGIN = 64


def connection_flags(doc: dict, users: int, nofile_hard: int) -> list[str]:
    """Why a point did not measure what it asked for (the users' count, errors) — flagged, never hidden."""
    load = doc.get("load", {})
    flags = []
    if users + FD_MARGIN > nofile_hard:
        flags.append(f"{users} users need more descriptors than the hard RLIMIT_NOFILE ({nofile_hard})")
    if (load.get("connections_established") or 0) < users or (load.get("errors") or {}).get("connect"):
        flags.append(
            f"only {load.get('connections_established')} of {users} connections were established "
            f"({(load.get('errors') or {}).get('connect', 0)} connect errors)"
        )
    if load.get("errors_total"):
        flags.append(f"{load['errors_total']} errors: {json.dumps(load.get('errors'))}")
    return flags
