"""`tailscope diagnose --advise`: the what-ifs (twin/whatif.py) ranked by twin runs (docs/diagnose.md
"Advice in the user's terms").

The twin with no change (the baseline) and the twin with each what-if applied are run the same way,
in the same run, on the rate ladder (twin/ladder.py): the recorded rate and 2× always, 4× while the
objective is met. Per what-if: p50/p99 at the recorded rate and at 2× with the requests behind them,
each also as a ratio to the baseline's at the same rate, the highest rung rate meeting the objective
(a bound, never interpolated), and whether the twin was validated at that rate — at the recorded
rate yes: the baseline's first rung is compared with the traces (twin/validate.py `comparison`),
and its error stands beside every prediction; at 2× only when a second recording at about that rate
validated the twin (`--validation FILE`, a `twin validate` document), else "extrapolated". The
ranking is `tailscope advise`'s (twin/ladder.py `rank`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from tailscope.diagnose.diagnosis import Diagnosis
from tailscope.lab import topology as topology_mod
from tailscope.lab.topology import TopologyError
from tailscope.traces.spans import Trace, TraceSet
from tailscope.twin.advise import inferred_twin
from tailscope.twin.infer import InferOptions, recorded_rate
from tailscope.twin.ladder import TwinRuns, climb, ladder_result, rank, rung
from tailscope.twin.validate import TwinRun, _connections, comparison
from tailscope.twin.whatif import WhatIf, whatifs
from tailscope.units import fmt_ns, fmt_ratio

SCHEMA = "tailscope.diagnosis.advice/1"
VALIDATION_SCHEMA = "tailscope.twin.validation/1"
LADDER = [1.0, 2.0, 4.0]
# Predicted at these multiples of the recorded rate whatever the objective says (the ladder's
# `always`): the recorded rate and 2×.
PREDICTED_AT = (1.0, 2.0)
# A second recording validates the twin at a rate within this share of it.
VALIDATED_RATE_TOLERANCE = 0.25
RUN_OVERHEAD_S = 3.0  # starting and stopping the twin's processes, reading its traces (estimate only)


def estimate_s(twins: int, duration_s: float, warmup_s: float) -> float:
    """Upper bound: every twin on every rung."""
    return twins * len(LADDER) * (duration_s + warmup_s + RUN_OVERHEAD_S)


def predict(
    topology: dict,
    whatif: WhatIf | None,
    rate_per_s: float,
    *,
    model: str,
    duration_s: float,
    warmup_s: float = 1.0,
    connections: int = 16,
    progress: Callable[[str], None] | None = None,
    check: Callable[[dict, str], dict] = topology_mod.validate,
) -> dict:
    """One twin run of `topology` with `whatif` applied (None: the baseline) at `rate_per_s`: p50/p99
    from the intended send time with the requests behind them, the rung's flags and load summary.
    For a study that applies the same change to the real system and compares (predicted ÷ measured).
    Raises TopologyError when the engine refuses the changed twin, EngineError when it fails."""
    topo = whatif.apply(topology) if whatif is not None else topology
    topo = check(topo, f"the twin with {whatif.id}" if whatif is not None else "the twin")
    runs = TwinRuns(duration_s, warmup_s, connections, progress)
    point = rung(runs.run(topo, model, rate_per_s), rate_per_s, math.inf)
    point.pop("meets")
    return {"whatif": whatif.id if whatif is not None else None, "model": model, **point}


def validated_rates(validations: list[dict]) -> list[dict]:
    """The rates `tailscope twin validate` documents validated the twin at: each document's own rate
    and, with `--second-traces`, its second recording's (`second_rate`)."""
    out = []
    for v in validations:
        for part, source in ((v, "traces"), (v.get("second_rate") or {}, "second recording")):
            rate = part.get("rate_per_s")
            if rate is None:
                continue
            out.append(
                {
                    "rate_per_s": float(rate),
                    "max_ratio_error": part.get("max_ratio_error"),
                    "within_target": part.get("within_target"),
                    "source": f"twin validate ({source} {', '.join(map(str, part.get('traces') or []))})",
                }
            )
    return out


