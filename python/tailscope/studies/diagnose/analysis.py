"""Study `diagnose`: documents → values. Which HotROD fix each finding licenses (`fixes_from`, called by
run.py to decide what to measure), and the measured latencies of each phase with their intervals.

The study's harness is the one place that knows HotROD: the span names below map a finding of
`tailscope.diagnose` (which knows no application) to one of HotROD's fix flags. A finding the map
does not know is listed as not applied, with the reason.

The twin's prediction per fix is H4's `tailscope.twin.whatif`, not wired yet: every fix carries
`predicted_p50_ns`/`predicted_p99_ns` = None with PREDICTION_UNAVAILABLE, and predicted ÷ measured is
None too — never a stand-in figure. (Hook: `prediction_for`.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tailscope.measure.intervals import QuantileInterval
from tailscope.measure.measurement import measurement
from tailscope.store import EngineDocument

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

PREDICTION_UNAVAILABLE = "twin prediction not wired"
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


def _target(p: Mapping[str, Any]) -> str:
    if p.get("kind") == "call_site":
        return f"{p['parent_service']}:{p['parent_operation']} → {p['service']}:{p['operation']}"
    return f"{p['service']}:{p['operation']}"


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
        ev = {"population": _target(p), "servers": cap.get("servers"), "confidence": cap.get("confidence")}
        ev["spans"] = cap.get("spans")
        if _is_db(p) and cap.get("servers") == 1:
            fixes.append(
                Fix("-M", "capacity", _target(p), 1, None, {"db_mutex_disabled": True},
                    f"remove the lock of capacity 1 around {_target(p)} (HotROD -M)", ev)
            )  # fmt: skip
        else:
            not_applied.append({"finding": f"capacity {cap.get('servers')} at {_target(p)}", "reason": NO_FLAG})
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
        ev = {"population": _target(db), "service_p50_ns": cap["service_p50_ns"], "confidence": cap["confidence"]}
        fixes.append(
            Fix(f"-D {to_ms}ms", "faster", _target(db), round(float(cap["service_p50_ns"]) / 1e6), to_ms,
                {"db_delay_ms": float(to_ms)},
                f"make {_target(db)} {FASTER_SHARE:.0%} faster (inferred service p50 → {to_ms} ms; HotROD -D)", ev)
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


def prediction_for(fix: Mapping[str, Any], rate_per_s: float) -> Prediction:
    """HOOK (issue 26 item 3): the twin's predicted p50/p99 for `fix` at `rate_per_s`, from
    `tailscope.twin.whatif` on the baseline's traces. Not wired: None with the reason."""
    return Prediction(None, None, PREDICTION_UNAVAILABLE)


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


@dataclass(frozen=True)
class DiagnoseStudy:
    skipped: str | None  # why nothing was measured (no Go, HotROD or Jaeger missing or failing)
    baselines: tuple[Phase, ...] = ()
    diagnoses: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # point → diagnosis document
    fixes: tuple[FixResult, ...] = ()
    not_applied: tuple[dict[str, str], ...] = ()
    plan: Mapping[str, Any] = field(default_factory=dict)


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
    results = []
    for f in plan_doc.get("fixes", []):
        measured = phases.get(str(f.get("point")))
        base = next((b for b in baselines if b.rate_per_s == f.get("rate_per_s")), None)
        m50, m99 = _p(measured.latency if measured else None, "50"), _p(measured.latency if measured else None, "99")
        b50, b99 = _p(base.latency if base else None, "50"), _p(base.latency if base else None, "99")
        pred = prediction_for(f, float(f.get("rate_per_s") or 0.0))
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
            )
        )
    return DiagnoseStudy(
        skipped=None,
        baselines=baselines,
        diagnoses=diagnoses,
        fixes=tuple(results),
        not_applied=tuple(plan_doc.get("not_applied", [])),
        plan=plan_doc,
    )
