"""What the `async` study's documents say, as values: the references, each figure's and table's
numbers, every verdict (target met or not, which point is lowest, whether a payload changed a delay,
whether the capstone's Figures 12 and 13/14 hold here). Pure functions of the stored documents
(dicts); no sentences, no figures — section.py renders these values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tailscope.measure.measurement import point_flags, unflagged
from tailscope.report.blocks import DOES_NOT_HOLD, HOLDS, PARTLY, UNAVAILABLE

BASELINE = "tailscope-baseline"
ENGINE = "tailscope-asyncbench"
REFERENCES = ["condvar_handoff", "spin_handoff", "thread_create"]
MODEL_ORDER = ["deferred", "std-async", "std-thread", "fixed-pool", "spin-pool", "work-stealing", "coroutine"]
DELAYS = [("scheduling_delay", "Scheduling delay"), ("join_delay", "Join delay"), ("total", "Total")]
# (label, numerator model, mechanisms tried in order, reference, limit)
TARGETS = [
    (
        "fixed-pool p50 scheduling delay ÷ condvar hand-off p50",
        "fixed-pool",
        ["future", "continuation"],
        "condvar_handoff",
        1.5,
    ),
    (
        "spin-pool p50 scheduling delay ÷ spin hand-off p50",
        "spin-pool",
        ["future", "continuation"],
        "spin_handoff",
        3.0,
    ),
]
RESUME_TARGET_NS = 50.0
COMMON_RATE = "payload_common_rate"  # the engine's series of the payload comparison
PAYLOAD_ORDER = ["void", "long_long", "vector10000"]
# A payload changes a delay when its p50 moves by at least this factor from void to the largest
# payload: the rule this report applies, stated with every verdict.
PAYLOAD_CHANGE = 1.5
# A share of the point (calls stalled, workers waiting on a run queue) above this is named in a
# point's reading; below it, it is noise beside the queueing.
NOTABLE_SHARE = 0.05
# Parks per call from which the hand-off is read as a kernel wake-up per call.
PARKS_PER_CALL_WAKEUP = 0.5


# ---- data access -------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """One pinned baseline reference of the run: its p50 and how many samples it rests on."""

    p50_ns: float
    samples: int


def references(baseline_docs: Iterable[dict]) -> dict[str, Ref]:
    """Pinned baseline references from tailscope-baseline documents, in the order given (the
    study's own baseline document first, then the `baseline` study's, if it ran): the first
    document that has a reference wins."""
    out: dict[str, Ref] = {}
    for doc in baseline_docs:
        for m in doc.get("measurements", []):
            if m.get("variant") == "pinned" and m["name"] in REFERENCES and m["name"] not in out:
                out[m["name"]] = Ref(float(m["latency"]["percentiles"]["50"]), int(m["latency"]["count"]))
    return out


class BenchData:
    """A tailscope-asyncbench document, read by load, delay, model, mechanism and payload."""

    def __init__(self, doc: dict):
        self.doc = doc
        cfg = doc.get("config", {})
        self.main_load = float(cfg.get("measure_at_pct", 75))
        self.sweep_payload = cfg.get("sweep_payload", "long_long")
        self.measurements = doc.get("measurements", [])
        self.max_rates: dict[str, float] = doc.get("max_rate_per_s", {})

    def at(self, load: float, name: str | None = None, payload: str | None = None) -> list[dict]:
        out = []
        for m in self.measurements:
            if m.get("series") == COMMON_RATE:
                continue
            if m.get("load_pct") is None or abs(float(m["load_pct"]) - load) > 1e-6:
                continue
            if name and m["name"] != name:
                continue
            if payload and m.get("payload") != payload:
                continue
            out.append(m)
        return sorted(out, key=_variant_key)

    def one(self, load: float, name: str, model: str, mechanism: str, payload: str) -> dict | None:
        for m in self.at(load, name, payload):
            if m.get("model") == model and m.get("mechanism") == mechanism:
                return m
        return None

    def loads(self) -> list[float]:
        return sorted(
            {
                float(m["load_pct"])
                for m in self.measurements
                if m.get("load_pct") is not None and m.get("series") != COMMON_RATE
            }
        )

    def common_rate(self, name: str) -> list[dict]:
        """The payload comparison: `name` of every payload at the rate all payloads of a model sustain."""
        return sorted(
            (m for m in self.measurements if m.get("series") == COMMON_RATE and m["name"] == name), key=_variant_key
        )

    def resume(self) -> dict | None:
        return next((m for m in self.measurements if m["name"] == "same_thread_resume"), None)

    def shown_loads(self) -> list[float]:
        """The loads the backlog and target tables show: the lowest of the sweep and the main load."""
        loads = self.loads()
        return sorted({loads[0] if loads else self.main_load, self.main_load})


def _variant_key(m: dict):
    model = m.get("model", "")
    return (MODEL_ORDER.index(model) if model in MODEL_ORDER else 99, m.get("mechanism", ""), m.get("payload", ""))


def _model_key(model: str) -> int:
    return MODEL_ORDER.index(model) if model in MODEL_ORDER else 99


def _payload_key(p: str) -> tuple[int, str]:
    return (PAYLOAD_ORDER.index(p) if p in PAYLOAD_ORDER else len(PAYLOAD_ORDER), p)


def _p(m: dict, key: str) -> float:
    return float(m["latency"]["percentiles"][key])


def ratio_to(v: float | None, ref: Ref | None) -> float | None:
    """`v` ÷ the reference's p50; None without a value or a reference."""
    if v is None or ref is None or not ref.p50_ns:
        return None
    return v / ref.p50_ns


