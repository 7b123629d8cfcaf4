"""`tailscope advise`: the validated twin run under alternatives, ranked (docs/twin.md).

An alternative is a way to run the same graph: a concurrency model, a pool size, a placement of
services on cores. Study modules contribute them: each source in ALTERNATIVE_SOURCES is a function
(options) → [Alternative]; a new study adds one line there. Each alternative's twin is run at a
ladder of rates (multiples of the recorded rate; twin/ladder.py, shared with `diagnose --advise`),
every rung a fresh graph; its predicted p99 is the load generator's p99 (from the intended send time) at the recorded rate, its max rate at the
objective the highest rung whose p99 is within it on a clean point (no errors, ≥ 95 % of the offered
rate served, the generator not the bottleneck). A flagged point is never a finding without its
flag. Beside every prediction stands the validation error of the twin (under the traced model, the
only one the traces can check), and for the leader the sensitivity to the twin's most uncertain
input: the CPU share of each span's own time, varied ±50 %.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tailscope.diagnose.diagnosis import Diagnosis
from tailscope.lab import topology as topology_mod
from tailscope.lab.graph import POOL_SIZES, svc_models
from tailscope.lab.placement import make_pools, placement_flags
from tailscope.traces.spans import TraceSet
from tailscope.twin.infer import InferOptions, infer
from tailscope.twin.ladder import TwinRuns, climb, ladder_result, rank
from tailscope.twin.validate import _connections, comparison, samples
from tailscope.units import fmt_ns, fmt_ratio

SCHEMA = "tailscope.twin.advice/1"
RATE_LADDER_QUICK = [1.0, 4.0]
RATE_LADDER_FULL = [1.0, 2.0, 4.0, 8.0]
SENSITIVITY = 0.5  # ± share of the CPU fraction
# What one twin run costs besides its measured time: starting and stopping 12 service processes
# and reading the twin's traces (seconds, on the 2-core development VM; for the estimate only).
RUN_OVERHEAD_S = 3.0
QUICK_POOL_WORKERS = 10  # the threads study's middle pool size: neither starved nor oversubscribed


@dataclass
class Alternative:
    name: str
    model: str
    extra_args: list[str] = field(default_factory=list)
    source: str = ""  # the study it comes from
    threads: str = ""  # how many threads serve a request under it, in words


def _threads_text(model: str, workers: int | None = None) -> str:
    if workers is not None:
        return f"{workers} pool threads per service"
    return {
        "std-async": "a new thread per async call",
        "std-thread": "a new thread per call",
        "coroutine": f"event loops = online CPUs ({os.cpu_count()})",
    }.get(model, "the model's default pool")


def model_alternatives(options: dict) -> list[Alternative]:
    return [Alternative(m, m, [], "socialnet", _threads_text(m)) for m in options.get("models") or svc_models()]


def thread_alternatives(options: dict) -> list[Alternative]:
    """The threads study's pool sizes, on the pool models."""
    threads = options.get("threads") or POOL_SIZES
    return [
        Alternative(f"{m} --workers {n}", m, ["--workers", str(n)], "threads", _threads_text(m, n))
        for m in ("pool-blocking", "pool-callback")
        for n in threads
    ]


