"""The socialnet study's run: the plan (quick / full form, options) → engine runs → the documents
the runner stores. Between phases the run reads what it measured through analysis.py (which rates
met the objective, which models to bisect); it never builds report text."""

from __future__ import annotations

import functools
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tailscope.lab import topology
from tailscope.lab.cpus import requested_cpus
from tailscope.lab.engines import EngineError, run_engine
from tailscope.lab.graph import LOAD, SVC, graph, run_front_load, svc_models
from tailscope.measure.measurement import achieved_per_s
from tailscope.store import EngineDocument
from tailscope.studies.base import RunContext
from tailscope.studies.common import (
    StepProgress,
    pinning_text,
    point_times,
    record_stores,
    requested_stores,
    round_rate,
    run_scale,
)
from tailscope.studies.socialnet.analysis import (
    BASELINE,
    BASELINE_MODEL,
    BEST_CEILING_FILE,
    CEILING_CONNECTIONS,
    COMMON_RATE_FRACTION,
    CONNECTIONS,
    PING_BATCHED_CONCURRENCY,
    REFINE_MODELS,
    SIMULATED_ARM,
    SIMULATED_ARM_POINT,
    STEADY_FRACTION,
    STEADY_TRACE_SAMPLE,
    STORES_ARM,
    SWEEP_FRACTIONS,
    TRACE_LOAD_FILE,
    TRACE_SAMPLE,
    UNPINNED,
    WORK_SIMULATED_GRAPH,
    best_at_objective,
    meets_objective,
    objective_bracket,
    refine_candidates,
    simulated_arm_models,
    simulated_arm_skip_reason,
)
from tailscope.studies.socialnet.tracing import (
    FULL_TRACING_PAIRS,
    TRACING_PAIRS,
    TRACING_SAMPLES,
    run_switched_tracing,
    switched_load,
)
from tailscope.units import fmt_count

CONNECTION_SWEEP = [20, 50, 100]
# Bisections of the objective's bracket (the highest swept rate that met it, the next that missed)
# for std-async and the models that could be the best (refine_candidates): the ratio's two ends.
# The grid's fractions lie 16–33 % apart and the ratio's bracket compounds both models' steps
# (3.15–4.8× in one run); each halving halves each model's step.
REFINE_STEPS = 2
# The in-run transport baseline: pings through the same lean channel a service uses downstream.
PING_CALLS = 2000
PING_WARMUP = 200
# The simulated-stores arm (2d below) runs at most two models: std-async and the best at the objective.
SIMULATED_ARM_MODELS = 2


def tracing_plan(models: list[str], best: str, full: bool) -> list[tuple[str, float, int]]:
    """The tracing pairs to run, in order, as (model, sampling, pairs): the quick form the best model at
    each of TRACING_SAMPLES (TRACING_PAIRS), the full form every model at each (FULL_TRACING_PAIRS)."""
    if not full:
        return [(best, sample, TRACING_PAIRS) for sample in TRACING_SAMPLES]
    return [(m, sample, FULL_TRACING_PAIRS) for m in models for sample in TRACING_SAMPLES]


def core_counts(allowed: int, full: bool) -> list[int]:
    """CPU counts below `allowed` to measure the ceiling on: 1 (quick), or 1, 2, 4, … (full)."""
    if allowed < 2:
        return []
    if not full:
        return [1]
    counts, k = [], 1
    while k < allowed:
        counts.append(k)
        k *= 2
    return counts