def variant(m: dict) -> str:
    """How a point is named: model/mechanism."""
    return f"{m.get('model')}/{m.get('mechanism')}"


def _backlog(m: dict) -> dict:
    return m.get("observed", {}).get("backlog", {}) or {}


def runqueue_share(b: dict) -> float | None:
    """Share of the point the pool's workers spent runnable but waiting for a CPU."""
    sched = b.get("sched") or {}
    w, window = sched.get("workers"), sched.get("window_ns")
    if not w or not window:
        return None
    return float(w["runqueue_wait_ns"]) / (float(window) * max(1, int(w.get("threads", 1))))


# ---- where the threads ran -------------------------------------------------------


@dataclass(frozen=True)
class Pinning:
    """Where the engine ran its threads (its config)."""

    pinned: bool
    producer_cpu: object = None
    consumer_cpu: object = None
    workers: object = None
    worker_cpus: object = None


def pinning(doc: dict) -> Pinning:
    cfg = doc.get("config", {})
    if cfg.get("placement") != "pinned":
        return Pinning(False)
    return Pinning(True, cfg.get("producer_cpu"), cfg.get("consumer_cpu"), cfg.get("workers"), cfg.get("worker_cpus"))


# ---- one delay per model: the CDF figures -------------------------------------------


@dataclass(frozen=True)
class DelayCurve:
    """One model/mechanism's distribution of a delay: (value_ns, percentile) points."""

    model: str
    mechanism: str | None
    cdf: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class DelayExtremes:
    """Lowest and highest p50 among the points; flagged points are left out (and counted), so a
    saturated point's queueing is never read as the model's cost. `lowest`/`highest` are None when
    every point was flagged."""

    left_out: int
    lowest: str | None = None  # model/mechanism
    lowest_p50_ns: float | None = None
    lowest_to_condvar: float | None = None  # None without a condvar hand-off reference
    highest: str | None = None
    highest_p50_ns: float | None = None
    highest_to_lowest: float | None = None


@dataclass(frozen=True)
class DelayPanel:
    """One delay of every model/mechanism at the main load, with the sweep payload."""

    delay: str
    curves: tuple[DelayCurve, ...]
    samples: int
    extremes: DelayExtremes


def delay_extremes(rows: list[dict], refs: Mapping[str, Ref]) -> DelayExtremes:
    clean = unflagged(rows, point_flags)
    left_out = len(rows) - len(clean)
    if not clean:
        return DelayExtremes(left_out)
    best = min(clean, key=lambda m: _p(m, "50"))
    worst = max(clean, key=lambda m: _p(m, "50"))
    return DelayExtremes(
        left_out,
        variant(best),
        _p(best, "50"),
        ratio_to(_p(best, "50"), refs.get("condvar_handoff")),
        variant(worst),
        _p(worst, "50"),
        _p(worst, "50") / max(_p(best, "50"), 1.0),
    )


def delay_panel(data: BenchData, delay: str, refs: Mapping[str, Ref]) -> DelayPanel | None:
    """None when the delay was not measured at the main load."""
    rows = data.at(data.main_load, delay, data.sweep_payload)
    if not rows:
        return None
    return DelayPanel(
        delay,
        tuple(
            DelayCurve(m["model"], m.get("mechanism"), tuple((float(v), float(p)) for v, p in m["cdf"])) for m in rows
        ),
        sum(int(m["latency"]["count"]) for m in rows),
        delay_extremes(rows, refs),
    )


