"""`tailscope advise`: the validated twin run under alternatives, ranked (docs/twin.md).

An alternative is a way to run the same graph: a concurrency model, a pool size, (when the
placement study lands) a placement. Study modules contribute them: each source in
ALTERNATIVE_SOURCES is a function (options) → [Alternative]; a new study adds one line there.
Each alternative's twin is run at a ladder of rates (multiples of the recorded rate); its
predicted p99 is the load generator's p99 (from the intended send time) at the recorded rate, its
max rate at the objective the highest rung whose p99 is within it with no errors and ≥ 95 % of the
offered rate served. Beside every prediction stands the validation error of the twin (under the
traced model, where the traces can check it), and for the leader the sensitivity to the twin's
most uncertain input: the CPU share of each span's own time, varied ±50 %.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import topology as topology_mod
from ..engines import EngineError
from ..studies._common import measurement
from .infer import InferOptions, infer
from .spans import TraceSet
from .validate import _connections, comparison, load_summary, run_twin

ACHIEVED_FRACTION = 0.95
RATE_LADDER_QUICK = [1.0, 2.0, 4.0]
SENSITIVITY = 0.5  # ± share of the CPU fraction


@dataclass
class Alternative:
    name: str
    model: str
    extra_args: list[str] = field(default_factory=list)
    source: str = ""  # the study it comes from


def model_alternatives(options: dict) -> list[Alternative]:
    from ..studies.socialnet import MODELS

    return [Alternative(m, m, [], "socialnet") for m in options.get("models") or MODELS]


def thread_alternatives(options: dict) -> list[Alternative]:
    """The threads study's pool sizes, on the pool models."""
    from ..studies.threads import SOCIALNET_THREADS

    threads = options.get("threads") or SOCIALNET_THREADS
    return [
        Alternative(f"{m} --workers {n}", m, ["--workers", str(n)], "threads")
        for m in ("pool-blocking", "pool-callback")
        for n in threads
    ]


# Each study module that has a way to run the graph differently contributes here (placement: a
# function returning Alternatives with its --cpus/deployment arguments, where the machine allows).
ALTERNATIVE_SOURCES: list[Callable[[dict], list[Alternative]]] = [model_alternatives, thread_alternatives]


def _p99_ns(load: dict) -> float | None:
    m = measurement(load, "latency_intended")
    return m.p_ns("99") if m else None


def _meets(load: dict, rate: float, objective_ns: float) -> bool:
    p99 = _p99_ns(load)
    s = load_summary(load)
    return (
        p99 is not None and p99 <= objective_ns and not s["errors"] and s["achieved_per_s"] >= ACHIEVED_FRACTION * rate
    )


def evaluate(
    topo: dict,
    alt: Alternative,
    rate: float,
    ladder: list[float],
    objective_ns: float,
    *,
    duration_s: float,
    warmup_s: float,
    connections: int,
    progress: Callable[[str], None] | None,
) -> dict:
    points: list[dict] = []
    for k in ladder:
        with tempfile.TemporaryDirectory(prefix="tailscope-advise-") as tmp:
            try:
                run = run_twin(
                    topo,
                    alt.model,
                    rate * k,
                    duration_s=duration_s,
                    warmup_s=warmup_s,
                    connections=connections,
                    workdir=Path(tmp),
                    extra_args=alt.extra_args,
                    progress=progress,
                )
            except EngineError as e:  # e.g. --workers beyond the machine's thread limit: said, not skipped
                points.append({"rate_per_s": rate * k, "unavailable": str(e)})
                break
        p99 = _p99_ns(run.load)
        points.append(
            {
                "rate_per_s": rate * k,
                "p99_ns": p99,
                "meets": _meets(run.load, rate * k, objective_ns),
                **load_summary(run.load),
            }
        )
        if not points[-1]["meets"]:
            break  # higher rungs only load a saturated twin
    first = points[0]
    met: list[float] = [float(p["rate_per_s"]) for p in points if p.get("meets")]
    return {
        "alternative": alt.name,
        "model": alt.model,
        "args": alt.extra_args,
        "source": alt.source,
        "predicted_p99_ns": first.get("p99_ns"),
        "predicted_p99_unavailable": first.get("unavailable"),
        "max_rate_at_objective_per_s": max(met) if met else None,
        "max_rate_note": (f"≥ {max(met):.4g}/s (the highest rung tried)" if met and len(met) == len(ladder) else None),
        "points": points,
    }