def validation_at(rate_per_s: float, recorded: dict, others: list[dict]) -> dict:
    """Whether the twin was validated at `rate_per_s`: the recording's own validation at the recorded
    rate, another recording's at about that rate, else extrapolated."""
    for v in [recorded, *others]:
        if v.get("rate_per_s") and abs(rate_per_s / v["rate_per_s"] - 1) <= VALIDATED_RATE_TOLERANCE:
            return {"validated": True, **v}
    return {
        "validated": False,
        "reason": f"extrapolated: no recording at about {rate_per_s:.4g}/s validated this twin",
    }


def _ratio(value: float | None, base: float | None) -> float | None:
    return value / base if value is not None and base else None


def _predictions(points: list[dict], rate: float, baseline: list[dict] | None, recorded: dict, others: list[dict]):
    out = []
    for k in PREDICTED_AT:
        p = next((q for q in points if math.isclose(q["rate_per_s"], rate * k)), None)
        b = next((q for q in baseline or [] if math.isclose(q["rate_per_s"], rate * k)), None)
        entry: dict = {"multiple": k, "rate_per_s": rate * k, "validation": validation_at(rate * k, recorded, others)}
        if p is None or p.get("unavailable") or p.get("p99_ns") is None:
            why = (p or {}).get("unavailable") or (
                "no request completed" if p is not None else "not run: an earlier rung failed"
            )
            entry.update({"p50_ns": None, "p99_ns": None, "requests": None, "flags": [], "unavailable": why})
        else:
            entry.update(
                {k2: p.get(k2) for k2 in ("p50_ns", "p99_ns", "requests", "flags", "achieved_per_s", "errors")}
            )
        for q in ("p50", "p99"):
            r = _ratio(entry.get(f"{q}_ns"), (b or {}).get(f"{q}_ns"))
            entry[f"{q}_ratio_to_baseline"] = r
            if r is None:
                entry.setdefault("ratio_unavailable", "the baseline or this twin has no figure at this rate")
        out.append(entry)
    return out


def _entry(whatif: WhatIf | None, points: list[dict], objective_ns: float) -> dict:
    doc = whatif.to_json() if whatif is not None else {"id": "baseline", "kind": "baseline", "sentence": "no change"}
    return {**doc, **ladder_result(points, objective_ns)}


def _whatif_points(
    x: WhatIf,
    topology: dict,
    check: Callable[[dict, str], dict],
    run_at: Callable[[dict, float], TwinRun],
    rate_per_s: float,
    objective_ns: float,
) -> list[dict]:
    """The rungs of the twin with `x` applied; one unavailable point when the engine refuses it."""
    try:
        topo = check(x.apply(topology), f"the twin with {x.id}")
    except TopologyError as e:  # e.g. an engine without capacities: said, not skipped
        return [{"rate_per_s": rate_per_s, "p50_ns": None, "p99_ns": None, "unavailable": str(e), "flags": []}]
    return climb(lambda r: run_at(topo, r), rate_per_s, LADDER, objective_ns, always=len(PREDICTED_AT))


