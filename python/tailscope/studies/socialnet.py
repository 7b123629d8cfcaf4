"""Study `socialnet`: DeathStarBench's compose-post graph under five concurrency models.

The same 12-service graph (topologies/socialnet.yaml, converted to the engine's
JSON) runs under each model in turn: `tailscope-svc --all --model M` starts one
process per service on loopback, and tailscope-load drives the HTTP front
(`/wrk2-api/post/compose`, HTTP/1.1 keep-alive) open loop, latency measured
from the intended send time.

Per model (one graph process tree per model, every point of the model against it):

- a closed-loop run (-R 0) gives the model's ceiling;
- open-loop rates at fractions of that ceiling, up to and beyond saturation,
  give the latency-vs-throughput curve; for std-async and the contenders for
  best model the bracket of the p99 objective (highest rate that met it, next that missed) is
  then bisected REFINE_STEPS times, each rate on a fresh graph;
- one common rate (a fraction of the *slowest* model's ceiling) gives latency
  CDFs that compare like with like;
- the graph's result document gives CPU per request (user + sys of every
  service process ÷ front requests) and threads (sum over services of the
  per-process maximum).

After each model's closed-loop run, a short bounded ping phase (`tailscope-svc --ping`: the
built-in `__ping` method through the same multiplexed channel the services use, against one leaf
service of that graph) measures CPU per RPC of the transport alone (both ends); one short
`tailscope-baseline --only thread_create` run gives the cost of starting a thread. With the
services' `calls` and `async_threads` counters and context switches, they decompose each model's
CPU per request (the `decomposition` of summarize()).

Then: a connections sweep (20 → 100) at the common rate for std-async and the
best model, and the tracing cost — closed-loop throughput of the best model at
100 % sampling vs tracing off, alternated, median of the pairs. Traces (1 %
sampling during each model's sweep) are saved under the run's artifacts as
Jaeger JSON and OTLP JSON for `tailscope analyze`.

Everything shares the machine's cores (nothing pinned: 12 service processes
and the generator on 2 cores); comparisons are side by side in one run and
stated as ratios.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import AbstractContextManager
from pathlib import Path

from tailscope.lab import topology
from tailscope.lab.cpus import requested_cpus
from tailscope.lab.engines import EngineError, run_engine
from tailscope.lab.graph import LOAD, MODELS, PATH, SVC, graph, run_front_load
from tailscope.measure.measurement import achieved_per_s, measurement
from tailscope.report import plots
from tailscope.report.blocks import DOES_NOT_HOLD, HOLDS, PARTLY, UNAVAILABLE, Figure, ReferenceCheck, Section, Table
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.common import StepProgress, pinning_text, point_times, round_rate, run_scale, study_section
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

BASELINE_MODEL = "std-async"
# Keep-alive connections of the closed-loop ceiling and of the open-loop sweep: the same number, so
# no model's open-loop rate is capped below its ceiling by Little's law (one request in flight per
# connection: rate ≤ connections ÷ latency). With 32 for the sweep, coroutine at 3 700/s needed 33 in
# flight (p50 9 ms): its requests waited for a free connection (intended p99 200 ms, actual 13.5 ms),
# and its max rate at the objective was the generator's connection count, not the model.
CEILING_CONNECTIONS = 64
CONNECTIONS = CEILING_CONNECTIONS
CONNECTION_SWEEP = [20, 50, 100]
SWEEP_FRACTIONS = [0.3, 0.6, 0.8, 0.95, 1.1, 1.3, 1.6]
COMMON_RATE_FRACTION = 0.6  # of the slowest model's ceiling: every model sustains it
P99_OBJECTIVE_NS = 50e6
TARGET_RATIO = 4.0  # best ÷ std-async max rate at the p99 objective (issue 14; the article's 30k/8k ≈ 3.75)
# Bisections of the objective's bracket (the highest swept rate that met it, the next that missed)
# for std-async and the models that could be the best (refine_candidates): the ratio's two ends.
# The grid's fractions lie 16–33 % apart and the ratio's bracket compounds both models' steps
# (3.15–4.8× in one run); each halving halves each model's step.
REFINE_STEPS = 2
REFINE_MODELS = 2  # besides std-async: the contenders for "best" (refine_candidates)
BASELINE = "tailscope-baseline"
# The in-run transport baseline: pings through the same lean channel a service uses downstream.
PING_CALLS = 2000
PING_WARMUP = 200
# The second ping's calls in flight: an RPC of the loaded graph shares wake-ups and sends with
# others, so its cost lies between this ping's and the one-at-a-time ping's.
PING_BATCHED_CONCURRENCY = 16
TRACE_SAMPLE = 0.01
# The capstone's scheduling + join delay of the first async calls (its Figure 6 text; analyze and Figure 8 compare with it).
CAPSTONE_DELAY_RANGE_NS = (8e6, 23e6)
TRACING_PAIRS = 2


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


def refine_candidates(sweeps: dict[str, list[dict]]) -> list[str]:
    """The models whose objective bracket is bisected: std-async (the ratio's denominator), and of
    the others every one that could still be the best — whose first miss lies above the highest
    rate any other model met on the grid (two models meeting at the same grid rate are both
    refined) — at most REFINE_MODELS of them, the highest first."""
    met = {m: max((_achieved(d) for d in ds if _meets(d)), default=0.0) for m, ds in sweeps.items()}
    brackets = {m: objective_bracket(ds) for m, ds in sweeps.items()}
    top = max((v for m, v in met.items() if m != BASELINE_MODEL), default=0.0)
    others = sorted(
        (m for m, b in brackets.items() if m != BASELINE_MODEL and b is not None and b[1] > top),
        key=lambda m: -met[m],
    )[:REFINE_MODELS]
    return [m for m in (BASELINE_MODEL, *others) if m in sweeps]


def objective_bracket(sweep: list[dict]) -> tuple[float, float] | None:
    """(the highest offered rate that met the p99 objective, the lowest offered rate above it that
    missed), or None when no rate met it or none above the best one missed."""
    met = [d["socialnet_point"]["rate_per_s"] for d in sweep if _meets(d)]
    if not met:
        return None
    low = max(met)
    above = [
        d["socialnet_point"]["rate_per_s"] for d in sweep if not _meets(d) and d["socialnet_point"]["rate_per_s"] > low
    ]
    return (low, min(above)) if above else None


def _p99(doc: dict) -> float | None:
    m = measurement(doc, "latency_intended")
    return m.p_ns("99") if m else None


_achieved = achieved_per_s


class SocialnetStudy:
    name = "socialnet"
    title = "Microservice graph: compose-post under five concurrency models"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        scale = run_scale(ctx.options)
        duration, warmup = point_times(ctx, quick=(2.0, 0.5), full=(5.0, 1.0), floor=(0.3, 0.1))
        timeout = duration + warmup + 60
        models = list(ctx.options.get("socialnet_models") or MODELS)
        cpus = requested_cpus(ctx.options)
        client_cpu, server_cpu = cpus if cpus else (None, None)
        pinning = (
            pinning_text("graph (every service)", server_cpu, "tailscope-load", client_cpu)
            if cpus
            else "unpinned (graph and generator share every core)"
        )

        def start_graph(
            model: str, out: Path, trace_sample: float = 0.0, traces: Path | None = None
        ) -> AbstractContextManager[tuple[int, dict]]:
            return graph(topo_json, model, out, trace_sample, traces, cpu=server_cpu)

        def load(port: int, rate: float, connections: int) -> dict:
            return run_front_load(port, rate, connections, duration, warmup, timeout, client_cpu)

        art = Path(ctx.artifacts_dir) / "socialnet"
        art.mkdir(parents=True, exist_ok=True)
        topo_json = topology.to_engine_json(topology.SOCIALNET, art / "socialnet.json")
        front = (json.loads(topo_json.read_text()).get("front") or {}).get("service")
        docs: list[EngineDocument] = []
        fractions = SWEEP_FRACTIONS
        steps = (
            len(models) * (4 + len(fractions))
            + 2 * len(core_counts(len(os.sched_getaffinity(0)), ctx.form == "full"))
            + (1 + REFINE_MODELS) * REFINE_STEPS
            + 2 * len(CONNECTION_SWEEP)
            + 2 * TRACING_PAIRS
            + 2
        )
        progress = StepProgress(ctx, "socialnet", steps)

        def store_load(doc: dict, model: str, kind: str, rate: float, connections: int, point: str) -> None:
            doc["socialnet_point"] = {
                "model": model,
                "kind": kind,
                "rate_per_s": rate,
                "connections": connections,
                "pinning": pinning,
            }
            docs.append(EngineDocument(self.name, LOAD, doc, point))

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
                    ping = self._ping(ready, model, scale, front, concurrency)
                    if ping is not None:
                        docs.append(ping)
            ceilings[model] = _achieved(d)
            store_load(d, model, "closed", 0, CEILING_CONNECTIONS, f"{model}/closed")
            self._store_graph(docs, art / f"graph-{model}-ceiling.json", f"{model}/graph-closed", model)
        # 1b. Core scaling: std-async's and the best model's ceiling with the graph on fewer of the
        # allowed CPUs (the last k, the server side's end), generator unpinned as in the ceilings. With
        # --cpus the whole graph already runs on one CPU, so there is nothing to scale down.
        allowed = sorted(os.sched_getaffinity(0))
        counts = core_counts(len(allowed), ctx.form == "full") if server_cpu is None else []
        best_ceiling = max(ceilings, key=lambda m: ceilings[m]) if ceilings else None
        for model in dict.fromkeys(m for m in (BASELINE_MODEL, best_ceiling) if m in ceilings):
            for k in counts:
                progress(f"{model} closed loop on {k} of {len(allowed)} CPUs")
                out = art / f"graph-{model}-cores-{k}.json"
                with graph(topo_json, model, out, cpu=allowed[-k:]) as (port, _):
                    d = load(port, 0, CEILING_CONNECTIONS)
                store_load(d, model, "cores", 0, CEILING_CONNECTIONS, f"{model}/cores/{k}")
                d["socialnet_point"]["graph_cpus"] = allowed[-k:]
                d["socialnet_point"]["allowed_cpus"] = len(allowed)
                self._store_graph(docs, out, f"{model}/graph-cores-{k}", model)

        common = (
            round_rate(COMMON_RATE_FRACTION * min(v for v in ceilings.values() if v > 0))
            if any(ceilings.values())
            else 100.0
        )

        # 2. Per model: the open-loop sweep and the common rate, traces at 1 % sampling.
        sweeps: dict[str, list[dict]] = {}
        for model in models:
            rates = sorted({round_rate(f * ceilings[model]) for f in fractions if ceilings[model] > 0} | {common})
            out = art / f"graph-{model}.json"
            traces = art / "traces" / model
            with start_graph(model, out, TRACE_SAMPLE, traces) as (port, _):
                for rate in rates:
                    progress(f"{model} at {fmt_count(rate)}/s")
                    d = load(port, rate, CONNECTIONS)
                    kind = "common" if rate == common else "rate"
                    store_load(d, model, kind, rate, CONNECTIONS, f"{model}/rate/{rate:.0f}")
                    sweeps.setdefault(model, []).append(d)
            self._store_graph(docs, out, f"{model}/graph", model)

        # 2b. The objective's bracket, halved for the ratio's two ends. Each rate runs on a fresh graph:
        # after a rate that missed, a graph that is still working off its backlog would fail the next.
        for model in refine_candidates(sweeps):
            bracket = objective_bracket(sweeps[model])
            for _ in range(REFINE_STEPS):
                mid = round_rate((bracket[0] + bracket[1]) / 2, digits=3) if bracket else 0.0
                if bracket is None or not bracket[0] < mid < bracket[1]:
                    break  # nothing met, nothing above missed, or the bracket is one rounding step wide
                progress(f"{model} at {fmt_count(mid)}/s (bisecting the objective's bracket)")
                # Traced at the sweep's 1 %, like the grid's rates; those traces are not kept.
                tdir = art / "refine-traces" / f"{model}-{mid:.0f}"
                with start_graph(model, art / f"graph-{model}-refine-{mid:.0f}.json", TRACE_SAMPLE, tdir) as (port, _):
                    d = load(port, mid, CONNECTIONS)
                shutil.rmtree(tdir, ignore_errors=True)
                store_load(d, model, "refine", mid, CONNECTIONS, f"{model}/refine/{mid:.0f}")
                bracket = (mid, bracket[1]) if _meets(d) else (bracket[0], mid)
        shutil.rmtree(art / "refine-traces", ignore_errors=True)

        # What starting a thread costs here, for std-async's thread per async call (same run).
        progress("thread creation baseline")
        docs.append(self._thread_create_baseline(scale, cpus))

        # 3. Connections sweep at the common rate: std-async vs the best ceiling.
        best = max(ceilings, key=lambda m: ceilings[m])
        for model in dict.fromkeys([BASELINE_MODEL if BASELINE_MODEL in models else best, best]):
            with start_graph(model, art / f"graph-{model}-connections.json") as (port, _):
                for c in CONNECTION_SWEEP:
                    progress(f"{model} c={c}")
                    d = load(port, common, c)
                    store_load(d, model, "connections", common, c, f"{model}/connections/{c}")

        # 4. Tracing cost: best model, closed loop, 100 % sampling vs off, alternated.
        for i in range(TRACING_PAIRS):
            for sample in (0.0, 1.0):
                progress(f"{best} tracing {'on' if sample else 'off'} ({i + 1}/{TRACING_PAIRS})")
                tdir = art / "tracing-cost" / f"{i}-{int(sample * 100)}"
                out = art / f"graph-{best}-tracing-{i}-{int(sample * 100)}.json"
                with start_graph(best, out, sample, tdir if sample else None) as (port, _):
                    d = load(port, 0, CONNECTIONS)
                store_load(
                    d,
                    best,
                    f"tracing-{'on' if sample else 'off'}",
                    0,
                    CONNECTIONS,
                    f"{best}/tracing/{'on' if sample else 'off'}/{i}",
                )
                # The 100 % traces of a closed-loop run are large (~100 MB) and are not the analysis input:
                # only the sweeps' 1 % traces are kept.
                shutil.rmtree(tdir, ignore_errors=True)
        progress("done")
        return docs

    def _ping(
        self, ready: dict, model: str, scale: float, front: str | None, concurrency: int = 1
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
        return EngineDocument(self.name, SVC, doc, f"{model}/ping" + ("-batched" if concurrency > 1 else ""))

    def _thread_create_baseline(self, scale: float, cpus: tuple[int, int] | None) -> EngineDocument:
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
        return EngineDocument(self.name, BASELINE, doc, "baseline/thread_create")

    def _store_graph(self, docs: list[EngineDocument], path: Path, point: str, model: str) -> None:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise EngineError(f"{SVC} --all --model {model} wrote no result document at {path}: {e}") from e
        doc["socialnet_point"] = {"model": model, "kind": "graph"}
        docs.append(EngineDocument(self.name, SVC, doc, point))

    # ---- report ---------------------------------------------------------------------------------

    def section(self, store: Store, run_id: str) -> Section:
        docs = store.documents(run_id, self.name)
        sec = study_section(
            self,
            store,
            run_id,
            section_id="socialnet",
            intro=(
                "DeathStarBench's social-network compose-post request through 12 services "
                "(topologies/socialnet.yaml; stores and caches simulated with documented latency distributions), "
                "each service a process on loopback, all under one concurrency model at a time: "
                "<em>std-async</em> (DeathStarBench's handler: std::async launch::async + launch::deferred, thread "
                "per connection), <em>std-thread</em>, <em>pool-blocking</em> (fixed pool blocking on futures), "
                "<em>pool-callback</em> (IO dispatcher + pool, callbacks carrying the request context) and "
                "<em>coroutine</em> (C++20 coroutines, one event loop per core, when_all fan-out). tailscope-load "
                f"drives {PATH} open loop with {CONNECTIONS} keep-alive connections; latency from the intended "
                "send time."
            ),
        )
        loads = [d.document for d in docs if d.engine == LOAD and "socialnet_point" in d.document]
        graphs = {d.point: d.document for d in docs if d.engine == SVC}
        baseline = next((d.document for d in docs if d.engine == BASELINE), None)
        if not loads:
            sec.notes.append("no socialnet measurements were stored for this run")
            return sec
        pinning = loads[0]["socialnet_point"].get("pinning", "unpinned (graph and generator share every core)")
        sec.intro += (
            f" Placement: {pinning}"
            + ("" if pinning.startswith("unpinned") else " (tailscope run --cpus CLIENT,SERVER)")
            + "."
        )
        summary = summarize(loads, graphs, baseline)
        for n in summary["notes"]:
            sec.notes.append(n)
        sec.blocks.append(_curve_figure(summary))
        if summary["common_rate"]:
            sec.blocks.append(_cdf_figure(loads, summary["common_rate"]))
        sec.blocks.append(_summary_table(summary))
        sec.blocks.append(_decomposition_table(summary))
        conn = [d for d in loads if d["socialnet_point"]["kind"] == "connections"]
        if conn:
            sec.blocks.append(_connections_figure(conn))
        if summary["tracing"]:
            sec.blocks.append(_tracing_table(summary["tracing"]))
        fig8 = async_call_cdf_figure(store, run_id)  # capstone Figure 8
        if fig8:
            sec.blocks.append(fig8)
        check8 = figure8_check(store, run_id)
        if check8:
            sec.add_references([check8], "Capstone Figure 8 vs here")
        return sec


STUDY = SocialnetStudy()


# ---- analysis (pure functions of the stored documents; tested without engines) -----------------


def summarize(loads: list[dict], graphs: dict[str, dict], baseline: dict | None = None) -> dict:
    """Everything the section shows, from the stored documents. `graphs`: tailscope-svc documents by
    point ("{model}/graph", "{model}/ping"); `baseline`: the run's thread_create baseline document."""
    models = [m for m in MODELS if any(d["socialnet_point"]["model"] == m for d in loads)]
    per: dict[str, dict] = {}
    common_rate = None
    notes: list[str] = []
    for m in models:
        mine = [d for d in loads if d["socialnet_point"]["model"] == m]
        closed = [d for d in mine if d["socialnet_point"]["kind"] == "closed"]
        sweep = sorted(
            (d for d in mine if d["socialnet_point"]["kind"] in ("rate", "common", "refine")),
            key=lambda d: d["socialnet_point"]["rate_per_s"],
        )
        ok_points = [d for d in sweep if _meets(d)]
        at_objective = max((_achieved(d) for d in ok_points), default=0.0)
        # The grid's other side: the lowest offered rate above it that missed the objective.
        first_miss = min(
            (
                d["socialnet_point"]["rate_per_s"]
                for d in sweep
                if not _meets(d) and d["socialnet_point"]["rate_per_s"] > at_objective
            ),
            default=None,
        )
        common = next((d for d in sweep if d["socialnet_point"]["kind"] == "common"), None)
        if common is not None:
            common_rate = common["socialnet_point"]["rate_per_s"]
        g = graphs.get(f"{m}/graph") or {}
        totals = g.get("totals", {})
        front_requests = (totals.get("front") or {}).get("requests") or 0
        errors = {
            k: sum(int(s.get("counters", {}).get(k, 0)) for s in g.get("services", {}).values())
            for k in ("errors", "rejections", "timeouts", "malformed_frames")
        }
        per[m] = {
            "ceiling": _achieved(closed[0]) if closed else None,
            "at_objective": at_objective,
            "first_miss": first_miss,
            "bisections": sum(1 for d in sweep if d["socialnet_point"]["kind"] == "refine"),
            "sweep": [
                (_achieved(d), _p99(d), d["socialnet_point"]["rate_per_s"], d["load"].get("errors_total", 0))
                for d in sweep
            ],
            "common": common,
            "cpu_per_request_ns": (totals.get("cpu_s", 0) * 1e9 / front_requests) if front_requests else None,
            "threads": totals.get("threads_max_sum"),
            "errors": errors,
        }
        per[m]["decomposition"] = decompose(g, graphs.get(f"{m}/ping"), baseline, graphs.get(f"{m}/ping-batched"))
        per[m]["cores"] = _core_points(mine, graphs, m, closed[0] if closed else None)
        per[m]["ceiling_cpu_per_request_ns"] = _graph_cpu_per_request(graphs.get(f"{m}/graph-closed") or {})
    base = per.get(BASELINE_MODEL, {}).get("at_objective") or 0
    for p in per.values():
        p["ratio"] = p["at_objective"] / base if base else None
        cb = per.get(BASELINE_MODEL, {}).get("ceiling") or 0
        p["ceiling_ratio"] = p["ceiling"] / cb if cb and p["ceiling"] else None
    tracing = _tracing(loads)
    best = max(per, key=lambda m: per[m]["at_objective"]) if per else None
    if best and base:
        r = per[best]["at_objective"] / base
        notes.append(
            f"Target best model ≥ {TARGET_RATIO:g}× std-async at p99 ≤ {fmt_ns(P99_OBJECTIVE_NS)}: {best} reached "
            f"{fmt_ratio(r)} ({'met' if r >= TARGET_RATIO else 'not met'}){_grid_bracket(per, best)}."
        )
        if r < TARGET_RATIO and best != BASELINE_MODEL:
            notes += _why_not(per, best, r)
    elif best:
        notes.append(
            f"std-async met the p99 objective of {fmt_ns(P99_OBJECTIVE_NS)} at none of its rates: "
            "the ratio at the objective is undefined; ceilings are compared instead."
        )
    scaling = _core_scaling_note(per)
    if scaling:
        notes.append(scaling)
    elif per:
        pinning = loads[0]["socialnet_point"].get("pinning", "")
        why = (
            "the graph was pinned to one CPU (tailscope run --cpus), so there was no smaller CPU count to run it on"
            if pinning and not pinning.startswith("unpinned")
            else "no closed-loop run on fewer CPUs was stored (a machine with one allowed CPU has none to drop)"
        )
        notes.append(f"Core scaling unavailable: {why}.")
    if tracing:
        notes.append(
            f"Target tracing at 100 % sampling ≤ 5 % throughput cost: measured "
            f"{tracing['cost'] * 100:.1f} % on {tracing['model']} "
            f"({'met' if tracing['cost'] <= 0.05 else 'not met'}; median of {tracing['pairs']} alternated pairs)."
        )
    return {"models": models, "per": per, "common_rate": common_rate, "tracing": tracing, "notes": notes, "best": best}


def _core_points(mine: list[dict], graphs: dict[str, dict], model: str, closed: dict | None) -> list[dict]:
    """A model's closed-loop ceiling per number of graph CPUs: the core-scaling runs, then the
    all-CPU ceiling (its CPU count from the runs' allowed_cpus); CPU per request from each graph."""
    points = []
    for d in sorted(
        (d for d in mine if d["socialnet_point"]["kind"] == "cores"),
        key=lambda d: len(d["socialnet_point"]["graph_cpus"]),
    ):
        k = len(d["socialnet_point"]["graph_cpus"])
        g = graphs.get(f"{model}/graph-cores-{k}") or {}
        points.append({"cpus": k, "ceiling": _achieved(d), "cpu_per_request_ns": _graph_cpu_per_request(g)})
    if points and closed is not None:
        allowed = mine[0]["socialnet_point"].get("allowed_cpus") or next(
            (d["socialnet_point"].get("allowed_cpus") for d in mine if d["socialnet_point"].get("allowed_cpus")), None
        )
        if allowed:
            points.append(
                {
                    "cpus": int(allowed),
                    "ceiling": _achieved(closed),
                    "cpu_per_request_ns": _graph_cpu_per_request(graphs.get(f"{model}/graph-closed") or {}),
                }
            )
    return points


def _graph_cpu_per_request(g: dict) -> float | None:
    totals = g.get("totals", {})
    requests = (totals.get("front") or {}).get("requests") or 0
    return totals.get("cpu_s", 0) * 1e9 / requests if requests else None


def _core_scaling_note(per: dict) -> str | None:
    """How the measured models' ceilings (std-async's and the best ceiling's) grew from 1 graph CPU
    to all, and the ratio between them at each count: the only scaling evidence a small machine gives."""
    models = [m for m in dict.fromkeys([BASELINE_MODEL, *per]) if per.get(m, {}).get("cores")]
    if not models:
        return None
    parts = []
    for m in models:
        pts = per[m]["cores"]
        steps = " → ".join(f"{fmt_count(p['ceiling'])}/s on {p['cpus']}" for p in pts)
        growth = pts[-1]["ceiling"] / pts[0]["ceiling"] if pts[0]["ceiling"] else None
        parts.append(
            f"{m} {steps} CPU{'s' if pts[-1]['cpus'] > 1 else ''}"
            + (f" ({fmt_ratio(growth)} for {fmt_ratio(pts[-1]['cpus'] / pts[0]['cpus'])} the CPUs)" if growth else "")
        )
    text = (
        "Core scaling, closed-loop ceiling with the graph on 1 … all allowed CPUs (generator unpinned): "
        + "; ".join(parts)
    )
    if models[0] == BASELINE_MODEL:
        a = {p["cpus"]: p["ceiling"] for p in per[BASELINE_MODEL]["cores"]}
        for other in models[1:]:
            b = {p["cpus"]: p["ceiling"] for p in per[other]["cores"]}
            ratios = [f"{fmt_ratio(b[k] / a[k])} on {k}" for k in sorted(a) if k in b and a[k]]
            if ratios:
                text += f". {other} ÷ std-async ceiling: " + ", ".join(ratios)
    return text + "."


def decompose(graph: dict | None, ping: dict | None, baseline: dict | None, ping_batched: dict | None = None) -> dict:
    """One model's CPU per request, taken apart with the run's own measurements.

    Every figure is a number or None, and every None has its reason in `unavailable`. `ping_batched`
    (PING_BATCHED_CONCURRENCY calls in flight) gives the transport's low end: batched_* figures.
    """
    why: dict[str, str] = {}
    g = graph or {}
    totals = g.get("totals") or {}
    services = (g.get("services") or {}).values()
    requests = (totals.get("front") or {}).get("requests") or 0
    out: dict = {"requests": requests, "unavailable": why}
    if not graph:
        why["graph"] = "the model's graph wrote no result document"
    if not requests:
        for f in ("cpu_per_request_ns", "rpcs_per_request", "ctx_switches_per_request", "async_threads_per_request"):
            out[f] = None
            why[f] = "the front served no request"
    else:
        out["cpu_per_request_ns"] = totals["cpu_s"] * 1e9 / requests if "cpu_s" in totals else None
        if out["cpu_per_request_ns"] is None:
            why["cpu_per_request_ns"] = "the graph document has no CPU total"
        # Every downstream RPC is counted once, by its caller.
        calls = [s.get("counters", {}).get("calls") for s in services]
        out["rpcs_per_request"] = sum(calls) / requests if calls and None not in calls else None
        if out["rpcs_per_request"] is None:
            why["rpcs_per_request"] = "the services' calls counters are missing"
        ctx = totals.get("ctx_switches")
        out["ctx_switches_per_request"] = ctx / requests if ctx is not None else None
        if ctx is None:
            why["ctx_switches_per_request"] = "the graph document has no context-switch counts"
        threads = [s.get("counters", {}).get("async_threads") for s in services]
        out["async_threads_per_request"] = sum(threads) / requests if threads and None not in threads else None
        if out["async_threads_per_request"] is None:
            why["async_threads_per_request"] = "the services' async_threads counters are missing"
    out["threads"] = totals.get("threads_max_sum")
    if out["threads"] is None:
        why["threads"] = "the graph document has no thread counts"

    p = (ping or {}).get("ping") or {}
    out["cpu_per_rpc_ns"] = p.get("cpu_per_call_ns")
    out["ping_rtt_p50_ns"] = ((p.get("rtt") or {}).get("percentiles") or {}).get("50")
    if out["cpu_per_rpc_ns"] is None:
        reasons = [u.get("reason", "") for u in (ping or {}).get("unavailable") or []]
        why["cpu_per_rpc_ns"] = "; ".join(r for r in reasons if r) or "no ping phase was run for this model"
    out["transport_cpu_per_request_ns"] = _product(out.get("rpcs_per_request"), out["cpu_per_rpc_ns"])
    out["transport_share"] = _share(out["transport_cpu_per_request_ns"], out.get("cpu_per_request_ns"))
    pb = (ping_batched or {}).get("ping") or {}
    out["batched_cpu_per_rpc_ns"] = pb.get("cpu_per_call_ns")
    if out["batched_cpu_per_rpc_ns"] is None:
        reasons = [u.get("reason", "") for u in (ping_batched or {}).get("unavailable") or []]
        why["batched_cpu_per_rpc_ns"] = "; ".join(r for r in reasons if r) or "no batched ping was run for this model"
    out["batched_transport_share"] = _share(
        _product(out.get("rpcs_per_request"), out["batched_cpu_per_rpc_ns"]), out.get("cpu_per_request_ns")
    )
    if out["batched_transport_share"] is None:
        why["batched_transport_share"] = why.get("batched_cpu_per_rpc_ns") or "CPU per request missing"
    if out["transport_share"] is None:
        why["transport_share"] = why.get("cpu_per_rpc_ns") or why.get("rpcs_per_request") or "CPU per request missing"

    create = measurement(baseline, "thread_create") if baseline else None
    out["thread_create_ns"] = create.p_ns("50") if create else None
    if out["thread_create_ns"] is None:
        reasons = [u.get("reason", "") for u in (baseline or {}).get("unavailable") or []]
        why["thread_create_ns"] = "; ".join(r for r in reasons if r) or "no thread_create baseline in this run"
    out["thread_create_cpu_per_request_ns"] = _product(out.get("async_threads_per_request"), out["thread_create_ns"])
    out["thread_create_share"] = _share(out["thread_create_cpu_per_request_ns"], out.get("cpu_per_request_ns"))
    if out["thread_create_share"] is None:
        why["thread_create_share"] = (
            why.get("thread_create_ns") or why.get("async_threads_per_request") or "CPU per request missing"
        )
    explained = [v for v in (out["transport_cpu_per_request_ns"], out["thread_create_cpu_per_request_ns"]) if v]
    cpu = out.get("cpu_per_request_ns")
    out["rest_cpu_per_request_ns"] = cpu - sum(explained) if cpu is not None and explained else None
    if out["rest_cpu_per_request_ns"] is not None and out["rest_cpu_per_request_ns"] < 0:
        # The ping runs one call at a time; in the loaded graph calls share wake-ups and sends, so an
        # RPC there can cost less than the ping's: a negative remainder is that, not a measurement.
        out["rest_cpu_per_request_ns"] = None
        why["rest_cpu_per_request_ns"] = (
            f"the attributed costs ({fmt_ns(sum(explained))}) exceed the CPU per request ({fmt_ns(cpu)}): the "
            "in-run ping's CPU per RPC, one call in flight, overstates an RPC of the loaded graph"
        )
    elif out["rest_cpu_per_request_ns"] is None:
        why["rest_cpu_per_request_ns"] = "nothing of the CPU per request could be attributed"
    return out


def _product(a: float | None, b: float | None) -> float | None:
    return a * b if a is not None and b is not None else None


def _share(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole else None


def _why_not(per: dict, best: str, ratio: float) -> list[str]:
    """The target missed: which costs the run measured, and what they imply. Only computed sentences."""
    a, b = per[BASELINE_MODEL]["decomposition"], per[best]["decomposition"]
    notes: list[str] = []
    ca, cb = a.get("cpu_per_request_ns"), b.get("cpu_per_request_ns")
    if ca is None or cb is None:
        why = a["unavailable"].get("cpu_per_request_ns") or b["unavailable"].get("cpu_per_request_ns")
        notes.append(f"Decomposition unavailable: CPU per request: {why}.")
        return notes
    cpu_ratio = ca / cb
    notes.append(
        f"Measured decomposition (same run): CPU per request std-async {fmt_ns(ca)}, {best} {fmt_ns(cb)} "
        f"(std-async ÷ {best} = {fmt_ratio(cpu_ratio)})."
    )
    rpc = b.get("cpu_per_rpc_ns") or a.get("cpu_per_rpc_ns")
    parts = []
    for m, d in ((BASELINE_MODEL, a), (best, b)):
        if d.get("rpcs_per_request") is None or d.get("cpu_per_rpc_ns") is None:
            parts.append(f"{m}: transport share unavailable: {d['unavailable'].get('transport_share')}")
            continue
        batched = (
            f"; with {PING_BATCHED_CONCURRENCY} in flight {fmt_ns(d['batched_cpu_per_rpc_ns'])} each, "
            f"{d['batched_transport_share'] * 100:.0f} %: an RPC of the loaded graph lies between"
            if d.get("batched_transport_share") is not None
            else ""
        )
        parts.append(
            f"{m} makes {d['rpcs_per_request']:.1f} RPCs per request at {fmt_ns(d['cpu_per_rpc_ns'])} of CPU each "
            f"(in-run ping, both ends, one call in flight) = {fmt_ns(d['transport_cpu_per_request_ns'])}, "
            f"{d['transport_share'] * 100:.0f} % of its CPU per request"
            + (
                " (more than all of it: the ping, one call in flight, overstates a batched RPC)"
                if d["transport_share"] > 1
                else ""
            )
            + batched
        )
    notes.append("Transport: " + "; ".join(parts) + ".")
    if a.get("thread_create_cpu_per_request_ns") is not None:
        notes.append(
            f"std-async starts {a['async_threads_per_request']:.1f} threads per request (one per async call); at "
            f"this machine's thread_create p50 of {fmt_ns(a['thread_create_ns'])} that is "
            f"{fmt_ns(a['thread_create_cpu_per_request_ns'])}, {a['thread_create_share'] * 100:.0f} % of its CPU "
            "per request."
        )
    else:
        notes.append(f"std-async thread-creation cost unavailable: {a['unavailable'].get('thread_create_share')}.")
    left = []
    for m, d in ((BASELINE_MODEL, a), (best, b)):
        r = d.get("rest_cpu_per_request_ns")
        left.append(
            f"{m} {fmt_ns(r)}"
            if r is not None
            else f"{m} unavailable: {d['unavailable'].get('rest_cpu_per_request_ns')}"
        )
    notes.append(
        f"Left after the transport and thread creation, per request, that these measurements do not attribute: "
        f"{'; '.join(left)}."
    )
    # The closed-loop run's own CPU per request (its graph document): the sweep's graph also served
    # the overloaded rates, whose CPU per request is not the ceiling's.
    busy = [
        f"{m} kept {c * cpu / 1e9:.2f} cores busy at its ceiling of {fmt_count(c)}/s"
        for m in (BASELINE_MODEL, best)
        if (c := per[m].get("ceiling")) and (cpu := per[m].get("ceiling_cpu_per_request_ns"))
    ]
    if busy:
        notes.append("Ceiling × the closed-loop run's CPU per request: " + "; ".join(busy) + ".")
    notes.append(
        f"CPU per request, std-async ÷ {best}: measured {fmt_ratio(cpu_ratio)}; where both are CPU-bound that "
        f"ratio sets best ÷ std-async, so {TARGET_RATIO:g}× needs it to reach {TARGET_RATIO:g}×, or std-async to "
        "run out of something other than CPU "
        f"(threads: {fmt_count(a.get('threads'))} vs {fmt_count(b.get('threads'))}; context switches per request: "
        f"{_fmt_opt(a.get('ctx_switches_per_request'))} vs {_fmt_opt(b.get('ctx_switches_per_request'))})."
    )
    if rpc is None:
        notes.append(f"CPU per RPC unavailable: {b['unavailable'].get('cpu_per_rpc_ns')}.")
    # The measured ratio at the objective beside the CPU ratio: what is not explained by CPU.
    notes.append(
        f"At the p99 objective {best} ÷ std-async is {fmt_ratio(ratio)} against a CPU-per-request ratio of "
        f"{fmt_ratio(cpu_ratio)}: "
        + (
            "the tail, not CPU, limits std-async first."
            if ratio > cpu_ratio * 1.1
            else "CPU per request accounts for the gap."
            if ratio >= cpu_ratio * 0.9
            else f"{best} reaches less than its CPU advantage at the objective."
        )
    )
    return notes


def _fmt_opt(v: float | None) -> str:
    return "unavailable" if v is None else f"{v:.1f}"


def _grid_bracket(per: dict, best: str) -> str:
    """How far the rates tried pin the ratio at the objective: each model's max lies between the
    highest rate that met it and the next rate tried, which missed (the grid, then the bisections of
    that bracket for std-async and the best model)."""
    if best == BASELINE_MODEL:
        return ""
    a, b = per[BASELINE_MODEL], per[best]
    said = [
        f"{m} met it at {fmt_count(p['at_objective'])}/s and "
        + (f"missed at {fmt_count(p['first_miss'])}/s" if p.get("first_miss") else "at every higher rate tried")
        for m, p in ((BASELINE_MODEL, a), (best, b))
    ]
    low = b["at_objective"] / a["first_miss"] if a.get("first_miss") else None
    high = b["first_miss"] / a["at_objective"] if b.get("first_miss") else None
    if low is not None and high is not None:
        span = f"the ratio lies between {fmt_ratio(low)} and {fmt_ratio(high)}"
    elif low is not None:
        span = f"the ratio is at least {fmt_ratio(low)}"
    elif high is not None:
        span = f"the ratio is at most {fmt_ratio(high)}"
    else:
        span = "the grid does not bound the ratio"
    halved = [f"{m} {per[m]['bisections']}" for m in (BASELINE_MODEL, best) if per[m].get("bisections")]
    tried = "on the sweep's grid" + (f" and its bisections ({', '.join(halved)})" if halved else "")
    return f"; {tried} {'; '.join(said)}, so {span}"


def _meets(d: dict) -> bool:
    """A point meets the objective: p99 within it, no errors, and the rate was really served."""
    p99 = _p99(d)
    want = d["socialnet_point"]["rate_per_s"] or 0
    return (
        p99 is not None
        and p99 <= P99_OBJECTIVE_NS
        and not d["load"].get("errors_total")
        and _achieved(d) >= 0.95 * want
    )


def _tracing(loads: list[dict]) -> dict | None:
    on = [d for d in loads if d["socialnet_point"]["kind"] == "tracing-on"]
    off = [d for d in loads if d["socialnet_point"]["kind"] == "tracing-off"]
    if not on or not off:
        return None
    ratios = sorted(_achieved(a) / _achieved(b) for a, b in zip(on, off) if _achieved(b) > 0)
    if not ratios:
        return None
    mid = ratios[len(ratios) // 2] if len(ratios) % 2 else (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
    return {
        "model": on[0]["socialnet_point"]["model"],
        "pairs": len(ratios),
        "ratio": mid,
        "cost": 1 - mid,
        "on": [_achieved(d) for d in on],
        "off": [_achieved(d) for d in off],
    }


# ---- figures and tables -------------------------------------------------------------------------


def _curve_figure(s: dict) -> Figure:
    fig, ax = plots.new_figure()
    for m in s["models"]:
        pts = [(a, p) for a, p, _r, _e in s["per"][m]["sweep"] if p]
        if pts:
            ax.plot([a for a, _ in pts], [p for _, p in pts], marker="o", label=m)
    ax.axhline(P99_OBJECTIVE_NS, color="#57606a", linestyle="--", linewidth=1, label="p99 objective")
    ax.set_yscale("log")
    plots.format_ns_axis(ax.yaxis)
    ax.set_xlabel("achieved requests/s")
    ax.set_ylabel("p99 latency (from intended send)")
    ax.legend(loc="upper left", fontsize=8)
    best = s["best"]
    finding = (
        f"{best} sustains the most at p99 ≤ {fmt_ns(P99_OBJECTIVE_NS)}: {fmt_count(s['per'][best]['at_objective'])}/s"
        if best
        else "no model met the objective"
    )
    return Figure(
        title="Latency vs throughput (open loop, up to saturation)",
        svg=plots.to_svg(fig),
        caption=f"p99 of latency_intended per offered rate; rates are fractions {SWEEP_FRACTIONS} of each "
        f"model's closed-loop ceiling ({CEILING_CONNECTIONS} connections) plus the common rate; "
        f"{CONNECTIONS} connections.",
        finding=finding,
    )


def _cdf_figure(loads: list[dict], rate: float) -> Figure:
    fig, ax = plots.new_figure()
    common = {d["socialnet_point"]["model"]: d for d in loads if d["socialnet_point"]["kind"] == "common"}
    curves, lines = [], []
    for m in MODELS:
        meas = measurement(common.get(m), "latency_intended")
        if meas is None or not meas.cdf:
            continue
        curves.append(plots.CdfCurve(m, meas.cdf))
        p99 = meas.p_ns("99")
        if p99 is not None:
            lines.append((m, p99))
    plots.latency_cdf(ax, curves, ylabel="latency (from intended send)")
    ax.legend(loc="upper left", fontsize=8)
    finding = ", ".join(f"{m} p99 {fmt_ns(v)}" for m, v in sorted(lines, key=lambda x: x[1]))
    return Figure(
        title=f"Latency CDF at a common rate ({fmt_count(rate)} requests/s)",
        svg=plots.to_svg(fig),
        caption=f"Every model at the same offered rate ({COMMON_RATE_FRACTION:.0%} of the slowest model's "
        "ceiling), open loop.",
        finding=finding,
    )


def _connections_figure(conn: list[dict]) -> Figure:
    fig, ax = plots.new_figure()
    found = []
    for m in MODELS:
        pts = sorted(
            (d["socialnet_point"]["connections"], _p99(d))
            for d in conn
            if d["socialnet_point"]["model"] == m and _p99(d)
        )
        if pts:
            ax.plot([c for c, _ in pts], [p for _, p in pts], marker="o", label=m)
            found.append((m, pts))
    ax.set_yscale("log")
    plots.format_ns_axis(ax.yaxis)
    ax.set_xlabel("connections")
    ax.set_ylabel("p99 latency")
    ax.legend(fontsize=8)
    finding = "; ".join(
        f"{m}: p99 {fmt_ns(p[0][1])} at {p[0][0]} → {fmt_ns(p[-1][1])} at {p[-1][0]} connections" for m, p in found
    )
    rate = conn[0]["socialnet_point"]["rate_per_s"]
    return Figure(
        title="Connections sweep (20 → 100) at the common rate",
        svg=plots.to_svg(fig),
        caption=f"Open loop at {fmt_count(rate)} requests/s.",
        finding=finding,
    )


def _summary_table(s: dict) -> Table:
    rows = []
    for m in s["models"]:
        p = s["per"][m]
        c = p["common"]
        common = measurement(c, "latency_intended")
        lat = common.percentiles_ns if common else {}
        e = p["errors"]
        rows.append(
            [
                m,
                fmt_count(p["ceiling"]),
                fmt_ratio(p["ceiling_ratio"]),
                fmt_count(p["at_objective"]),
                fmt_ratio(p["ratio"]),
                fmt_ns(lat.get("50")),
                fmt_ns(lat.get("99")),
                fmt_ns(p["cpu_per_request_ns"]),
                fmt_count(p["threads"]),
                f"{e['errors']}/{e['rejections']}/{e['timeouts']}",
            ]
        )
    return Table(
        title="Per-model summary",
        columns=[
            "model",
            "ceiling /s",
            "vs std-async",
            f"max /s at p99 ≤ {fmt_ns(P99_OBJECTIVE_NS)}",
            "vs std-async",
            "p50 @ common",
            "p99 @ common",
            "CPU / request",
            "threads",
            "errors/rejections/timeouts",
        ],
        rows=rows,
        caption="Ceiling: closed loop. Max at objective: highest achieved open-loop rate with p99 within the "
        "objective, no errors and ≥ 95 % of the offered rate served. CPU / request: user + sys CPU of "
        "all 12 service processes over the sweep ÷ front requests. Threads: sum over services of the "
        "per-process maximum. Errors are summed over every service of the sweep's graph.",
    )


def _decomposition_table(s: dict) -> Table:
    def cell(d: dict, field: str, fmt) -> str:
        v = d.get(field)
        return fmt(v) if v is not None else f"unavailable: {d['unavailable'].get(field, 'not measured')}"

    def pct(v: float) -> str:
        return f"{v * 100:.0f} %"

    def num(v: float) -> str:
        return f"{v:.1f}"

    rows = []
    for m in s["models"]:
        d = s["per"][m]["decomposition"]
        rows.append(
            [
                m,
                cell(d, "cpu_per_request_ns", fmt_ns),
                cell(d, "rpcs_per_request", num),
                cell(d, "cpu_per_rpc_ns", fmt_ns),
                cell(d, "batched_cpu_per_rpc_ns", fmt_ns),
                cell(d, "transport_share", pct),
                cell(d, "batched_transport_share", pct),
                cell(d, "async_threads_per_request", num),
                cell(d, "thread_create_share", pct),
                cell(d, "threads", fmt_count),
                cell(d, "ctx_switches_per_request", num),
            ]
        )
    return Table(
        title="Where a request's CPU goes (measured in this run)",
        columns=[
            "model",
            "CPU / request",
            "RPCs / request",
            "CPU / RPC (ping, 1 in flight)",
            f"CPU / RPC ({PING_BATCHED_CONCURRENCY} in flight)",
            "transport share (1 in flight)",
            f"transport share ({PING_BATCHED_CONCURRENCY} in flight)",
            "threads started / request",
            "thread-creation share",
            "threads",
            "context switches / request",
        ],
        rows=rows,
        caption="RPCs / request: the services' downstream calls counters ÷ front requests. CPU / RPC: an in-run "
        "ping through the same multiplexed channel against one service of the model's graph (user + sys of both "
        f"ends ÷ calls), with one call in flight and with {PING_BATCHED_CONCURRENCY}: an RPC of the loaded graph "
        "shares wake-ups and sends with others, so its cost lies between the two. Transport share: RPCs × CPU per "
        "RPC ÷ CPU per request. Threads started: async-call threads "
        "(std-async, std-thread), costed at the run's thread_create baseline p50. Context switches: voluntary + "
        "involuntary of every service process ÷ front requests.",
    )


def _tracing_table(t: dict) -> Table:
    return Table(
        title="Tracing cost (100 % sampling vs off)",
        columns=["model", "off /s", "on /s", "on ÷ off (median)", "cost"],
        rows=[
            [
                t["model"],
                ", ".join(fmt_count(x) for x in t["off"]),
                ", ".join(fmt_count(x) for x in t["on"]),
                fmt_ratio(t["ratio"]),
                f"{t['cost'] * 100:.1f} %",
            ]
        ],
        caption=f"Closed-loop throughput, {t['pairs']} alternated pairs on fresh graphs; spans of every RPC, "
        "store operation and the 5 probe timestamps of every async call, recorded in per-thread "
        "buffers and written to disk once a second during the run (the cost includes that export).",
    )


# ---- capstone Figure 8: the async calls of this run's traces (the analyze study's measurements) ----


def async_call_cdf_figure(store: Store, run_id: str) -> Figure | None:
    """The capstone's Figure 8: CDFs of the scheduling and join delay of every
    async call in the traced graph (tailscope's 5-timestamp probe), one panel
    per concurrency model, beside the RPC-gap delays of the same traces.
    From the analyze study's measurements of this run; None when it stored none."""
    df = store.measurements(run_id, "analyze")
    if df.empty:
        return None
    cdf = store.cdf(run_id, "analyze")
    calls = df[df["name"].isin(["probe_call_scheduling", "probe_call_join"])]
    if calls.empty:
        return None
    points = sorted(calls["point"].unique())
    import matplotlib.colors
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    # Three panels a row and one legend for all: five models in one row with a legend per panel
    # left each panel ~200 px wide and covered by its own legend (screenshots at 1400 px).
    columns = min(3, len(points))
    rows = -(-len(points) // columns)
    fig, grid = plt.subplots(
        rows, columns, figsize=(4.6 * columns, 3.2 * rows + 1.4), layout="constrained", sharey=True, squeeze=False
    )
    axes = list(grid.flat)
    for ax in axes[len(points) :]:
        ax.set_visible(False)
    # One colour per call in every panel (tab20: the graph has a dozen async calls).
    all_variants = sorted(calls["variant"].unique())
    cmap = plt.get_cmap("tab20")
    colour_of = {v: matplotlib.colors.to_hex(cmap(i % 20)) for i, v in enumerate(all_variants)}
    handles: dict[str, Line2D] = {}
    worst: tuple[float, str, str, str] | None = None
    for ax, point in zip(axes, points, strict=False):
        sub = calls[calls["point"] == point]
        for variant in sorted(sub["variant"].unique()):
            for name, style in (("probe_call_scheduling", "-"), ("probe_call_join", ":")):
                row = sub[(sub["name"] == name) & (sub["variant"] == variant)]
                if row.empty:
                    continue
                pts = cdf[(cdf["point"] == point) & (cdf["name"] == name) & (cdf["variant"] == variant)]
                plots.value_cdf(
                    ax,
                    pts["value_ns"],
                    pts["percentile"],
                    color=colour_of[variant],
                    linestyle=style,
                    linewidth=1.2,
                    label=variant.split(":")[-1],
                )
                if name.endswith("scheduling"):
                    handles.setdefault(variant.split(":")[-1], ax.get_lines()[-1])
                p99 = float(row.iloc[0]["p99_ns"])
                if worst is None or p99 > worst[0]:
                    worst = (p99, point, variant, "scheduling" if name.endswith("scheduling") else "join")
        for name, colour in (("rpc_scheduling", "#000"), ("rpc_join", "#777")):
            pts = cdf[(cdf["point"] == point) & (cdf["name"] == name)]
            if not pts.empty:
                plots.value_cdf(ax, pts["value_ns"], pts["percentile"], color=colour, linewidth=2, label=name)
                handles.setdefault(f"RPC gap {name.split('_')[1]}", ax.get_lines()[-1])
        ax.set_xscale("log")  # also for a panel with nothing drawn
        plots.format_ns_axis(ax.xaxis)
        plots.thin_log_majors(ax.xaxis)
        ax.set_title(point or "(input)", fontsize=9)
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="outside lower center",
        ncols=4,
        fontsize=7,
        frameon=False,
        title="call (solid: scheduling, dotted: join)",
        title_fontsize=7,
    )
    for r in range(rows):
        grid[r][0].set_ylabel("fraction of calls")
    assert worst is not None
    n = int(calls["samples"].sum())
    return Figure(
        "Delay of every async call, per concurrency model (capstone Figure 8)",
        plots.to_svg(fig),
        "Scheduling delay (launch → the call's function starts) and join delay (function ends → the caller "
        "has the value) from tailscope's 5-timestamp probe on every async/deferred call of the sampled "
        f"traces ({fmt_count(n)} call samples), solid and dotted; thick lines: the RPC-gap delays of the same "
        "traces (server span start − client span start, client end − server end).",
        f"Largest p99 among the async calls: {fmt_ns(worst[0])} ({worst[3]} delay of {worst[2]} under {worst[1]}).",
    )


# A call's p99 is cited only when at least this many samples stand behind it (1 % of them lie beyond it).
MIN_P99_SAMPLES = 100


def figure8_check(store: Store, run_id: str) -> ReferenceCheck | None:
    """The capstone's Figure 8 (CDFs of every async call's delay in DeathStarBench, std::async) beside
    this run: std-async's largest async-call p99 against the capstone's 8–23 ms, and against the other
    models' largest. None when the run analyzed no traces with probe calls."""
    df = store.measurements(run_id, "analyze")
    if df.empty:
        return None
    calls = df[df["name"].isin(["probe_call_scheduling", "probe_call_join"])]
    if calls.empty:
        return None
    lo, hi = CAPSTONE_DELAY_RANGE_NS
    reported = f"async-call scheduling and join delays of {fmt_ns(lo)}–{fmt_ns(hi)} under load (std::async)"
    worst: dict[str, tuple[float, str, str, int]] = {}
    for _, r in calls[calls["samples"] >= MIN_P99_SAMPLES].iterrows():
        p99 = float(r["p99_ns"])
        if r["point"] not in worst or p99 > worst[r["point"]][0]:
            kind = "scheduling" if r["name"].endswith("scheduling") else "join"
            worst[r["point"]] = (p99, kind, str(r["variant"]), int(r["samples"]))
    if "std-async" not in worst:
        return ReferenceCheck(
            "capstone Figure 8",
            reported,
            "unavailable",
            UNAVAILABLE,
            f"no std-async async call has {MIN_P99_SAMPLES} or more samples in this run's traces",
        )
    p99, kind, call, n = worst["std-async"]
    others = {m: w for m, w in worst.items() if m != "std-async"}
    above_all = all(p99 > w[0] for w in others.values())
    verdict = HOLDS if p99 >= lo else PARTLY if others and above_all else DOES_NOT_HOLD
    here = f"std-async largest async-call p99 {fmt_ns(p99)} ({kind} delay of {call}, n={fmt_count(n)})"
    other_text = (
        "; the other models' largest: " + ", ".join(f"{m} {fmt_ns(w[0])}" for m, w in sorted(others.items()))
        if others
        else ""
    )
    why = (
        f"{here}, {'within or above' if p99 >= lo else 'below'} the capstone's {fmt_ns(lo)}–{fmt_ns(hi)}"
        f"{other_text}{' (std-async the highest)' if others and above_all else ''}; calls with fewer than "
        f"{MIN_P99_SAMPLES} samples not cited; traces sampled at {TRACE_SAMPLE * 100:g} % over each model's "
        f"open-loop sweep, which runs to {max(SWEEP_FRACTIONS):g}× its ceiling."
    )
    return ReferenceCheck("capstone Figure 8", reported, here, verdict, why)