# ---- the payload comparison (capstone Figures 13/14) ------------------------------------

# Why a payload change has no variant to name (PayloadChange.unavailable).
ONE_PAYLOAD = "one payload"  # no model was measured with more than one payload
NO_UNFLAGGED_PAIR = "no unflagged pair"  # every pair had a flagged point (or a zero p50)


@dataclass(frozen=True)
class PayloadChange:
    """The biggest change of p50 `delay` from the smallest to the largest payload of one
    model/mechanism, from unflagged points only; a pair with a flagged point is never compared."""

    delay: str
    small: str | None  # the smallest and largest payload measured
    large: str | None
    flagged_pairs: int  # pairs left out because a point of them was flagged
    variant: str | None = None  # model/mechanism; None when unavailable
    small_p50_ns: float | None = None
    large_p50_ns: float | None = None
    ratio: float | None = None  # large ÷ small
    unavailable: str | None = None  # ONE_PAYLOAD or NO_UNFLAGGED_PAIR


def payload_change(rows: list[dict], delay: str) -> PayloadChange:
    payloads = sorted({str(m.get("payload")) for m in rows}, key=_payload_key)
    if len(payloads) < 2:
        return PayloadChange(delay, None, None, 0, unavailable=ONE_PAYLOAD)
    small, large = payloads[0], payloads[-1]
    by = {(m["model"], m["mechanism"], m.get("payload")): m for m in rows}
    biggest: tuple[float, str, float, float] | None = None
    flagged_pairs = 0
    for model, mech in sorted({(m["model"], m["mechanism"]) for m in rows}):
        ma, mb = by.get((model, mech, small)), by.get((model, mech, large))
        if not ma or not mb:
            continue
        if point_flags(ma) or point_flags(mb):
            flagged_pairs += 1
            continue
        if _p(ma, "50") > 0 and _p(mb, "50") > 0:
            r = _p(mb, "50") / _p(ma, "50")
            if biggest is None or abs(math.log(r)) > abs(math.log(biggest[0])):
                biggest = (r, f"{model}/{mech}", _p(ma, "50"), _p(mb, "50"))
    if biggest is None:
        return PayloadChange(delay, small, large, flagged_pairs, unavailable=NO_UNFLAGGED_PAIR)
    r, name, a, b = biggest
    return PayloadChange(delay, small, large, flagged_pairs, name, a, b, r)


@dataclass(frozen=True)
class PayloadPoint:
    """One bar of the payload figure: p50 of a model/mechanism with one payload."""

    model: str
    mechanism: str
    payload: str
    p50_ns: float
    flagged: bool


@dataclass(frozen=True)
class PayloadComparison:
    """Capstone Figures 13/14: `delay` per payload, every payload of a model at one common rate."""

    delay: str
    payloads: tuple[str, ...]  # smallest first
    variants: tuple[tuple[str, str], ...]  # (model, mechanism), in model order
    points: tuple[PayloadPoint, ...]
    common_rates_per_s: tuple[tuple[str, float], ...]  # (model, rate), in model order
    main_load_pct: float
    change: PayloadChange


def payload_comparison(data: BenchData, delay: str) -> PayloadComparison | None:
    """None when fewer than two payloads were measured at a common rate."""
    rows = data.common_rate(delay)
    payloads = sorted({str(m.get("payload")) for m in rows}, key=_payload_key)
    if len(payloads) < 2:
        return None
    variants = sorted({(m["model"], m["mechanism"]) for m in rows}, key=lambda v: (_model_key(v[0]), v[1]))
    by = {(m["model"], m["mechanism"], m.get("payload")): m for m in rows}
    points = tuple(
        PayloadPoint(model, mech, p, _p(m, "50"), bool(point_flags(m)))
        for p in payloads
        for model, mech in variants
        if (m := by.get((model, mech, p)))
    )
    rates = data.doc.get("payload_common_rate_per_s", {})
    return PayloadComparison(
        delay,
        tuple(payloads),
        tuple(variants),
        points,
        tuple(sorted(rates.items(), key=lambda kv: _model_key(kv[0]))),
        data.main_load,
        payload_change(rows, delay),
    )


# ---- the load sweep --------------------------------------------------------------------


@dataclass(frozen=True)
class SweepLine:
    """p99 total delay of one model/mechanism at each load it was measured at (two or more)."""

    model: str
    mechanism: str
    loads_pct: tuple[float, ...]
    p99_ns: tuple[float, ...]