def run_study(ctx: RunContext, study: str) -> list[EngineDocument]:
    """Every engine run of the study, in order; the documents are stored under `study`."""
    scale = run_scale(ctx.options)
    duration, warmup = point_times(ctx, quick=(2.0, 0.5), full=(5.0, 1.0), floor=(0.3, 0.1))
    timeout = duration + warmup + 60
    models = list(ctx.options.get("socialnet_models") or svc_models())
    cpus = requested_cpus(ctx.options)
    client_cpu, server_cpu = cpus if cpus else (None, None)
    pinning = pinning_text("graph (every service)", server_cpu, "tailscope-load", client_cpu) if cpus else UNPINNED

    stores = requested_stores(ctx.options)
    # The ready line of the graph last started: every document measured on it records its stores.
    last_ready: dict = {}
    # The stores every graph on the run's own --stores ran (ready lines): whether the simulated-stores arm runs.
    run_stores: list[dict | None] = []

    @contextmanager
    def start_graph(
        model: str,
        out: Path,
        trace_sample: float = 0.0,
        traces: Path | None = None,
        cpu: int | list[int] | None = server_cpu,
        work: str | None = None,
        arm: str | None = None,
    ) -> Iterator[tuple[int, dict]]:
        """A fresh graph on the run's --stores, or on the simulated-stores arm's (`arm`)."""
        mode = "simulated" if arm == SIMULATED_ARM else stores
        with graph(topo_json, model, out, trace_sample, traces, cpu=cpu, stores=mode, work=work) as (port, ready):
            last_ready.clear()
            last_ready.update(ready)
            if arm is None:
                run_stores.append(ready.get("stores"))
            yield port, ready

    def load(port: int, rate: float, connections: int) -> dict:
        return run_front_load(port, rate, connections, duration, warmup, timeout, client_cpu)

    art = Path(ctx.artifacts_dir) / "socialnet"
    art.mkdir(parents=True, exist_ok=True)
    topo_json = topology.to_engine_json(topology.SOCIALNET, art / "socialnet.json")
    front = (json.loads(topo_json.read_text()).get("front") or {}).get("service")
    docs: list[EngineDocument] = []
    fractions = SWEEP_FRACTIONS
    steps = (
        len(models) * (5 + len(fractions))
        + 2 * len(core_counts(len(os.sched_getaffinity(0)), ctx.form == "full"))
        + (1 + REFINE_MODELS) * REFINE_STEPS
        + SIMULATED_ARM_MODELS * (1 + len(fractions) + REFINE_STEPS)
        + 2 * len(CONNECTION_SWEEP)
        + len(tracing_plan(models, "", ctx.form == "full"))
        + 3
    )
    progress = StepProgress(ctx, "socialnet", steps)

    def store_load(
        doc: dict, model: str, kind: str, rate: float, connections: int, point: str, arm: str | None = None
    ) -> None:
        doc["socialnet_point"] = {
            "model": model,
            "kind": kind,
            "rate_per_s": rate,
            "connections": connections,
            "pinning": pinning,
            "work": last_ready.get("work", "real"),
        }
        if arm is not None:
            doc["socialnet_point"][STORES_ARM] = arm
        docs.append(EngineDocument(study, LOAD, record_stores(doc, last_ready), point))

    def point_name(model: str, arm: str | None, rest: str) -> str:
        """ "{model}/{rest}", or "{model}/simulated-stores/{rest}" for the arm's points."""
        return f"{model}/{SIMULATED_ARM_POINT}/{rest}" if arm == SIMULATED_ARM else f"{model}/{rest}"

    def sweep(model: str, rates: list[float], common: float | None, arm: str | None = None) -> list[dict]:
        """The open-loop points at `rates` on one graph, traced at 1 % like every socialnet point (the
        traces run into overload and are not kept); the graph's document is stored as "{model}/graph"."""
        points = []
        suffix = f"-{SIMULATED_ARM_POINT}" if arm else ""
        out = art / f"graph-{model}{suffix}.json"
        traces = art / "sweep-traces" / f"{model}{suffix}"
        with start_graph(model, out, TRACE_SAMPLE, traces, arm=arm) as (port, _):
            for rate in rates:
                progress(f"{model} at {fmt_count(rate)}/s" + (", stores simulated" if arm else ""))
                d = load(port, rate, CONNECTIONS)
                kind = "common" if rate == common else "rate"
                store_load(d, model, kind, rate, CONNECTIONS, point_name(model, arm, f"rate/{rate:.0f}"), arm)
                points.append(d)
        _store_graph(study, docs, out, point_name(model, arm, "graph"), model, last_ready, arm)
        shutil.rmtree(traces, ignore_errors=True)
        return points

    def refine(model: str, points: list[dict], arm: str | None = None) -> None:
        """The objective's bracket in `points` halved REFINE_STEPS times; each rate runs on a fresh graph
        (after a rate that missed, a graph still working off its backlog would fail the next) and is
        appended to `points`."""
        bracket = objective_bracket(points)
        for _ in range(REFINE_STEPS):
            mid = round_rate((bracket[0] + bracket[1]) / 2, digits=3) if bracket else 0.0
            if bracket is None or not bracket[0] < mid < bracket[1]:
                break  # nothing met, nothing above missed, or the bracket is one rounding step wide
            progress(
                f"{model} at {fmt_count(mid)}/s (bisecting the objective's bracket)"
                + (", stores simulated" if arm else "")
            )
            # Traced at the sweep's 1 %, like the grid's rates; those traces are not kept.
            suffix = f"-{SIMULATED_ARM_POINT}" if arm else ""
            tdir = art / "refine-traces" / f"{model}{suffix}-{mid:.0f}"
            out = art / f"graph-{model}{suffix}-refine-{mid:.0f}.json"
            with start_graph(model, out, TRACE_SAMPLE, tdir, arm=arm) as (port, _):
                d = load(port, mid, CONNECTIONS)
            shutil.rmtree(tdir, ignore_errors=True)
            store_load(d, model, "refine", mid, CONNECTIONS, point_name(model, arm, f"refine/{mid:.0f}"), arm)
            points.append(d)
            bracket = (mid, bracket[1]) if meets_objective(d) else (bracket[0], mid)

    # 1. Ceilings first (closed loop), each model on a fresh graph, so the common rate can be chosen.
    ceilings: dict[str, float] = {}
    for model in models:
        progress(f"{model} closed loop")
        with start_graph(model, art / f"graph-{model}-ceiling.json") as (port, ready):
            d = load(port, 0, CEILING_CONNECTIONS)
            progress(f"{model} transport ping")
            # One call in flight (the blocking ping-pong's shape: no batching), then
            # PING_BATCHED_CONCURRENCY (calls share wake-ups and sends, as in the loaded graph).
            for concurrency in (1, PING_BATCHED_CONCURRENCY):
                ping = _ping(study, ready, model, scale, front, concurrency)
                if ping is not None:
                    docs.append(ping)
        ceilings[model] = achieved_per_s(d)
        store_load(d, model, "closed", 0, CEILING_CONNECTIONS, f"{model}/closed")
        _store_graph(study, docs, art / f"graph-{model}-ceiling.json", f"{model}/graph-closed", model, last_ready)
    # 1a. Real work vs the busy loops it replaced (issue 27): the baseline model's closed loop once more,
    # with `--work simulated`; the analysis sets its per-service work counters beside the ceiling graph's.
    work_model = BASELINE_MODEL if BASELINE_MODEL in ceilings else next(iter(ceilings), None)
    if work_model is not None:
        progress(f"{work_model} closed loop, work simulated (busy loops)")
        out = art / f"graph-{work_model}-work-simulated.json"
        with start_graph(work_model, out, work="simulated") as (port, _):
            d = load(port, 0, CEILING_CONNECTIONS)
        store_load(d, work_model, "work-simulated", 0, CEILING_CONNECTIONS, f"{work_model}/work-simulated")
        _store_graph(study, docs, out, f"{work_model}/{WORK_SIMULATED_GRAPH}", work_model, last_ready)
    # 1b. Core scaling: std-async's and the best model's ceiling with the graph on fewer of the
    # allowed CPUs (the last k, the server side's end), generator unpinned as in the ceilings. With
    # --cpus the whole graph already runs on one CPU, so there is nothing to scale down.
    allowed = sorted(os.sched_getaffinity(0))
    counts = core_counts(len(allowed), ctx.form == "full") if server_cpu is None else []
    best_ceiling = max(ceilings, key=lambda m: ceilings[m]) if ceilings else None
    if best_ceiling is not None:  # for the isolation study, which measures std-async and this model
        (art / BEST_CEILING_FILE).write_text(
            json.dumps({"model": best_ceiling, "ceiling_per_s": ceilings[best_ceiling]})
        )
    for model in dict.fromkeys(m for m in (BASELINE_MODEL, best_ceiling) if m in ceilings):
        for k in counts:
            progress(f"{model} closed loop on {k} of {len(allowed)} CPUs")
            out = art / f"graph-{model}-cores-{k}.json"
            with start_graph(model, out, cpu=allowed[-k:]) as (port, _):
                d = load(port, 0, CEILING_CONNECTIONS)
            store_load(d, model, "cores", 0, CEILING_CONNECTIONS, f"{model}/cores/{k}")
            d["socialnet_point"]["graph_cpus"] = allowed[-k:]
            d["socialnet_point"]["allowed_cpus"] = len(allowed)
            _store_graph(study, docs, out, f"{model}/graph-cores-{k}", model, last_ready)

    common = (
        round_rate(COMMON_RATE_FRACTION * min(v for v in ceilings.values() if v > 0))
        if any(ceilings.values())
        else 100.0
    )

    # 2. Per model: the open-loop sweep and the common rate, traced at 1 % sampling like every socialnet
    # point (the sweep's traces run into overload, so they are not kept: 2c traces a steady load).
    sweeps: dict[str, list[dict]] = {}
    for model in models:
        rates = sorted({round_rate(f * ceilings[model]) for f in fractions if ceilings[model] > 0} | {common})
        sweeps[model] = sweep(model, rates, common)

    # 2b. The objective's bracket, halved for the ratio's two ends (std-async and the contenders for best).
    for model in refine_candidates(sweeps):
        refine(model, sweeps[model])
    shutil.rmtree(art / "refine-traces", ignore_errors=True)

    # 2c. The traces the analyze study reads (capstone Figures 6 and 8): each model held at a steady
    # STEADY_FRACTION of its ceiling — the capstone traced "around 70-80% of the system capacity" — on a
    # fresh graph, sampled at STEADY_TRACE_SAMPLE so that one point gives every async call enough samples.
    # What load the traces come from is written beside them (TRACE_LOAD_FILE) for the analysis to check.
    for model in models:
        if ceilings[model] <= 0:
            continue
        rate = round_rate(STEADY_FRACTION * ceilings[model])
        progress(f"{model} traced at {fmt_count(rate)}/s ({STEADY_FRACTION * 100:.0f} % of its ceiling)")
        traces = art / "traces" / model
        with start_graph(model, art / f"graph-{model}-steady.json", STEADY_TRACE_SAMPLE, traces) as (port, _):
            d = load(port, rate, CONNECTIONS)
        store_load(d, model, "steady", rate, CONNECTIONS, f"{model}/steady/{rate:.0f}")
        d["socialnet_point"] |= {"fraction": STEADY_FRACTION, "ceiling_per_s": ceilings[model]}
        traces.mkdir(parents=True, exist_ok=True)
        (traces / TRACE_LOAD_FILE).write_text(
            json.dumps(
                {
                    "model": model,
                    "kind": "steady",
                    "fraction": STEADY_FRACTION,
                    "rate_per_s": rate,
                    "ceiling_per_s": ceilings[model],
                    "achieved_per_s": achieved_per_s(d),
                    "trace_sample": STEADY_TRACE_SAMPLE,
                    "connections": CONNECTIONS,
                }
            )
        )
    shutil.rmtree(art / "sweep-traces", ignore_errors=True)

    # 2d. The simulated-stores arm (issue 27: best ÷ std-async at the objective on the real graph beside
    # the simulated one, from one run). When every graph so far ran real stores, std-async and the best
    # model at the objective repeat 1, 2 and 2b with `--stores simulated` — the closed-loop ceiling, the
    # sweep at the same fractions of that ceiling (no common rate: it compares models, not stores), the
    # same bisections — as points of their own ("{model}/simulated-stores/…", socialnet_point.stores_arm),
    # which the analysis splits off before anything else reads the documents. Quick form: 2 models ×
    # (1 ceiling + 7 rates + 2 bisections) = 20 points of 2.5 s (2 s + 0.5 s warm-up) and 8 graph starts on
    # simulated stores (≈ 0.3 s each with the stop): ≈ 55 s. On simulated stores the arm would repeat the
    # run's own points: skipped, one step (the analysis derives the same reason from the documents).
    skip = simulated_arm_skip_reason(run_stores, models)
    if skip:
        progress(f"simulated-stores arm skipped: {skip}")
    for model in [] if skip else simulated_arm_models(models, best_at_objective(sweeps)):
        progress(f"{model} closed loop, stores simulated")
        out = art / f"graph-{model}-{SIMULATED_ARM_POINT}-ceiling.json"
        with start_graph(model, out, arm=SIMULATED_ARM) as (port, _):
            d = load(port, 0, CEILING_CONNECTIONS)
        store_load(
            d, model, "closed", 0, CEILING_CONNECTIONS, point_name(model, SIMULATED_ARM, "closed"), SIMULATED_ARM
        )
        _store_graph(
            study, docs, out, point_name(model, SIMULATED_ARM, "graph-closed"), model, last_ready, SIMULATED_ARM
        )
        ceiling = achieved_per_s(d)
        rates = sorted({round_rate(f * ceiling) for f in fractions if ceiling > 0})
        refine(model, sweep(model, rates, None, SIMULATED_ARM), SIMULATED_ARM)
    shutil.rmtree(art / "sweep-traces", ignore_errors=True)
    shutil.rmtree(art / "refine-traces", ignore_errors=True)

    # What starting a thread costs here, for std-async's thread per async call (same run).
    progress("thread creation baseline")
    docs.append(_thread_create_baseline(study, scale, cpus))

    # 3. Connections sweep at the common rate: std-async vs the best ceiling.
    best = max(ceilings, key=lambda m: ceilings[m])
    for model in dict.fromkeys([BASELINE_MODEL if BASELINE_MODEL in models else best, best]):
        with start_graph(model, art / f"graph-{model}-connections.json") as (port, _):
            for c in CONNECTION_SWEEP:
                progress(f"{model} c={c}")
                d = load(port, common, c)
                store_load(d, model, "connections", common, c, f"{model}/connections/{c}")

    # 4. Tracing cost, closed loop: per (model, sampling) one warmed graph and one closed-loop run, the
    # front's sampling switched on the run's interval boundaries (tracing.py). The document records the
    # sampling it compares (trace_sample), so the analysis groups the sides by (model, sampling).
    for model, sample, pairs in tracing_plan(models, best, ctx.form == "full"):
        pct = f"{sample * 100:g}"

        def switched(port: int, at_s: float, hlog: Path, pairs: int = pairs) -> dict:
            return switched_load(port, at_s, hlog, pairs, client_cpu)

        def record(d: dict, kind: str, point: str, model: str = model) -> None:
            store_load(d, model, kind, 0, CONNECTIONS, point)

        run_switched_tracing(
            functools.partial(start_graph, model, art / f"graph-{model}-tracing-{pct}.json"),
            switched,
            record,
            model,
            sample,
            pairs,
            art / "tracing-cost" / f"{model}-{pct}",
            progress,
        )
    progress("done")
    return docs


