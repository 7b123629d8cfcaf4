"""What several studies need, written once: rates, CPUs, pinning text,
unavailable notes, typed access to the measurements of a result document
(docs/formats.md), finding a stored engine document, building plot series.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..report.blocks import Section
from ..store import EngineDocument, Store

if TYPE_CHECKING:
    from . import RunContext

T = TypeVar("T")


# ---- rates -----------------------------------------------------------------------


def round_rate(rate_per_s: float, digits: int = 2) -> float:
    """Rounds down to `digits` significant digits, so a derived rate reads as a round
    number (and never exceeds what it was derived from)."""
    if rate_per_s <= 0:
        return 0.0
    mag = 10 ** (int(math.floor(math.log10(rate_per_s))) - digits + 1)
    return math.floor(rate_per_s / mag) * mag


def achieved_per_s(doc: dict) -> float:
    """tailscope-load's achieved rate; 0.0 when the run served nothing (or no load section)."""
    return float(doc.get("load", {}).get("achieved_per_s") or 0.0)


# ---- how long a point runs ------------------------------------------------------------


def run_scale(options: dict) -> float:
    """The run's --scale (1.0 unless given): every sample count and window is multiplied by it."""
    return float(options.get("scale") or 1.0)


def point_times(
    ctx: RunContext,
    quick: tuple[float, float],
    full: tuple[float, float],
    floor: tuple[float, float],
) -> tuple[float, float]:
    """(window_s, warmup_s) of one measured point: the form's (window, warm-up) times the run's
    --scale, never below `floor` (the shortest window and warm-up the study still reads)."""
    scale = run_scale(ctx.options)
    window, warmup = full if ctx.form == "full" else quick
    return max(floor[0], window * scale), max(floor[1], warmup * scale)


# ---- CPUs and pinning ---------------------------------------------------------------


def requested_cpus(options: dict) -> tuple[int, int] | None:
    """(client_cpu, server_cpu) from `--cpus CLIENT,SERVER` (checked by the CLI), or None."""
    text = options.get("cpus")
    if not text:
        return None
    client, server = (int(x) for x in str(text).split(",")[:2])
    return client, server


def cpu_pair(options: dict) -> tuple[int, int]:
    """--cpus CLIENT,SERVER, else the first and the last CPU this process may use."""
    requested = requested_cpus(options)
    if requested is not None:
        return requested
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[0], cpus[-1]


# How the load generator paces when it has a core of its own (docs/load-generator.md,
# "Pacing"): "busy-poll" never sleeps, so no wake-up latency (tens of µs on a shared VM)
# lands in the send lag the self-check compares with the server's latency; "sleep" sleeps
# until --spin-us before each send (the engine's default). Recorded in every document
# (config.busy_poll, config.spin_us); chosen with the `load_pacing` option.
LOAD_PACINGS = ("busy-poll", "sleep")


def load_pacing(options: dict) -> str:
    """The pacing a study asked for (`load_pacing` option), busy-poll unless told otherwise."""
    pacing = str(options.get("load_pacing") or "busy-poll")
    if pacing not in LOAD_PACINGS:
        raise ValueError(f"load_pacing: '{pacing}' is not one of {', '.join(LOAD_PACINGS)}")
    return pacing


def load_pacing_args(pacing: str) -> list[str]:
    """tailscope-load flags for `pacing` (only for a generator pinned to cores the server does not use)."""
    return ["--busy-poll"] if pacing == "busy-poll" else []


def pinning_text(server: str, server_cpu: object, client: str, client_cpu: object) -> str:
    """The caption prefix every pinned figure carries (measurement rules: say where things ran)."""
    return f"{server} pinned to CPU {server_cpu}, {client} to CPU {client_cpu}"


# ---- notes ------------------------------------------------------------------------------


def study_section(study: Any, store: Store, run_id: str, intro: str, section_id: str | None = None) -> Section:
    """A study's report section, opened with the notes of every figure it could not measure."""
    sec = Section(section_id or study.name, study.title, intro)
    sec.notes += unavailable_notes(store, run_id, study.name)
    return sec