def placement_alternatives(options: dict) -> list[Alternative]:
    """The placement study's latency-driven placement (its scenarios need interference runs the
    traces cannot replace): the services with the largest critical-path p99 in the traces on the
    performance pool, the rest with the load generator on the general pool. Only with ≥ 2 cores."""
    services: list[str] = options.get("services_by_p99") or []
    pools = make_pools(sorted(os.sched_getaffinity(0)), full=False)
    if pools is None or not services:
        return []
    perf = services[: max(1, len(services) // 2)]  # the traces give no CPU need: half the services by count
    model = options.get("model") or "std-async"
    return [
        Alternative(
            f"{model} latency-driven placement",
            model,
            placement_flags(perf, pools, services),
            "placement",
            _threads_text(model) + f"; {', '.join(perf)} on CPUs {pools.performance}",
        )
    ]


# Each study module that has a way to run the graph differently contributes here.
ALTERNATIVE_SOURCES: list[Callable[[dict], list[Alternative]]] = [
    model_alternatives,
    thread_alternatives,
    placement_alternatives,
]


def quick_alternatives(model: str) -> list[Alternative]:
    """Three: the traced model (the one the validation checks), a bounded blocking pool (the
    threads study's middle size) and coroutines (no thread per call)."""
    out = [Alternative(model, model, [], "socialnet", _threads_text(model))]
    pool = Alternative(
        f"pool-blocking --workers {QUICK_POOL_WORKERS}",
        "pool-blocking",
        ["--workers", str(QUICK_POOL_WORKERS)],
        "threads",
        _threads_text("pool-blocking", QUICK_POOL_WORKERS),
    )
    for a in (pool, Alternative("coroutine", "coroutine", [], "socialnet", _threads_text("coroutine"))):
        if a.name != model:
            out.append(a)
    return out[:3]


def all_alternatives(options: dict) -> list[Alternative]:
    seen: set[str] = set()
    out = []
    for src in ALTERNATIVE_SOURCES:
        for a in src(options):
            if a.name not in seen:
                seen.add(a.name)
                out.append(a)
    return out


def estimate_s(alternatives: int, ladder: list[float], duration_s: float, warmup_s: float) -> float:
    """Upper bound of an advise run: the validation, every rung of every alternative, two
    sensitivity runs (a ladder stops at the first rung that fails, so most runs are shorter)."""
    return (1 + alternatives * len(ladder) + 2) * (duration_s + warmup_s + RUN_OVERHEAD_S)


def evaluate(
    topo: dict, alt: Alternative, rate: float, ladder: list[float], objective_ns: float, runs: TwinRuns
) -> dict:
    points = climb(lambda r: runs.run(topo, alt.model, r, alt.extra_args), rate, ladder, objective_ns)
    return {
        "alternative": alt.name,
        "model": alt.model,
        "args": alt.extra_args,
        "source": alt.source,
        "threads": alt.threads,
        **ladder_result(points, objective_ns),
    }


def validation_error(validation: dict, model: str) -> dict:
    """The twin's error under the traced model, stated beside every prediction."""
    e2e = validation["end_to_end"]
    return {
        "model": model,
        "p50_ratio": (e2e["ratios"] or {}).get("p50"),
        "p99_ratio": (e2e["ratios"] or {}).get("p99"),
        "max_ratio_error": validation.get("max_ratio_error"),
        "within_target": validation.get("within_target"),
        "unavailable": e2e.get("unavailable"),
    }


def inferred_twin(
    ts: TraceSet, options: InferOptions, corrections: dict[str, float] | None, diagnosis: Diagnosis | None = None
) -> tuple[dict, dict]:
    """The inferred topology, validated by the engine's rules, and the inference report. `diagnosis`:
    the one already made of the same traces (else infer makes its own)."""
    topo, report = infer(ts, options, corrections, diagnosis)
    return topology_mod.validate(topo, "inferred topology"), report


def advise(
    ts: TraceSet,
    model: str,
    *,
    objective_ms: float,
    options: InferOptions,
    duration_s: float,
    warmup_s: float = 1.0,
    quick: bool = True,
    alternatives: list[Alternative] | None = None,
    corrections: dict[str, float] | None = None,
    validation: dict | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """The advice document (schema tailscope.twin.advice/1). `corrections` are a calibration's
    (fit label → ns taken off); `validation` a comparison already made for the same twin (the
    twin study's), else the twin is validated here first."""
    topo, report = inferred_twin(ts, options, corrections)
    rate = report["recorded_rate"].get("rate_per_s")
    if rate is None:
        raise ValueError(f"the recording rate is unavailable: {report['recorded_rate']['unavailable']}")
    ladder = RATE_LADDER_QUICK if quick else RATE_LADDER_FULL
    conns = _connections(rate * max(ladder), ts.traces)
    objective_ns = objective_ms * 1e6
    if alternatives is None:
        _, per_service = samples(ts)
        by_p99 = sorted(
            per_service, key=lambda s: -float(sorted(per_service[s])[int(0.99 * (len(per_service[s]) - 1))])
        )
        alternatives = (
            quick_alternatives(model) if quick else all_alternatives({"model": model, "services_by_p99": by_p99})
        )
    if progress:
        progress(
            f"advise: {len(alternatives)} alternatives × ≤ {len(ladder)} rates, "
            f"at most ~{estimate_s(len(alternatives), ladder, duration_s, warmup_s):.0f} s"
        )
    runs = TwinRuns(duration_s, warmup_s, conns, progress)
    if validation is None:
        validation = comparison(ts, runs.run(topo, model, rate).traces)
    verr = validation_error(validation, model)
    results = [evaluate(topo, a, rate, ladder, objective_ns, runs) for a in alternatives]
    for r in results:
        r["validation_error"] = verr
        r["validated_directly"] = r["model"] == model and not r["args"]
    ranked = rank(results)
    leader = ranked[0] if ranked and ranked[0]["predicted_p99_ns"] is not None else None
    return {
        "schema": SCHEMA,
        "model": model,
        "objective_ms": objective_ms,
        "rate_per_s": rate,
        "form": "quick" if quick else "full",
        "ladder": ladder,
        "duration_s": duration_s,
        "warmup_s": warmup_s,
        "connections": conns,
        "inference": {k: report[k] for k in ("traces", "front", "recorded_rate", "assumptions", "not_inferred")},
        "validation": validation,
        "validation_error": verr,
        "ranked": ranked,
        "recommendation": recommendation(ranked),
        "sensitivity": sensitivity(ts, options, corrections, leader, rate, objective_ns, runs),
    }


def recommendation(ranked: list[dict]) -> dict:
    """The leader if its p99 at the recorded rate is within the objective — with its flags, which
    every line citing it repeats — or why there is none."""
    if not ranked or not ranked[0]["within_objective"]:
        return {
            "alternative": None,
            "unavailable": "no alternative's predicted p99 at the recorded rate is within the objective",
        }
    r = ranked[0]
    return {
        "alternative": r["alternative"],
        "model": r["model"],
        "args": r["args"],
        "threads": r["threads"],
        "predicted_p99_ns": r["predicted_p99_ns"],
        "flags": r["predicted_flags"],
    }


def sensitivity(
    ts: TraceSet,
    options: InferOptions,
    corrections: dict[str, float] | None,
    leader: dict | None,
    rate: float,
    objective_ns: float,
    runs: TwinRuns,
) -> dict:
    inferred = options.cpu_fraction is None
    varied_what = (
        f"every endpoint's inferred CPU share of own time moved {SENSITIVITY:.0%} of the way to 0 and to 1"
        if inferred
        else f"cpu_fraction ±{SENSITIVITY:.0%}"
    )
    out: dict = {"varied": varied_what, "points": []}
    if leader is None:
        out["unavailable"] = "no alternative has a prediction to vary"
        return out
    out["alternative"] = leader["alternative"]
    alt = Alternative(leader["alternative"], leader["model"], leader["args"], leader["source"], leader["threads"])
    for factor in (1 - SENSITIVITY, 1 + SENSITIVITY):
        if inferred:
            # An inferred split is 0 or 1 per endpoint: × 1.5 would not move a 0, so the share moves
            # towards waiting (× 0.5) or towards CPU (half of the waiting becomes CPU) instead.
            varied = replace(options, cpu_adjust=factor - 1)
            point: dict = {"cpu_fraction": None, "cpu_adjust": factor - 1}
        else:
            f = (options.cpu_fraction or 0.0) * factor
            if f > 1.0:  # a share above 1 does not exist: said, not clamped into a repeat of the base run
                out["points"].append(
                    {
                        "cpu_fraction": None,
                        "predicted_p99_ns": None,
                        "unavailable": f"cpu_fraction {options.cpu_fraction:g} × {factor:g} > 1 "
                        "(all own time is already CPU)",
                    }
                )
                continue
            varied = replace(options, cpu_fraction=f)
            point = {"cpu_fraction": f}
        r2 = evaluate(inferred_twin(ts, varied, corrections)[0], alt, rate, [1.0], objective_ns, runs)
        p = r2["predicted_p99_ns"]
        out["points"].append(
            {
                **point,
                "predicted_p99_ns": p,
                "flags": r2["predicted_flags"],
                "ratio_to_base": p / leader["predicted_p99_ns"] if p is not None else None,
                "unavailable": r2["predicted_p99_unavailable"],
            }
        )
    return out


def advice_lines(doc: dict) -> list[str]:
    """What `tailscope advise` prints and the report's section notes: every line from the document."""
    v = doc["validation_error"]
    lines = [
        f"twin of {doc['inference']['traces']} traces at {doc['rate_per_s']:.4g}/s, validated under {doc['model']}: "
        + (
            f"p50 {fmt_ratio(v['p50_ratio'])}, p99 {fmt_ratio(v['p99_ratio'])} of the traces "
            f"({'within' if v['within_target'] else 'outside'} the 15 % target)"
            if v["p99_ratio"] is not None
            else f"unavailable: {v['unavailable']}"
        )
    ]
    for r in doc["ranked"]:
        p99 = (
            fmt_ns(r["predicted_p99_ns"])
            if r["predicted_p99_ns"] is not None
            else f"unavailable: {r['predicted_p99_unavailable']}"
        )
        check = (
            "the validated configuration"
            if r["validated_directly"]
            else f"extrapolated from the twin validated under {doc['model']} (p99 {fmt_ratio(v['p99_ratio'])})"
        )
        flags = f" [flagged: {'; '.join(r['predicted_flags'])}]" if r["predicted_flags"] else ""
        lines.append(
            f"{r['rank']:>2}. {r['alternative']} ({r['threads']}): predicted p99 {p99} at {doc['rate_per_s']:.4g}/s{flags}; "
            f"max rate at p99 ≤ {doc['objective_ms']:g} ms {r['max_rate_bound']} [{check}]"
        )
    rec = doc["recommendation"]
    if rec.get("alternative"):
        flags = f" [flagged: {'; '.join(rec['flags'])}]" if rec["flags"] else ""
        lines.append(
            f"recommended: {rec['alternative']} ({rec['threads']}), predicted p99 {fmt_ns(rec['predicted_p99_ns'])}{flags}"
        )
    else:
        lines.append(f"recommended: unavailable: {rec['unavailable']}")
    s = doc["sensitivity"]
    if s.get("unavailable"):
        lines.append(f"sensitivity: unavailable: {s['unavailable']}")
    for p in s["points"]:
        if p["predicted_p99_ns"] is None:
            lines.append(f"sensitivity of {s['alternative']}: unavailable: {p['unavailable']}")
            continue
        flags = f" [flagged: {'; '.join(p['flags'])}]" if p.get("flags") else ""
        share = (
            f"CPU share {p['cpu_fraction']:.2g}"
            if p.get("cpu_fraction") is not None
            else f"inferred CPU shares moved {abs(p['cpu_adjust']):.0%} towards {'CPU' if p['cpu_adjust'] > 0 else 'waiting'}"
        )
        lines.append(
            f"sensitivity of {s['alternative']}: {share} → predicted p99 "
            f"{fmt_ns(p['predicted_p99_ns'])} ({fmt_ratio(p['ratio_to_base'])} of the base){flags}"
        )
    return lines