def _ping(
    study: str, ready: dict, model: str, scale: float, front: str | None, concurrency: int = 1
) -> EngineDocument | None:
    """CPU per RPC of the transport alone, against one RPC service of the running graph, with
    `concurrency` calls in flight (point {model}/ping, or {model}/ping-batched above 1)."""
    ports, pids = ready.get("ports") or {}, ready.get("pids") or {}
    target = next((n for n in sorted(ports) if n != front and n in pids), None)
    if target is None:  # decompose() then says: no ping phase was run for this model
        return None
    calls = max(200, round(PING_CALLS * scale))
    args = [
        "--ping",
        str(ports[target]),
        "--ping-pid",
        str(pids[target]),
        "--ping-calls",
        str(calls),
        "--ping-warmup",
        str(max(1, round(PING_WARMUP * scale))),
        "--ping-concurrency",
        str(concurrency),
    ]
    doc = run_engine(SVC, args, timeout_s=120).document
    doc.setdefault("ping", {})["service"] = target
    doc["socialnet_point"] = {"model": model, "kind": "ping", "concurrency": concurrency}
    return EngineDocument(study, SVC, doc, f"{model}/ping" + ("-batched" if concurrency > 1 else ""))


def _thread_create_baseline(study: str, scale: float, cpus: tuple[int, int] | None) -> EngineDocument:
    args = [
        "--only",
        "thread_create",
        "--placement",
        "pinned" if cpus else "unpinned",
        "--scale",
        f"{0.2 * scale:g}",
    ]
    if cpus:
        args += ["--cpus", f"{cpus[0]},{cpus[1]}"]
    doc = run_engine(BASELINE, args, timeout_s=120).document
    doc["socialnet_point"] = {"model": None, "kind": "thread_create"}
    return EngineDocument(study, BASELINE, doc, "baseline/thread_create")


def _store_graph(
    study: str, docs: list[EngineDocument], path: Path, point: str, model: str, ready: dict, arm: str | None = None
) -> None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise EngineError(f"{SVC} --all --model {model} wrote no result document at {path}: {e}") from e
    doc["socialnet_point"] = {"model": model, "kind": "graph"} | ({STORES_ARM: arm} if arm else {})
    docs.append(EngineDocument(study, SVC, record_stores(doc, ready), point))