def unavailable_notes(store: Store, run_id: str, study: str) -> list[str]:
    """One note per figure the study could not measure, with the reason (never a zero)."""
    notes = []
    for s, name, variant, reason in store.unavailable(run_id):
        if s == study:
            notes.append(f"{name} ({variant}) unavailable: {reason}" if variant else f"{name} unavailable: {reason}")
    return notes


# ---- measurements ---------------------------------------------------------------------------


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
        )

    def p_ns(self, key: str) -> float | None:
        """Percentile `key` ("50", "99", "99.9" ...) in ns, or None if the document lacks it."""
        return self.percentiles_ns.get(key)


def measurements(doc: dict | None) -> list[Measurement]:
    return [Measurement.from_dict(m) for m in (doc or {}).get("measurements", []) if isinstance(m, dict)]


def measurement(doc: dict | None, name: str, variant: str | None = None) -> Measurement | None:
    """The first measurement called `name` (and `variant`, if given), or None."""
    for m in (doc or {}).get("measurements", []):
        if isinstance(m, dict) and m.get("name") == name and (variant is None or m.get("variant", "") == variant):
            return Measurement.from_dict(m)
    return None


# ---- flagged points: what a finding may cite ------------------------------------------------


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


def cite(label: str, flags: Sequence[str]) -> str:
    """How a finding names a point: a flagged point always carries its flags (the house rule: a
    finding never cites a flagged point without saying so)."""
    return f"{label} [flagged: {'; '.join(flags)}]" if flags else label


# ---- stored documents and series -------------------------------------------------------------


def find_document(
    docs: Iterable[EngineDocument], *, engine: str | None = None, point_prefix: str | None = None
) -> EngineDocument | None:
    """The first stored document of `engine` whose point starts with `point_prefix`."""
    for d in docs:
        if engine is not None and d.engine != engine:
            continue
        if point_prefix is not None and not d.point.startswith(point_prefix):
            continue
        return d
    return None


def series(
    points: Sequence[T], select: Callable[[T], bool], x: Callable[[T], float], y: Callable[[T], Any]
) -> tuple[list[float], list[Any]]:
    """(xs, ys) of the selected points, sorted by x: one line of a plot."""
    chosen = sorted((p for p in points if select(p)), key=x)
    return [x(p) for p in chosen], [y(p) for p in chosen]


def http_load_args(
    port: int,
    path: str,
    connections: int,
    rate_per_s: float,
    duration_s: float,
    warmup_s: float,
    *,
    timeout: str,
    cpus: list[int] | None = None,
) -> list[str]:
    """tailscope-load flags for one HTTP run against a graph's front (one load thread,
    keep-alive connections; rate 0 = closed loop). Errors are counted, not fatal: a
    study sweeping into overload reads them from the document."""
    args = ["-t", "1", "-c", str(connections), "-d", f"{duration_s:.3f}", "--warmup", f"{warmup_s:.3f}"]
    args += ["-R", f"{rate_per_s:.0f}", "--protocol", "http", "--port", str(port), "--path", path]
    args += ["--timeout", timeout, "--allow-errors"]
    if cpus:
        args += ["--cpus", ",".join(map(str, cpus))]
    return args


# The headers of latency_cells' columns, in the same order.
LATENCY_COLUMNS = ["mean", "p50", "p90", "p99", "p99.9", "samples"]


def latency_cells(
    mean_ns: float | None,
    p50_ns: float | None,
    p90_ns: float | None,
    p99_ns: float | None,
    p999_ns: float | None,
    count: int | float,
    low_confidence: Iterable[str],
) -> list[str]:
    """The latency columns every study table shows (mean, p50, p90, p99, p99.9, samples);
    a percentile with too few samples beyond it is marked " *" (docs/measurement.md)."""
    from ..units import fmt_count, fmt_ns

    low = set(low_confidence)
    return [
        fmt_ns(mean_ns),
        fmt_ns(p50_ns),
        fmt_ns(p90_ns),
        fmt_ns(p99_ns) + (" *" if "99" in low else ""),
        fmt_ns(p999_ns) + (" *" if "99.9" in low else ""),
        fmt_count(count),
    ]