def advise_whatifs(
    ts: TraceSet,
    topology: dict,
    candidates: list[WhatIf],
    *,
    rate_per_s: float,
    model: str,
    objective_ms: float,
    duration_s: float,
    warmup_s: float = 1.0,
    validations: list[dict] | None = None,
    progress: Callable[[str], None] | None = None,
    run_at: Callable[[dict, float], TwinRun] | None = None,
    check: Callable[[dict, str], dict] = topology_mod.validate,
) -> dict:
    """The advice document (schema tailscope.diagnosis.advice/1). `topology` is the (validated) twin of
    the traces `ts`; `candidates` its what-ifs; `run_at(topology, rate)` runs one twin and
    `check(topology, origin)` validates a changed one (defaults: the engine's) — a test gives
    fabricated runs."""
    objective_ns = objective_ms * 1e6
    runnable = [x for x in candidates if x.unavailable is None]
    conns = _connections(rate_per_s * max(LADDER), ts.traces)
    if run_at is None:
        runs = TwinRuns(duration_s, warmup_s, conns, progress)
        run_at = lambda topo, r: runs.run(topo, model, r)  # noqa: E731
    if progress:
        progress(
            f"advise: the baseline and {len(runnable)} what-ifs × ≤ {len(LADDER)} rates, "
            f"at most ~{estimate_s(len(runnable) + 1, duration_s, warmup_s):.0f} s"
        )
    own_validation: dict = {}

    def validate_first(k: float, run: TwinRun) -> None:
        if k == 1.0:
            own_validation["comparison"] = comparison(ts, run.traces)

    always = len(PREDICTED_AT)
    base_points = climb(
        lambda r: run_at(topology, r), rate_per_s, LADDER, objective_ns, always=always, on_run=validate_first
    )
    cmp = own_validation.get("comparison")
    e2e = (cmp or {}).get("end_to_end") or {}
    recorded = {
        "rate_per_s": rate_per_s,
        "source": "the traces diagnosed (the baseline's first rung compared with them)",
        "max_ratio_error": (cmp or {}).get("max_ratio_error"),
        "within_target": (cmp or {}).get("within_target"),
        "p50_ratio": (e2e.get("ratios") or {}).get("p50"),
        "p99_ratio": (e2e.get("ratios") or {}).get("p99"),
    }
    if cmp is None or recorded["max_ratio_error"] is None:
        recorded["unavailable"] = e2e.get("unavailable") or "the baseline twin did not run at the recorded rate"
    others = validated_rates(validations or [])
    results = [
        _entry(x, _whatif_points(x, topology, check, run_at, rate_per_s, objective_ns), objective_ns) for x in runnable
    ]
    baseline = _entry(None, base_points, objective_ns)
    for r in [baseline, *results]:
        r["predictions"] = _predictions(r["points"], rate_per_s, base_points, recorded, others)
    ranked = rank(results)
    return {
        "schema": SCHEMA,
        "model": model,
        "objective_ms": objective_ms,
        "rate_per_s": rate_per_s,
        "ladder": LADDER,
        "predicted_at": list(PREDICTED_AT),
        "duration_s": duration_s,
        "warmup_s": warmup_s,
        "connections": conns,
        "traces": len(ts.traces),
        "validation": {"recorded_rate": recorded, "other_recordings": others, "comparison": cmp},
        "baseline": baseline,
        "ranked": ranked,
        "not_run": [x.to_json() for x in candidates if x.unavailable is not None],
    }