@dataclass(frozen=True)
class TailGrowth:
    """The growth of p99 total between the lowest and the highest load not flagged saturated."""

    ratio: float
    model: str
    mechanism: str
    from_load_pct: float
    to_load_pct: float
    from_p99_ns: float
    to_p99_ns: float


@dataclass(frozen=True)
class LoadSweep:
    sweep_payload: str
    models: tuple[str, ...]  # the model of every variant measured, in order (the figure's colours key on it)
    lines: tuple[SweepLine, ...]
    growth: TailGrowth | None  # None: fewer than two unsaturated load points per model


def load_sweep(data: BenchData) -> LoadSweep | None:
    """None when the run measured fewer than two loads."""
    loads = data.loads()
    if len(loads) < 2:
        return None
    variants = sorted(
        {
            (m["model"], m["mechanism"])
            for m in data.measurements
            if m["name"] == "total" and m.get("payload") == data.sweep_payload
        },
        key=lambda v: (_model_key(v[0]), v[1]),
    )
    lines = []
    growth = []
    for model, mech in variants:
        found = [(load, data.one(load, "total", model, mech, data.sweep_payload)) for load in loads]
        pts = [(load, m) for load, m in found if m]
        if len(pts) < 2:
            continue
        lines.append(SweepLine(model, mech, tuple(load for load, _ in pts), tuple(_p(m, "99") for _, m in pts)))
        # The growth a finding may state: between the lowest and the highest point not flagged
        # saturated (a saturated point's tail is queueing that grows with the point's length).
        clean = [(load, m) for load, m in pts if not point_flags(m)]
        if len(clean) >= 2 and _p(clean[0][1], "99") > 0:
            lo, hi = clean[0][1], clean[-1][1]
            growth.append(
                (_p(hi, "99") / _p(lo, "99"), model, mech, clean[0][0], clean[-1][0], _p(lo, "99"), _p(hi, "99"))
            )
    return LoadSweep(
        data.sweep_payload,
        tuple(v[0] for v in variants),
        tuple(lines),
        TailGrowth(*max(growth)) if growth else None,
    )


# ---- the delay table ---------------------------------------------------------------------

DELAY_TABLE_NAMES = ["scheduling_delay", "deferral_wait", "join_delay", "total"]


@dataclass(frozen=True)
class DelayRow:
    """One delay of one model/mechanism at the main load, and its p50 over each reference's."""

    variant: str
    delay: str
    samples: int | float
    p50_ns: float
    p90_ns: float
    p99_ns: float
    p999_ns: float
    low_confidence: frozenset[str]  # percentiles with too few samples beyond them
    to_condvar: float | None
    to_spin: float | None
    to_thread_start: float | None


def delay_rows(data: BenchData, refs: Mapping[str, Ref]) -> tuple[DelayRow, ...]:
    names = DELAY_TABLE_NAMES
    rows = []
    for m in sorted(
        data.at(data.main_load, payload=data.sweep_payload),
        key=lambda m: (_variant_key(m), names.index(m["name"]) if m["name"] in names else 9),
    ):
        if m["name"] not in names:
            continue
        p50 = _p(m, "50")
        rows.append(
            DelayRow(
                variant(m),
                m["name"],
                m["latency"]["count"],
                p50,
                _p(m, "90"),
                _p(m, "99"),
                _p(m, "99.9"),
                frozenset(m["latency"].get("low_confidence", [])),
                ratio_to(p50, refs.get("condvar_handoff")),
                ratio_to(p50, refs.get("spin_handoff")),
                ratio_to(p50, refs.get("thread_create")),
            )
        )
    return tuple(rows)


# ---- maximum rates -----------------------------------------------------------------------


@dataclass(frozen=True)
class MaxRate:
    """A model's highest sustained rate and the per-call budget it leaves."""

    model: str
    rate_per_s: float
    per_call_ns: float | None
    budget_to_thread_start: float | None  # None without a thread-start reference
    ramp_steps: int
    saturation_found: bool  # False: the ramp reached its cap first


@dataclass(frozen=True)
class MaxRates:
    rows: tuple[MaxRate, ...]
    fastest: str | None = None  # None unless both are known and the slowest rate is above zero
    slowest: str | None = None
    fastest_to_slowest: float | None = None