def advise(
    ts: TraceSet,
    model: str,
    *,
    objective_ms: float,
    options: InferOptions,
    duration_s: float,
    warmup_s: float = 1.0,
    ladder: list[float] | None = None,
    sources: dict | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """The advice document (schema tailscope.twin.advice/1)."""
    topo, report = infer(ts, options)
    topo = topology_mod.validate(topo, "inferred topology")
    rate = report["recorded_rate"].get("rate_per_s")
    if rate is None:
        raise ValueError(f"the recording rate is unavailable: {report['recorded_rate']['unavailable']}")
    conns = _connections(rate * max(ladder or RATE_LADDER_QUICK), ts.traces)
    objective_ns = objective_ms * 1e6
    with tempfile.TemporaryDirectory(prefix="tailscope-advise-") as tmp:
        base = run_twin(
            topo,
            model,
            rate,
            duration_s=duration_s,
            warmup_s=warmup_s,
            connections=conns,
            workdir=Path(tmp),
            progress=progress,
        )
    validation = comparison(ts, base.traces)
    alternatives: list[Alternative] = []
    for src in ALTERNATIVE_SOURCES:
        alternatives += src(sources or {})
    results = [
        evaluate(
            topo,
            a,
            rate,
            ladder or RATE_LADDER_QUICK,
            objective_ns,
            duration_s=duration_s,
            warmup_s=warmup_s,
            connections=conns,
            progress=progress,
        )
        for a in alternatives
    ]
    for r in results:
        r["validation_p99_ratio"] = (
            validation["end_to_end"]["ratios"]["p99"] if validation["end_to_end"]["ratios"] else None
        )
        r["validated_directly"] = r["model"] == model and not r["args"]
    ranked = sorted(
        results,
        key=lambda r: (
            r["predicted_p99_ns"] is None,
            -(r["max_rate_at_objective_per_s"] or 0),
            r["predicted_p99_ns"] or 0,
        ),
    )
    for i, r in enumerate(ranked, 1):
        r["rank"] = i
    sensitivity = []
    best = ranked[0]
    if best["predicted_p99_ns"] is not None:
        for factor in (1 - SENSITIVITY, 1 + SENSITIVITY):
            f = min(1.0, max(0.0, options.cpu_fraction * factor))
            t2, _ = infer(
                ts, InferOptions(f, options.deferred_gap_us, options.min_traces, options.sampling, options.name)
            )
            t2 = topology_mod.validate(t2, "inferred topology")
            alt = Alternative(best["alternative"], best["model"], best["args"], best["source"])
            r2 = evaluate(
                t2,
                alt,
                rate,
                [1.0],
                objective_ns,
                duration_s=duration_s,
                warmup_s=warmup_s,
                connections=conns,
                progress=progress,
            )
            p = r2["predicted_p99_ns"]
            sensitivity.append(
                {"cpu_fraction": f, "predicted_p99_ns": p, "ratio_to_base": p / best["predicted_p99_ns"] if p else None}
            )
    return {
        "schema": "tailscope.twin.advice/1",
        "model": model,
        "objective_ms": objective_ms,
        "rate_per_s": rate,
        "inference": {k: report[k] for k in ("traces", "front", "recorded_rate", "assumptions", "not_inferred")},
        "validation": validation,
        "ranked": ranked,
        "sensitivity": {"alternative": best["alternative"], "varied": "cpu_fraction ±50 %", "points": sensitivity},
    }


def advice_lines(doc: dict) -> list[str]:
    from ..units import fmt_ns, fmt_ratio

    v = doc["validation"]["end_to_end"]
    lines = [
        f"twin of {doc['inference']['traces']} traces at {doc['rate_per_s']:.4g}/s, validated under {doc['model']}: "
        + (
            f"p50 {fmt_ratio(v['ratios']['p50'])}, p99 {fmt_ratio(v['ratios']['p99'])} of the traces"
            if v.get("ratios")
            else f"unavailable: {v.get('unavailable')}"
        )
    ]
    for r in doc["ranked"]:
        p99 = (
            fmt_ns(r["predicted_p99_ns"])
            if r["predicted_p99_ns"] is not None
            else f"unavailable: {r['predicted_p99_unavailable']}"
        )
        mx = r["max_rate_note"] or (
            f"{r['max_rate_at_objective_per_s']:.4g}/s" if r["max_rate_at_objective_per_s"] else "none tried"
        )
        check = (
            "validated"
            if r["validated_directly"]
            else f"validation error of the twin {fmt_ratio(r['validation_p99_ratio'])} (under {doc['model']})"
        )
        lines.append(
            f"{r['rank']:>2}. {r['alternative']}: predicted p99 {p99}, max rate at p99 ≤ {doc['objective_ms']:g} ms {mx} [{check}]"
        )
    s = doc["sensitivity"]
    for p in s["points"]:
        lines.append(
            f"sensitivity of {s['alternative']}: CPU share {p['cpu_fraction']:.2g} → predicted p99 "
            + (
                f"{fmt_ns(p['predicted_p99_ns'])} ({fmt_ratio(p['ratio_to_base'])})"
                if p["predicted_p99_ns"]
                else "unavailable"
            )
        )
    return lines
