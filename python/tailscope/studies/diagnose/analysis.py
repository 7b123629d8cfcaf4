"""Study `diagnose`: documents → values. Which HotROD fix each finding licenses (`fixes_from`, called by
run.py to decide what to measure), and the measured latencies of each phase with their intervals.

The study's harness is the one place that knows HotROD: the span names below map a finding of
`tailscope.diagnose` (which knows no application) to one of HotROD's fix flags. A finding the map
does not know is listed as not applied, with the reason.

The twin's prediction per fix: run.py infers the queueing twin from the highest rate's traces
(`twin.commands.infer_twin`), picks the what-if of `twin.whatif` that is the same change as the fix
(`whatif_for`: the harness's map again, by kind and HotROD's span names) and runs it on a sped-up twin
(`twin.timescale`) at the fix's rate; the twin is also run unchanged at each baseline's rate (its error
at the recorded rate and at the second, unfitted, rate). Each run is a prediction document;
`prediction_for` reads it back — a fix without one says why, never a stand-in figure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tailscope.diagnose.diagnosis import population_name
from tailscope.measure.intervals import QuantileInterval
from tailscope.measure.measurement import measurement
from tailscope.measure.verdict import IntervalVerdict, ratio_within
from tailscope.store import EngineDocument
from tailscope.twin.validate import ACCEPT_RATIO_ERROR

# Document kinds (EngineDocument.engine) the study stores.
LOAD_ENGINE = "tailscope-load"
DIAGNOSIS_ENGINE = "tailscope-diagnose"
PLAN_ENGINE = "tailscope-diagnose-study"
PLAN_SCHEMA = "tailscope.diagnose.study/1"

# ---- HotROD's names (the harness's map; the diagnosis never sees them) ------------------------------
# The simulated MySQL query: one span per query in service "mysql", behind a mutex of capacity 1
# (HotROD's -M removes it).
DB_SERVICE = "mysql"
DB_OPERATION = "SQL SELECT"
# The frontend's calls to the route service, through a worker pool of 3 per request (-W N sizes it).
ROUTE_SERVICE = "route"
# What "make the db stage faster" asks of -D: this share of the inferred service time (X = 50 %).
FASTER_SHARE = 0.5

PREDICTION_ENGINE = "tailscope-twin"
# The model the twin's services run under: HotROD's Go services start a goroutine per request and
# block in each RPC, closest to a thread per call.
TWIN_MODEL = "std-async"
PREDICTION_SCHEMA = "tailscope.diagnose.prediction/1"
PREDICTION_UNAVAILABLE = "no twin prediction was stored for this fix"
# Issue 26's target for a fix's prediction: predicted ÷ measured within ±20 % at p50 and p99, judged by
# both sides' intervals (measure.verdict.ratio_within). The unchanged twin is held to its contract,
# ±15 % (twin/validate.ACCEPT_RATIO_ERROR), at the rate it was fitted at and at the other.
FIX_PREDICTION_BAND = (0.8, 1.2)
TWIN_CONTRACT_BAND = (1 - ACCEPT_RATIO_ERROR, 1 + ACCEPT_RATIO_ERROR)
# Why a finding is not applied. A limit on a span that encloses the db query (its handler, the call
# into it) is often the same lock seen from outside: -M, applied for the db query, removes it too.
NO_FLAG = "no HotROD flag maps to it (the harness maps capacity 1 on the db query, the route fan-out, the db's speed)"


@dataclass(frozen=True)
class Fix:
    """One HotROD flag change licensed by a finding: `flags` are HotrodFlags' fields."""

    id: str  # "-M", "-W 10", "-D 150ms"
    kind: str  # capacity | fan_out | faster
    target: str  # the population or call site the finding is about
    from_value: Any
    to_value: Any
    flags: dict[str, Any]
    sentence: str
    evidence: dict[str, Any]

    def record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target,
            "from": self.from_value,
            "to": self.to_value,
            "flags": self.flags,
            "sentence": self.sentence,
            "evidence": self.evidence,
        }


def _is_db(p: Mapping[str, Any]) -> bool:
    return p.get("kind") == "operation" and p.get("service") == DB_SERVICE and p.get("operation") == DB_OPERATION