def max_rates(data: BenchData, refs: Mapping[str, Ref]) -> MaxRates:
    rows = []
    thread = refs.get("thread_create")
    ramps = data.doc.get("ramps", {})
    for model in sorted(data.max_rates, key=_model_key):
        rate = float(data.max_rates[model])
        per_call = 1e9 / rate if rate > 0 else None
        rows.append(
            MaxRate(
                model,
                rate,
                per_call,
                per_call / thread.p50_ns if (per_call and thread) else None,
                len(ramps.get(model, {}).get("steps", [])),
                bool(ramps.get(model, {}).get("saturation_found", False)),
            )
        )
    best = max(data.max_rates.items(), key=lambda kv: kv[1]) if data.max_rates else None
    worst = min(data.max_rates.items(), key=lambda kv: kv[1]) if data.max_rates else None
    if best and worst and worst[1] > 0:
        return MaxRates(tuple(rows), best[0], worst[0], best[1] / worst[1])
    return MaxRates(tuple(rows))


# ---- where a point's scheduling delay comes from ---------------------------------------------

# What a point's scheduling delay is (SchedulingCause.kind).
NO_BACKLOG_DATA = "no backlog data"
OVERLOADED = "overloaded"  # the backlog grew during the point: the delay is queueing that keeps growing
DEFERRED = "deferred"  # the body runs inside the request: no queue
QUEUEING = "queueing"  # the median call found earlier calls not yet started (the backlog did not grow)
HANDOFF_PARKED = "hand-off, parked worker"  # an empty queue, and the worker had parked: a wake-up per call
HANDOFF_RUNNING = "hand-off, running worker"  # an empty queue and a running worker
NO_CALL_AHEAD = "no call ahead"  # an empty queue, no park count


@dataclass(frozen=True)
class EmptyQueueHandoff:
    """The scheduling delay of the calls launched into an empty queue: the hand-off alone."""

    p50_ns: float
    calls: int | float | None
    reference: str  # the baseline reference it is compared with
    to_reference: float | None  # None without that reference


@dataclass(frozen=True)
class SchedulingCause:
    """Where a point's scheduling delay comes from, from the point's own backlog data."""

    kind: str  # one of the kinds above
    p50_ns: float
    lateness_first_quarter_p50_ns: float | None = None  # OVERLOADED
    lateness_last_quarter_p50_ns: float | None = None
    queue_p50: float | None = None  # QUEUEING
    queue_mean: float = 0.0
    queue_max: float | None = None
    stall_fraction: float | None = None
    stall_max_ns: float | None = None
    stalled: bool = False  # calls waited while no body started for more than NOTABLE_SHARE of the point
    runqueue_share: float | None = None
    waited_for_cpu: bool = False  # workers sat on a run queue for more than NOTABLE_SHARE of the point
    parks_per_call: float | None = None  # HANDOFF_*
    why_saturated: tuple[str, ...] = ()  # besides a growing backlog
    in_flight_limited: bool = False  # the in-flight limit held the producer back
    in_flight_max: float | None = None
    empty_queue: EmptyQueueHandoff | None = None  # QUEUEING points that also measured it


def scheduling_cause(m: dict, refs: Mapping[str, Ref]) -> SchedulingCause:
    b = _backlog(m)
    p50 = _p(m, "50")
    if not b:
        return SchedulingCause(NO_BACKLOG_DATA, p50)
    if b.get("grew"):
        return SchedulingCause(
            OVERLOADED,
            p50,
            lateness_first_quarter_p50_ns=b.get("lateness_first_quarter_p50_ns"),
            lateness_last_quarter_p50_ns=b.get("lateness_last_quarter_p50_ns"),
        )
    if m.get("model") == "deferred":
        return SchedulingCause(DEFERRED, p50)
    q50 = b.get("queue_p50")
    rq = runqueue_share(b)
    stall = b.get("stall_fraction")
    parks = b.get("worker_parks_per_call")
    if q50:
        kind = QUEUEING
    elif parks is not None and parks >= PARKS_PER_CALL_WAKEUP:
        kind = HANDOFF_PARKED
    elif parks is not None:
        kind = HANDOFF_RUNNING
    else:
        kind = NO_CALL_AHEAD
    why = tuple(w for w in m.get("observed", {}).get("why_saturated", []) if not w.startswith("backlog grew"))
    hand = b.get("empty_queue_scheduling_p50_ns")
    empty = None
    if hand is not None and q50:
        ref_name = "spin_handoff" if m.get("model") in ("spin-pool", "work-stealing") else "condvar_handoff"
        empty = EmptyQueueHandoff(hand, b.get("empty_queue_calls"), ref_name, ratio_to(hand, refs.get(ref_name)))
    return SchedulingCause(
        kind,
        p50,
        queue_p50=q50,
        queue_mean=b.get("queue_mean", 0),
        queue_max=b.get("queue_max"),
        stall_fraction=stall,
        stall_max_ns=b.get("stall_max_ns"),
        stalled=bool(q50) and stall is not None and stall > NOTABLE_SHARE,
        runqueue_share=rq,
        waited_for_cpu=bool(q50) and rq is not None and rq > NOTABLE_SHARE,
        parks_per_call=parks,
        why_saturated=why,
        in_flight_limited="in-flight limit reached" in why,
        in_flight_max=b.get("in_flight_max"),
        empty_queue=empty,
    )


