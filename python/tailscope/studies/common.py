"""What several studies need, written once: rates, CPUs, pinning text,
unavailable notes, typed access to the measurements of a result document
(docs/formats.md), finding a stored engine document, building plot series.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tailscope.lab.stores import DEFAULT_STORE_MODE, NO_STORES_REASON, stores_of
from tailscope.measure.intervals import QuantileInterval
from tailscope.measure.verdict import IntervalVerdict
from tailscope.report.blocks import Section
from tailscope.store import EngineDocument, Store
from tailscope.units import fmt_count, fmt_ns, fmt_ns_interval

if TYPE_CHECKING:
    from tailscope.studies.base import RunContext

T = TypeVar("T")


# ---- rates -----------------------------------------------------------------------


def round_rate(rate_per_s: float, digits: int = 2) -> float:
    """Rounds down to `digits` significant digits, so a derived rate reads as a round
    number (and never exceeds what it was derived from)."""
    if rate_per_s <= 0:
        return 0.0
    mag = 10 ** (int(math.floor(math.log10(rate_per_s))) - digits + 1)
    return math.floor(rate_per_s / mag) * mag


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


# ---- progress -----------------------------------------------------------------------------


class StepProgress:
    """A study's progress bar counted in steps: each call names the step about to start and moves
    the bar to the share of `total_steps` done so far (never past 1)."""

    def __init__(self, ctx: RunContext, study: str, total_steps: int):
        self._ctx, self._study, self._total, self.done = ctx, study, max(1, total_steps), 0

    def __call__(self, what: str) -> None:
        self._ctx.progress(f"{self._study}: {what}", min(self.done / self._total, 1.0))
        self.done += 1


# ---- pinning -------------------------------------------------------------------------


def pinning_text(server: str, server_cpu: object, client: str, client_cpu: object) -> str:
    """The caption prefix every pinned figure carries (measurement rules: say where things ran)."""
    return f"{server} pinned to CPU {server_cpu}, {client} to CPU {client_cpu}"


# ---- stores (issue 27) -------------------------------------------------------------------


def front_requests(services: Mapping[str, Any], front: str) -> int | None:
    """Requests the graph's front received over its life (its result document's counters): the
    divisor of CPU per request, since every one of them came from the load run. None: the front
    wrote no document."""
    if front not in services:
        return None
    return int((services[front].get("counters") or {}).get("requests") or 0)


def requested_stores(options: Mapping[str, Any]) -> str:
    """The run's --stores (real | simulated | auto): what every graph a study starts is asked for."""
    return str(options.get("stores") or DEFAULT_STORE_MODE)


def record_stores(doc: dict, ready: Mapping[str, Any]) -> dict:
    """Records in a study document what the graph it measured ran on (mode, reason, servers): the
    ready line's `stores` object as graph() normalised it. A document the engine already gave its own
    `stores` object (the merged graph document, with the servers' CPU) keeps it. The graph's work mode
    (`--work`: real work or the busy loops, docs/microservices.md) is recorded beside it the same way:
    the engine's own `work` object is kept, else the ready line's mode. Returns `doc`."""
    doc.setdefault("stores", ready.get("stores") or stores_of(ready).record())
    doc.setdefault("work", {"mode": str(ready.get("work") or "real")})
    return doc


def stores_text(mode: str, reason: str) -> str:
    """The one wording of a stores mode: "real" (its reason is only which binaries were found), or
    "simulated (reason)" — a simulated store's figures are read differently, so the why is always said."""
    return mode if mode == "real" else f"{mode} ({reason})"


def stores_line(docs: Iterable[Mapping[str, Any]]) -> str:
    """What a graph study's section says its stores were: "stores: real", "stores: simulated (reason)",
    or both when the study's graphs differed (a server that went missing mid-run under auto). Documents
    that record nothing (a baseline run, a stress kernel) are skipped; when none records a mode the
    graphs ran on an engine from before real stores, whose stores were all simulated."""
    seen: dict[tuple[str, str], None] = {}
    for d in docs:
        if "stores" not in d:
            continue
        # Only mode and reason: the merged graph document's servers carry the engine's CPU figures,
        # not the ready line's fields, and the section needs neither.
        raw = d["stores"]
        # A per-service document records only the mode, as a string (docs/stores.md).
        raw = {"mode": raw, "reason": "a service document names no reason"} if isinstance(raw, str) else raw
        mode = raw.get("mode") if isinstance(raw, Mapping) else None
        if mode not in ("real", "simulated"):
            seen[("unreadable", f"a document records stores.mode {mode!r}")] = None
            continue
        if mode == "real":
            # What the merged graph document adds (docs/stores.md): a store died mid-run, or some
            # services (a model without store clients) ran their store stages simulated.
            notes = [str(raw["flagged"])] if raw.get("flagged") else []
            if raw.get("services_simulated"):
                notes.append(f"services on simulated stores: {', '.join(map(str, raw['services_simulated']))}")
            why = "; ".join(notes)
        else:
            why = str(raw.get("reason") or "no reason recorded")
        seen[(mode, why)] = None
    if not seen:
        seen[("simulated", NO_STORES_REASON)] = None
    return "stores: " + "; ".join(f"{mode} ({why})" if why else mode for mode, why in seen)