def _db_population(diagnosis: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((p for p in diagnosis.get("populations", []) if _is_db(p)), None)


def _calls_route(site: Mapping[str, Any]) -> bool:
    """A call site into the route service: its child is route's span, or a client span named by
    diagnose after the server it calls ("HTTP GET → route:/route")."""
    callee = str(site.get("operation", "")).rsplit(" → ", 1)[-1]
    return site.get("service") == ROUTE_SERVICE or callee.startswith(f"{ROUTE_SERVICE}:")


def fixes_from(diagnosis: Mapping[str, Any]) -> tuple[list[Fix], list[dict[str, str]]]:
    """(the fixes HotROD can express, the findings it cannot with the reason) for one diagnosis
    document (`tailscope.diagnosis/1`)."""
    fixes: list[Fix] = []
    not_applied: list[dict[str, str]] = []
    db = _db_population(diagnosis)
    for p in diagnosis.get("populations", []):
        cap = p.get("capacity") or {}
        if cap.get("verdict") != "limit":
            continue
        ev = {"population": population_name(p), "servers": cap.get("servers"), "confidence": cap.get("confidence")}
        ev["spans"] = cap.get("spans")
        if _is_db(p) and cap.get("servers") == 1:
            fixes.append(
                Fix("-M", "capacity", population_name(p), 1, None, {"db_mutex_disabled": True},
                    f"remove the lock of capacity 1 around {population_name(p)} (HotROD -M)", ev)
            )  # fmt: skip
        else:
            not_applied.append({"finding": f"capacity {cap.get('servers')} at {population_name(p)}", "reason": NO_FLAG})
    for f in diagnosis.get("bounded_fan_outs", []):
        site = f"{f['parent_service']}:{f['parent_operation']} → {f['service']}:{f['operation']}"
        if _calls_route(f) and int(f["calls_max"]) > int(f["k"]):
            n = int(f["calls_max"])
            ev = {"call_site": site, "k": f["k"], "instances": f["instances"], "bounded": f["bounded"]}
            fixes.append(
                Fix(f"-W {n}", "fan_out", site, int(f["k"]), n, {"route_workers": n},
                    f"raise the fan-out limit of {site} from {f['k']} to {n} (HotROD -W {n})", ev)
            )  # fmt: skip
        else:
            not_applied.append({"finding": f"fan-out bounded at {f['k']} in {site}", "reason": NO_FLAG})
    if db is not None and (db.get("capacity") or {}).get("verdict") == "limit":
        cap = db["capacity"]
        to_ms = round(float(cap["service_p50_ns"]) * FASTER_SHARE / 1e6)
        ev = {
            "population": population_name(db),
            "service_p50_ns": cap["service_p50_ns"],
            "confidence": cap["confidence"],
        }
        fixes.append(
            Fix(f"-D {to_ms}ms", "faster", population_name(db), round(float(cap["service_p50_ns"]) / 1e6), to_ms,
                {"db_delay_ms": float(to_ms)},
                f"make {population_name(db)} {FASTER_SHARE:.0%} faster (inferred service p50 → {to_ms} ms; HotROD -D)", ev)
        )  # fmt: skip
    for c in diagnosis.get("sequential_chains", []):
        site = f"{c['parent_service']}:{c['parent_operation']} → {c['service']}:{c['operation']}"
        not_applied.append({"finding": f"sequential chain {site}", "reason": NO_FLAG})
    return fixes, not_applied


# ---- measured phases --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Latency:
    """The load generator's latency from the intended send time (coordinated omission corrected)."""

    samples: int
    p50: QuantileInterval
    p99: QuantileInterval
    errors: int


def latency_of(load: Mapping[str, Any]) -> Latency | None:
    m = measurement(dict(load), "latency_intended")
    if m is None:
        return None
    errors = sum(int(v) for v in ((load.get("load") or {}).get("errors") or {}).values())
    return Latency(m.count, m.interval("50"), m.interval("99"), errors)


@dataclass(frozen=True)
class Prediction:
    p50_ns: float | None
    p99_ns: float | None
    unavailable: str  # "" when both are set
    requests: int = 0  # the twin requests behind the figures
    speed_up: float = 1.0  # the twin ran this many times faster than real time (twin/timescale.py)
    whatif: str | None = None  # the what-if's id (None: the unchanged twin)
    flags: tuple[str, ...] = ()  # the twin run's flags (saturated, generator-limited, errors)
    # The twin's p50/p99 with their 95 % intervals, on the application's clock.
    p50_ci: QuantileInterval | None = None
    p99_ci: QuantileInterval | None = None
    twin_rate_per_s: float | None = None  # the rate the sped-up twin ran at (its samples per second)


def whatif_for(fix: Mapping[str, Any], whatifs: Iterable[Any], topology: Mapping[str, Any]) -> Any | None:
    """The twin's what-if that is the same change as the HotROD fix (None: the twin offers none):
    -M → the db query's capacity removed; -W n → a fan-out limit raised to n; -D → the db query's
    stage faster. The harness's map, like fixes_from: the what-ifs themselves know no HotROD name."""
    kind = fix.get("kind")
    for w in whatifs:
        if w.unavailable is not None:
            continue
        if kind == "capacity" and w.kind == "capacity" and w.to_value == "removed":
            if w.target.get("span") == DB_OPERATION:
                return w
        elif kind == "fan_out" and w.kind == "fan_out" and w.to_value == fix.get("to"):
            return w
        elif kind == "faster" and w.kind == "faster" and "stage" in w.target:
            stage = _twin_stage(topology, w.target)
            if stage is not None and (stage.get("store") or {}).get("span") == DB_OPERATION:
                return w
    return None


def _twin_stage(topology: Mapping[str, Any], target: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for s in topology.get("services", []):
        if s.get("name") != target.get("service"):
            continue
        for e in s.get("endpoints", []):
            if e.get("name") == target.get("endpoint"):
                stages = e.get("stages") or []
                i = target.get("stage")
                return stages[i] if isinstance(i, int) and 0 <= i < len(stages) else None
    return None


def prediction_of(doc: Mapping[str, Any] | None, why_none: str = PREDICTION_UNAVAILABLE) -> Prediction:
    """A stored prediction document (run.py) → its values; None → unavailable with `why_none`."""
    if doc is None:
        return Prediction(None, None, why_none)
    why = str(doc.get("prediction_unavailable") or "")
    p50, p99 = doc.get("p50_ns"), doc.get("p99_ns")
    if not why and (p50 is None or p99 is None):
        why = "the twin run recorded no latency"
    requests = int(doc.get("requests") or 0)
    rate = doc.get("twin_rate_per_s")
    return Prediction(
        p50,
        p99,
        why,
        requests=requests,
        speed_up=float(doc.get("speed_up") or 1.0),
        whatif=doc.get("whatif"),
        flags=tuple(str(f) for f in doc.get("flags") or ()),
        p50_ci=_stored_interval(doc, "50", p50, requests),
        p99_ci=_stored_interval(doc, "99", p99, requests),
        twin_rate_per_s=float(rate) if rate else None,
    )


NO_STORED_INTERVAL = "the prediction document has no interval (written before predictions kept them)"


def _stored_interval(doc: Mapping[str, Any], key: str, estimate: float | None, count: int) -> QuantileInterval:
    q = float(key) / 100
    bounds = doc.get(f"p{key}_ci_ns")
    if estimate is not None and bounds and len(bounds) == 2 and None not in bounds:
        return QuantileInterval(q, count, float(estimate), float(bounds[0]), float(bounds[1]))
    why = (doc.get("ci_unavailable") or {}).get(f"p{key}") or doc.get("prediction_unavailable") or NO_STORED_INTERVAL
    return QuantileInterval(q, count, estimate, unavailable=str(why))


def prediction_verdicts(
    p: Prediction, measured: Latency | None, measured_rate_per_s: float, band: tuple[float, float]
) -> tuple[IntervalVerdict, IntervalVerdict]:
    """predicted ÷ measured within `band` at p50 and p99, judged by both sides' intervals; a side
    with no figure or no interval is unavailable with the reason."""
    out = []
    for pred, meas in ((p.p50_ci, measured.p50 if measured else None), (p.p99_ci, measured.p99 if measured else None)):
        if pred is None or meas is None:
            why = p.unavailable or PREDICTION_UNAVAILABLE if pred is None else "the phase has no latency"
            out.append(IntervalVerdict("", unavailable=why))
            continue
        v = ratio_within(
            pred, meas, band, p.twin_rate_per_s, measured_rate_per_s, names=("the twin", "the measurement")
        )
        out.append(v)
    return out[0], out[1]


def prediction_for(fix: Mapping[str, Any], predictions: Mapping[str, Mapping[str, Any]]) -> Prediction:
    """The twin's predicted p50/p99 for `fix` at its rate, from the stored prediction documents
    (by point: "prediction <fix point>")."""
    return prediction_of(predictions.get(f"prediction {fix.get('point')}"))


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


@dataclass(frozen=True)
class Phase:
    point: str
    kind: str  # baseline | fix
    rate_per_s: float
    flags: dict[str, Any]
    latency: Latency | None
    traces: int
    missing_trace_ids: int


@dataclass(frozen=True)
class FixResult:
    fix: dict[str, Any]
    measured: Phase | None  # None: the phase failed (reason in `unavailable`)
    baseline: Phase | None  # the baseline at the same rate
    p50_ratio_to_baseline: float | None
    p99_ratio_to_baseline: float | None
    prediction: Prediction
    predicted_over_measured_p50: float | None
    predicted_over_measured_p99: float | None
    unavailable: str = ""
    # predicted ÷ measured within FIX_PREDICTION_BAND, judged by both sides' intervals.
    verdict_p50: IntervalVerdict = IntervalVerdict("", unavailable=PREDICTION_UNAVAILABLE)
    verdict_p99: IntervalVerdict = IntervalVerdict("", unavailable=PREDICTION_UNAVAILABLE)


@dataclass(frozen=True)
class TwinError:
    rate_per_s: float
    fitted: bool  # the twin was inferred from this rate's traces
    baseline: Phase
    prediction: Prediction
    p50_ratio: float | None  # predicted ÷ measured
    p99_ratio: float | None
    # predicted ÷ measured within the twin's contract (twin/validate.ACCEPT_RATIO_ERROR).
    verdict_p50: IntervalVerdict = IntervalVerdict("", unavailable=PREDICTION_UNAVAILABLE)
    verdict_p99: IntervalVerdict = IntervalVerdict("", unavailable=PREDICTION_UNAVAILABLE)


@dataclass(frozen=True)
class DiagnoseStudy:
    skipped: str | None  # why nothing was measured (no Go, HotROD or Jaeger missing or failing)
    baselines: tuple[Phase, ...] = ()
    diagnoses: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # point → diagnosis document
    fixes: tuple[FixResult, ...] = ()
    not_applied: tuple[dict[str, str], ...] = ()
    plan: Mapping[str, Any] = field(default_factory=dict)
    # The unchanged twin at each baseline's rate ÷ the measured baseline: (rate, the baseline, the
    # prediction, p50 ratio, p99 ratio). The highest rate is the one the twin was fitted at.
    twin_errors: tuple[TwinError, ...] = ()


def phase_of(d: EngineDocument) -> Phase:
    h = d.document.get("hotrod") or {}
    return Phase(
        point=d.point,
        kind=str(h.get("kind", "baseline")),
        rate_per_s=float(h.get("rate_per_s", 0.0)),
        flags=dict(h.get("flags") or {}),
        latency=latency_of(d.document),
        traces=int(h.get("traces", 0)),
        missing_trace_ids=int(h.get("missing_trace_ids", 0)),
    )


def _p(lat: Latency | None, which: str) -> float | None:
    if lat is None:
        return None
    return (lat.p50 if which == "50" else lat.p99).estimate_ns


def analyse(docs: Iterable[EngineDocument]) -> DiagnoseStudy:
    docs = list(docs)
    plan_doc = next((d.document for d in docs if d.engine == PLAN_ENGINE), None)
    if plan_doc is None:
        return DiagnoseStudy(skipped="the run stored no plan document for this study")
    if plan_doc.get("skipped"):
        return DiagnoseStudy(skipped=str(plan_doc["skipped"]), plan=plan_doc)
    phases = {d.point: phase_of(d) for d in docs if d.engine == LOAD_ENGINE}
    baselines = tuple(sorted((p for p in phases.values() if p.kind == "baseline"), key=lambda p: p.rate_per_s))
    diagnoses = {d.point: d.document for d in docs if d.engine == DIAGNOSIS_ENGINE}
    predictions = {d.point: d.document for d in docs if d.engine == PREDICTION_ENGINE}
    results = []
    for f in plan_doc.get("fixes", []):
        measured = phases.get(str(f.get("point")))
        base = next((b for b in baselines if b.rate_per_s == f.get("rate_per_s")), None)
        m50, m99 = _p(measured.latency if measured else None, "50"), _p(measured.latency if measured else None, "99")
        b50, b99 = _p(base.latency if base else None, "50"), _p(base.latency if base else None, "99")
        pred = prediction_for(f, predictions)
        v50, v99 = prediction_verdicts(
            pred, measured.latency if measured else None, float(f.get("rate_per_s") or 0.0), FIX_PREDICTION_BAND
        )
        results.append(
            FixResult(
                fix=f,
                measured=measured,
                baseline=base,
                p50_ratio_to_baseline=_ratio(m50, b50),
                p99_ratio_to_baseline=_ratio(m99, b99),
                prediction=pred,
                predicted_over_measured_p50=_ratio(pred.p50_ns, m50),
                predicted_over_measured_p99=_ratio(pred.p99_ns, m99),
                unavailable=str(f.get("unavailable") or ("" if measured else "the fix's phase stored no document")),
                verdict_p50=v50,
                verdict_p99=v99,
            )
        )
    top = max((b.rate_per_s for b in baselines), default=None)
    errors = []
    for b in baselines:
        doc = predictions.get(f"prediction {b.point}")
        if doc is None:
            continue
        pred = prediction_of(doc)
        v50, v99 = prediction_verdicts(pred, b.latency, b.rate_per_s, TWIN_CONTRACT_BAND)
        errors.append(
            TwinError(
                b.rate_per_s,
                b.rate_per_s == top,
                b,
                pred,
                _ratio(pred.p50_ns, _p(b.latency, "50")),
                _ratio(pred.p99_ns, _p(b.latency, "99")),
                v50,
                v99,
            )
        )
    return DiagnoseStudy(
        skipped=None,
        baselines=baselines,
        diagnoses=diagnoses,
        fixes=tuple(results),
        not_applied=tuple(plan_doc.get("not_applied", [])),
        plan=plan_doc,
        twin_errors=tuple(errors),
    )