# ---- the backlog table ---------------------------------------------------------------------


@dataclass(frozen=True)
class BacklogRow:
    """What the calls of one point met: queue, backlog and CPU (scheduling delay)."""

    variant: str
    load_pct: float
    offered_per_s: float | None
    achieved_per_s: float | None
    has_backlog: bool  # False: the document has no backlog data for this point
    queue_p50: float | None  # None: no queue (deferred) or no data
    in_flight_mean: float | None
    in_flight_max: float | None
    backlog_grew: bool
    runqueue_share: float | None
    parks_per_call: float | None
    empty_queue_p50_ns: float | None
    cause: SchedulingCause


def backlog_rows(data: BenchData, refs: Mapping[str, Ref]) -> tuple[BacklogRow, ...]:
    rows = []
    for load in data.shown_loads():
        for m in data.at(load, "scheduling_delay", data.sweep_payload):
            b = _backlog(m)
            rows.append(
                BacklogRow(
                    variant(m),
                    load,
                    m.get("offered_per_s"),
                    m.get("achieved_per_s"),
                    bool(b),
                    b.get("queue_p50") if "queue_p50" in b else None,
                    b["in_flight_mean"] if "in_flight_mean" in b else None,
                    b["in_flight_max"] if "in_flight_mean" in b else None,
                    bool(b.get("grew")),
                    runqueue_share(b),
                    b.get("worker_parks_per_call"),
                    b.get("empty_queue_scheduling_p50_ns"),
                    scheduling_cause(m, refs),
                )
            )
    return tuple(rows)


# ---- performance targets -------------------------------------------------------------------


@dataclass(frozen=True)
class TargetCheck:
    """One target of TARGETS at one load and mechanism: the ratio and whether it is met."""

    label: str  # the target, as TARGETS names it
    mechanism: str
    load_pct: float
    empty_queue_only: bool  # the same target, for the calls launched into an empty queue
    measured_p50_ns: float
    reference_p50_ns: float | None  # None: the reference is missing from the run
    ratio: float | None
    limit: float
    met: bool | None  # None: no ratio (no reference)
    cause: SchedulingCause | None  # the point's reading (the whole point's row)
    empty_queue_calls: int | float | None  # the empty-queue row's calls


@dataclass(frozen=True)
class ResumeCheck:
    """A coroutine resumed on the same thread, against RESUME_TARGET_NS."""

    p50_ns: float
    target_ns: float
    ratio: float
    met: bool


@dataclass(frozen=True)
class Targets:
    rows: tuple[TargetCheck, ...]
    resume: ResumeCheck | None  # None: not measured


def _met(r: float | None, limit: float) -> bool | None:
    return None if r is None else r <= limit


def targets(data: BenchData, refs: Mapping[str, Ref]) -> Targets:
    rows = []
    for label, model, mechs, ref_name, limit in TARGETS:
        ref = refs.get(ref_name)
        ref_ns = ref.p50_ns if ref else None
        for load in data.shown_loads():
            for mech in mechs:
                m = data.one(load, "scheduling_delay", model, mech, data.sweep_payload)
                if not m:
                    continue
                r = ratio_to(_p(m, "50"), ref)
                cause = scheduling_cause(m, refs)
                rows.append(
                    TargetCheck(label, mech, load, False, _p(m, "50"), ref_ns, r, limit, _met(r, limit), cause, None)
                )
                b = _backlog(m)
                hand = b.get("empty_queue_scheduling_p50_ns")
                if hand is not None:
                    rh = ratio_to(hand, ref)
                    rows.append(
                        TargetCheck(
                            label,
                            mech,
                            load,
                            True,
                            hand,
                            ref_ns,
                            rh,
                            limit,
                            _met(rh, limit),
                            None,
                            b.get("empty_queue_calls"),
                        )
                    )
    resume = data.resume()
    check = None
    if resume:
        v = _p(resume, "50")
        check = ResumeCheck(v, RESUME_TARGET_NS, v / RESUME_TARGET_NS, v <= RESUME_TARGET_NS)
    return Targets(tuple(rows), check)