def advise_traces(
    ts: TraceSet,
    diagnosis: dict,
    *,
    topology_path: Path | None,
    validations: list[dict],
    diagnosed: Diagnosis | None = None,
    sampling: float,
    model: str,
    objective_ms: float,
    duration_s: float,
    faster_percent: float,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """`diagnose --advise`: the twin (given, or inferred from the traces as `topology from-traces`
    does, from `diagnosed` — the diagnosis the document `diagnosis` was made of), its what-ifs from
    the diagnosis document, ranked; the document holds the diagnosis."""
    first: dict[str, Trace] = {}  # Jaeger returns a trace once per service it passes through
    for t in ts.traces:
        first.setdefault(t.trace_id, t)
    ts = TraceSet(list(first.values()), ts.inputs, ts.warnings, ts.traces_read)
    for v in validations:
        if v.get("schema") != VALIDATION_SCHEMA:
            raise ValueError(f"--validation: a {VALIDATION_SCHEMA} document is needed, not {v.get('schema')!r}")
    if topology_path is not None:
        topo, source = topology_mod.load(topology_path), str(topology_path)
    else:
        topo, _ = inferred_twin(ts, InferOptions(sampling=sampling, name="diagnose-twin"), None, diagnosed)
        source = "inferred from the traces (the rules of tailscope topology from-traces)"
    recorded = recorded_rate(ts.traces, sampling)
    if recorded.get("rate_per_s") is None:
        raise ValueError(f"the recording rate is unavailable: {recorded['unavailable']}")
    doc = advise_whatifs(
        ts,
        topo,
        whatifs(topo, diagnosis, faster_percent=faster_percent),
        rate_per_s=recorded["rate_per_s"],
        model=model,
        objective_ms=objective_ms,
        duration_s=duration_s,
        validations=validations,
        progress=progress,
    )
    doc["faster_percent"] = faster_percent
    doc["twin"] = {"source": source, "topology": topo}
    doc["diagnosis"] = diagnosis
    return doc


# ---- the lines -----------------------------------------------------------------------------------


def _figure(p: dict, q: str) -> str:
    v = p[f"{q}_ns"]
    r = p.get(f"{q}_ratio_to_baseline")
    return f"{q} {fmt_ns(v)}" + (f" ({fmt_ratio(r)} the baseline)" if r is not None else "")


def _at(p: dict, baseline: bool) -> str:
    """One rate's prediction: its figures (or why there are none), flags, validated or extrapolated."""
    if p.get("p99_ns") is None:
        return f"at {p['rate_per_s']:.4g}/s unavailable ({p.get('unavailable') or 'no figure'})"
    figs = (
        f"p50 {fmt_ns(p['p50_ns'])}, p99 {fmt_ns(p['p99_ns'])}"
        if baseline
        else f"{_figure(p, 'p50')}, {_figure(p, 'p99')}"
    )
    n = f", {p['requests']} requests" if p.get("requests") else ""
    flags = f" [flagged: {'; '.join(p['flags'])}]" if p.get("flags") else ""
    v = p["validation"]
    err = v.get("max_ratio_error")
    check = (
        ("validated, max error " + (f"{err:.0%}" if err is not None else "unavailable"))
        if v["validated"]
        else "extrapolated"
    )
    return f"at {p['rate_per_s']:.4g}/s {figs}{n}{flags} [{check}]"


def _evidence_text(ev: dict) -> str:
    if ev.get("population") is None:
        return f"evidence: unavailable ({ev.get('unavailable', 'none')})"
    parts = [ev["population"]]
    if ev.get("finding"):
        parts.append(ev["finding"].replace("_", " "))
    if ev.get("confidence"):
        parts.append(f"confidence {ev['confidence']}")
    if ev.get("samples") is not None:
        parts.append(f"{ev['samples']} samples")
    tail = ev.get("tail") or {}
    if tail.get("growth_ns") is not None:
        parts.append(
            f"its service grows {fmt_ns(tail['growth_ns'])} in the slowest {tail['slow_traces']} of "
            f"{tail['traces']} requests"
        )
    elif tail.get("unavailable"):
        parts.append(f"tail: unavailable ({tail['unavailable']})")
    return "evidence: " + ", ".join(parts)


def advice_lines(doc: dict) -> list[str]:
    """What `diagnose --advise` prints: every line formatted from the document."""
    v = doc["validation"]["recorded_rate"]
    val = (
        f"p50 {fmt_ratio(v['p50_ratio'])}, p99 {fmt_ratio(v['p99_ratio'])} of the traces "
        f"({'within' if v['within_target'] else 'outside'} the 15 % target)"
        if v.get("max_ratio_error") is not None
        else f"unavailable ({v.get('unavailable')})"
    )
    lines = [
        f"advice: twin of {doc['traces']} traces under {doc['model']}, validated at {doc['rate_per_s']:.4g}/s: {val}"
    ]
    b = doc["baseline"]
    lines.append(
        "baseline (no change): "
        + "; ".join(_at(p, True) for p in b["predictions"])
        + f"; max rate at p99 ≤ {doc['objective_ms']:g} ms {b['max_rate_bound']}"
    )
    for r in doc["ranked"]:
        preds = "; ".join(_at(p, False) for p in r["predictions"])
        lines.append(
            f"{r['rank']:>2}. {r['sentence']}: {preds}; max rate at p99 ≤ {doc['objective_ms']:g} ms "
            f"{r['max_rate_bound']}; {_evidence_text(r['evidence'])}"
        )
    for x in doc["not_run"]:
        lines.append(f" -  {x['sentence']}: unavailable ({x['unavailable']})")
    return lines