# ---- notes ------------------------------------------------------------------------------


def study_section(
    study: Any, store: Store, run_id: str, intro: str, section_id: str | None = None, graphs: bool = False
) -> Section:
    """A study's report section, opened with the notes of every figure it could not measure; a study
    that runs the microservice graphs (`graphs`) opens with what its stores were (stores_line)."""
    sec = Section(section_id or study.name, study.title, intro)
    if graphs:
        sec.notes.append(stores_line(d.document for d in store.documents(run_id, study.name)))
    sec.notes += unavailable_notes(store, run_id, study.name)
    return sec


def unavailable_notes(store: Store, run_id: str, study: str) -> list[str]:
    """One note per figure the study could not measure, with the reason (never a zero)."""
    notes = []
    for s, name, variant, reason in store.unavailable(run_id):
        if s == study:
            notes.append(f"{name} ({variant}) unavailable: {reason}" if variant else f"{name} unavailable: {reason}")
    return notes


# ---- flagged points: what a finding may cite ------------------------------------------------


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


# A percentile with fewer than 10 samples beyond it: its interval's upper end is one of those few
# samples, so the report calls it unavailable rather than show a bound that a handful of samples set.
FEW_BEYOND = "unavailable (n beyond < 10)"


def interval_cell(i: QuantileInterval | None, few_beyond: bool) -> str:
    """A percentile's 95 % interval for a table: "[lo–hi]"; "[unavailable (n beyond < 10)]" when fewer
    than 10 samples lie beyond the percentile; "[—]" when there is none (too few samples for one, or a
    document from before intervals; the table's caption says which)."""
    if few_beyond:
        return f"[{FEW_BEYOND}]"
    if i is None or i.lo_ns is None or i.hi_ns is None:
        return "[—]"
    return fmt_ns_interval(i.lo_ns, i.hi_ns)


def error_bar(i: QuantileInterval | None, few_beyond: bool) -> tuple[float, float] | None:
    """A percentile's interval as a figure's error bar (lo_ns, hi_ns), under the rule interval_cell
    follows: none without an interval, and none with fewer than 10 samples beyond the percentile."""
    if few_beyond or i is None or i.lo_ns is None or i.hi_ns is None:
        return None
    return (i.lo_ns, i.hi_ns)


def length_to_decide_text(v: IntervalVerdict, unit: str = "samples") -> str:
    """How long a run would decide an undecided verdict, in words (or why no length would)."""
    if v.length_factor is None:
        return v.why_no_length
    at = f", ~{v.seconds_to_decide:.0f} s" if v.seconds_to_decide is not None else ""
    return f"a run {v.length_factor:.1f}× as long ({fmt_count(v.samples_to_decide)} {unit}{at}) would decide it"


# The headers of latency_cells' columns, in the same order.
LATENCY_COLUMNS = ["mean", "p50", "p90", "p99", "p99.9", "samples"]


def latency_cells(
    mean_ns: float | None,
    p50_ns: float | None,
    p90_ns: float | None,
    p99_ns: float | None,
    p999_ns: float | None,
    count: int | float | None,
    low_confidence: Iterable[str],
    intervals: Mapping[str, QuantileInterval] | None = None,
) -> list[str]:
    """The latency columns every study table shows (mean, p50, p90, p99, p99.9, samples);
    a percentile with too few samples beyond it is marked " *" (docs/measurement.md).

    With `intervals` (percentile key → its 95 % interval, e.g. a point's Measurement.intervals) the
    tail cells, p99 and p99.9, add theirs (interval_cell) in place of the mark: the tail is where a
    table's readers compare figures, and two more brackets per row keep the table readable."""
    low = set(low_confidence)

    def tail(value_ns: float | None, key: str) -> str:
        if intervals is None or value_ns is None:
            return fmt_ns(value_ns) + (" *" if key in low else "")
        return fmt_ns(value_ns) + " " + interval_cell(intervals.get(key), key in low)

    return [
        fmt_ns(mean_ns),
        fmt_ns(p50_ns),
        fmt_ns(p90_ns),
        tail(p99_ns, "99"),
        tail(p999_ns, "99.9"),
        fmt_count(count),
    ]