# ---- the capstone's figures beside this run ------------------------------------


# Why a reference check is unavailable (Figure12.unavailable).
NOT_MEASURED = "not measured"
FLAGGED = "flagged"


@dataclass(frozen=True)
class LaunchPolicyDelay:
    """One delay's p99, std::thread vs std::async (std::future, main load)."""

    delay: str
    thread_p99_ns: float
    async_p99_ns: float
    thread_wins: bool  # std::thread's p99 is at most std::async's
    thread_to_async: float


@dataclass(frozen=True)
class Figure12:
    """The capstone's Figure 12 (§3.3.2): the launch policies side by side — std::async vs std::thread vs
    deferred, scheduling and join delay, each at 75 % of its maximum rate. Its finding: "std::thread has
    better performance over std::async", "std::async has higher scheduling and join delays". Judged on
    the p99 of both delays with std::future (the capstone's mechanism) at the main load (the study's 75 %);
    a flagged point is never compared."""

    verdict: str  # HOLDS, PARTLY, DOES_NOT_HOLD or UNAVAILABLE (report.blocks)
    load_pct: float
    unavailable: str | None = None  # NOT_MEASURED or FLAGGED
    missing: tuple[tuple[str, str], ...] = ()  # (model, delay) not measured
    flagged: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (model, delay, flags)
    delays: tuple[LaunchPolicyDelay, ...] = ()
    async_offered_per_s: float | None = None
    thread_offered_per_s: float | None = None
    deferred_p50_ns: float | None = None  # deferred's scheduling delay: from the request, no hand-off
    deferred_flags: tuple[str, ...] = ()


def figure12(data: BenchData) -> Figure12:
    load = data.main_load
    pts = {
        (model, delay): data.one(load, delay, model, "future", data.sweep_payload)
        for model in ("std-async", "std-thread", "deferred")
        for delay in ("scheduling_delay", "join_delay")
    }
    missing = tuple((m, d) for (m, d), v in pts.items() if v is None and m != "deferred")
    if missing:
        return Figure12(UNAVAILABLE, load, NOT_MEASURED, missing=missing)
    flagged = tuple(
        (m, d, tuple(point_flags(v)))
        for (m, d), v in pts.items()
        if v is not None and m != "deferred" and point_flags(v)
    )
    if flagged:
        return Figure12(UNAVAILABLE, load, FLAGGED, flagged=flagged)
    delays = []
    for delay in ("scheduling_delay", "join_delay"):
        a, th = pts[("std-async", delay)], pts[("std-thread", delay)]
        assert a is not None and th is not None
        delays.append(
            LaunchPolicyDelay(
                delay, _p(th, "99"), _p(a, "99"), _p(th, "99") <= _p(a, "99"), _p(th, "99") / max(_p(a, "99"), 1.0)
            )
        )
    wins = [d.thread_wins for d in delays]
    verdict = HOLDS if all(wins) else PARTLY if any(wins) else DOES_NOT_HOLD
    a_s, th_s = pts[("std-async", "scheduling_delay")], pts[("std-thread", "scheduling_delay")]
    assert a_s is not None and th_s is not None
    deferred = pts[("deferred", "scheduling_delay")]
    return Figure12(
        verdict,
        load,
        delays=tuple(delays),
        async_offered_per_s=a_s.get("offered_per_s"),
        thread_offered_per_s=th_s.get("offered_per_s"),
        deferred_p50_ns=_p(deferred, "50") if deferred is not None else None,
        deferred_flags=tuple(point_flags(deferred)) if deferred is not None else (),
    )


@dataclass(frozen=True)
class PayloadMove:
    """std::async/future's p50 of one delay, from the smallest to the largest payload."""

    delay: str
    small: str
    large: str
    ratio: float  # large ÷ small
    changed: bool  # moved by PAYLOAD_CHANGE or more, either way
    rose: bool  # rose by PAYLOAD_CHANGE or more: the capstone's direction (a larger value, a longer delay)


@dataclass(frozen=True)
class Figures13_14:
    """The capstone's Figures 13/14 (§3.3.3): scheduling and join delay per return type (void, long long, a
    vector of 10 000). Its finding: "increasing the size of promise object increases the overall delay",
    most clearly from void to the 10k buffer. Judged on std::async with std::future (the capstone's policy
    and mechanism) at the common rate every payload sustains, smallest → largest payload: holds when every
    delay measured rose by PAYLOAD_CHANGE or more, partly when some did, not when none did (a delay that
    fell goes against it). Other model/mechanisms are counted beside it, not judged. Pairs with a flagged
    point are not compared."""

    verdict: str  # HOLDS, PARTLY, DOES_NOT_HOLD or UNAVAILABLE (no unflagged std::async/future pair)
    async_moves: tuple[PayloadMove, ...]
    changed_pairs: int  # unflagged delay pairs of every model/mechanism that changed
    compared_pairs: int
    flagged_pairs: int  # pairs with a flagged point, not compared
    main_load_pct: float


def figures13_14(data: BenchData) -> Figures13_14:
    changed = 0
    async_moves: list[PayloadMove] = []
    skipped = 0
    compared = 0
    for delay in ("scheduling_delay", "join_delay"):
        rows = data.common_rate(delay)
        payloads = sorted({str(m.get("payload")) for m in rows}, key=_payload_key)
        if len(payloads) < 2:
            continue
        small, large = payloads[0], payloads[-1]
        by = {(m["model"], m["mechanism"], m.get("payload")): m for m in rows}
        for model, mech in sorted({(m["model"], m["mechanism"]) for m in rows}):
            ma, mb = by.get((model, mech, small)), by.get((model, mech, large))
            if not ma or not mb or _p(ma, "50") <= 0 or _p(mb, "50") <= 0:
                continue
            if point_flags(ma) or point_flags(mb):
                skipped += 1
                continue
            compared += 1
            r = _p(mb, "50") / _p(ma, "50")
            moved = max(r, 1 / r) >= PAYLOAD_CHANGE
            if moved:
                changed += 1
            if model == "std-async" and mech == "future":
                async_moves.append(PayloadMove(delay, small, large, r, moved, r >= PAYLOAD_CHANGE))
    if not async_moves:
        verdict = UNAVAILABLE
    else:
        rose = [mv.rose for mv in async_moves]
        verdict = HOLDS if all(rose) else PARTLY if any(rose) else DOES_NOT_HOLD
    return Figures13_14(verdict, tuple(async_moves), changed, compared, skipped, data.main_load)


# ---- the whole study -------------------------------------------------------------------------


@dataclass(frozen=True)
class AsyncAnalysis:
    """Everything the `async` section shows, computed from one tailscope-asyncbench document and the
    run's baseline references."""

    main_load_pct: float
    sweep_payload: str
    pinning: Pinning
    references: Mapping[str, Ref]
    missing_references: tuple[str, ...]  # REFERENCES this run lacks: ratios to them are unavailable
    panels: tuple[DelayPanel, ...]  # DELAYS measured at the main load, in DELAYS order
    delay_rows: tuple[DelayRow, ...]
    payloads: tuple[PayloadComparison, ...]  # scheduling and join delay, when two payloads were measured
    sweep: LoadSweep | None
    max_rates: MaxRates
    backlog: tuple[BacklogRow, ...]
    targets: Targets
    figure12: Figure12
    figures13_14: Figures13_14
    saturated_at_main: tuple[str, ...]  # variants saturated at the main load


def analyze(bench: dict, refs: Mapping[str, Ref]) -> AsyncAnalysis:
    """The study's values from the tailscope-asyncbench document and the references (references())."""
    data = BenchData(bench)
    main = data.main_load
    return AsyncAnalysis(
        main_load_pct=main,
        sweep_payload=data.sweep_payload,
        pinning=pinning(bench),
        references=dict(refs),
        missing_references=tuple(r for r in REFERENCES if r not in refs),
        panels=tuple(p for delay, _ in DELAYS if (p := delay_panel(data, delay, refs))),
        delay_rows=delay_rows(data, refs),
        payloads=tuple(c for delay, _ in DELAYS[:2] if (c := payload_comparison(data, delay))),
        sweep=load_sweep(data),
        max_rates=max_rates(data, refs),
        backlog=backlog_rows(data, refs),
        targets=targets(data, refs),
        figure12=figure12(data),
        figures13_14=figures13_14(data),
        saturated_at_main=tuple(sorted({m["variant"] for m in data.at(main) if m.get("saturated")})),
    )
