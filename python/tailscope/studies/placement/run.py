"""Study `placement`, run: the plan, the engine runs and the documents they store.

The run adapts to what it measures (the offered rate from the closed-loop ceiling, the tested
services from the sizing, the placements from the scores): it calls analysis.py for those
decisions, and stores them in its own document (ANALYSIS) beside the engines' documents.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tailscope.lab import procstat, topology
from tailscope.lab.engines import EngineError, find_engine, run_engine
from tailscope.lab.graph import graph, store_pids
from tailscope.lab.load import http_load_args
from tailscope.lab.placement import cpu_text, make_pools, placement_flags, sibling_groups
from tailscope.measure.measurement import achieved_per_s
from tailscope.store import EngineDocument
from tailscope.studies.base import RunContext
from tailscope.studies.common import StepProgress, record_stores, requested_stores, round_rate
from tailscope.studies.placement.analysis import (
    ANALYSIS,
    COLOCATED,
    DEFAULT_WEIGHTS,
    KERNELS,
    KNAPSACK,
    LATENCY_DRIVEN,
    LOAD,
    RANDOM,
    SERVICES,
    SVC,
    Scenario,
    is_store,
    percentile,
    scenarios,
    sensitivity_points,
    sensitivity_scores,
    store_system,
    weight_millicores,
)
from tailscope.traces.critpath import critical_paths
from tailscope.units import fmt_count

STRESS, CRITPATH = "tailscope-stress", "tailscope-critpath"
HOTEL = topology.REPO_ROOT / "topologies" / "hotel.yaml"
MIX = (("/hotels", 60.0), ("/recommendations", 39.0), ("/user", 0.5), ("/reservation", 0.5))
INTENSITIES = (1, 2, 4, 8)
MODEL = "coroutine"  # DeathStarBench's hotel services are Go: goroutines on a few OS threads
CONNECTIONS = 16
LOAD_FRACTION = 0.5  # of the closed-loop ceiling: loaded, not saturated, so slowdowns show in the tail
TRACE_SAMPLE = 0.25
SAMPLE_INTERVAL_S = 0.1


# ---- the plan ---------------------------------------------------------------------------------


@dataclass
class Plan:
    tested: int | None  # how many services the sensitivity step tests (None: all), by CPU need
    kernels: tuple[str, ...]
    intensities: tuple[int, ...]
    duration_s: float
    warmup_s: float
    form: str
    weights: dict = field(default_factory=lambda: DEFAULT_WEIGHTS)


def make_plan(ctx: RunContext) -> Plan:
    scale = float(ctx.options.get("scale") or 1.0)
    weights = plan_weights(ctx.options.get("score_weights"))
    if ctx.options.get("placement_tiny"):
        return Plan(1, ("cpu",), (1,), 0.5, 0.2, "tiny", weights)
    if ctx.form == "full":
        return Plan(None, KERNELS, INTENSITIES, max(0.3, 5.0 * scale), max(0.1, 1.0 * scale), "full", weights)
    return Plan(2, ("cpu", "l3", "membw"), (1, 8), max(0.3, 2.0 * scale), max(0.1, 0.5 * scale), "quick", weights)


def plan_weights(override: dict | None) -> dict:
    """The score weights: DEFAULT_WEIGHTS with options["score_weights"] over them, range-checked."""
    w = {k: dict(v) for k, v in DEFAULT_WEIGHTS.items()}
    for group, values in (override or {}).items():
        if group not in w:
            raise ValueError(f"score_weights: unknown group '{group}' (intensity, kernel, position)")
        for key, value in values.items():
            value = float(value)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"score_weights.{group}.{key}: {value} is not a finite number ≥ 0")
            w[group][int(key) if group == "intensity" else str(key)] = value
    return w


def scenario_document(sc: Scenario) -> dict:
    """A placement as the analysis document stores it: {performance, how[, seed]}."""
    if sc.method == COLOCATED:
        how = "nothing pinned: every service and the generator on every CPU"
    elif sc.method == KNAPSACK:
        how = (
            f"0-1 knapsack: greatest total score {sc.total_score:.3f} within {sc.capacity_millicores} millicores "
            f"(uses {sc.total_weight_millicores})"
        )
    elif sc.method == RANDOM:
        how = f"services in random order (seed {sc.seed}) while they fit {sc.capacity_millicores} millicores"
    elif sc.method == LATENCY_DRIVEN:
        how = "largest exclusive critical-path p99 first while they fit (not the thesis's hand-made latency placements)"
    else:
        raise ValueError(f"placement method '{sc.method}' is not one the study runs")
    doc: dict = {"performance": None if sc.performance is None else list(sc.performance), "how": how}
    if sc.seed is not None:
        doc["seed"] = sc.seed
    return doc


# ---- running ----------------------------------------------------------------------------------


class CpuSeries(procstat.PeriodicSampler):
    """CPU % of each process from /proc every SAMPLE_INTERVAL_S (procstat.read_process), for sizing."""

    def __init__(self, pids: dict[str, int]):
        super().__init__(SAMPLE_INTERVAL_S, "placement-cpu")
        self.pids = pids
        self.samples: dict[str, list[float]] = {n: [] for n in pids}

    def begin(self) -> None:
        self._last = {n: procstat.read_process(p) for n, p in self.pids.items()}
        self._t_last = time.monotonic()

    def tick(self) -> None:
        now = time.monotonic()
        for n, p in self.pids.items():
            snap = procstat.read_process(p)
            before = self._last.get(n)
            if snap is not None and before is not None and now > self._t_last:
                ticks = snap.cpu_ticks - before.cpu_ticks
                self.samples[n].append(100.0 * ticks / procstat.CLK_TCK / (now - self._t_last))
            self._last[n] = snap
        self._t_last = now


@contextmanager
def _stress(kernel: str | None, instances: int, cpus: Sequence[int], duration_s: float, out: list) -> Iterator[None]:
    """Runs tailscope-stress beside the block (its own time limit; it also dies with us)."""
    if kernel is None:
        yield
        return
    args = ["--kernel", kernel, "--instances", str(instances), "--cpus", cpu_text(cpus)]
    args += ["--duty-cycle", "1", "--duration-s", f"{duration_s:.3f}"]
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(run_engine(STRESS, args, timeout_s=duration_s + 60).document)
        except BaseException as e:  # reported after the block
            errors.append(e)

    t = threading.Thread(target=run, name="placement-stress", daemon=True)
    t.start()
    time.sleep(0.3)  # the kernels start before the load's warm-up ends; the warm-up is never recorded
    try:
        yield
    finally:
        t.join()
    if errors:
        raise EngineError(f"{STRESS} --kernel {kernel}: {errors[0]}")


def _exclusive_by_service(traces: Path) -> tuple[dict[str, dict], str | None]:
    """Per service: exclusive critical-path time p50/p99 over the traces (tailscope-critpath)."""
    jaeger = traces / "traces.jaeger.json"
    if not jaeger.exists():
        return {}, f"no trace file at {jaeger}"
    try:
        a = critical_paths(jaeger)
    except EngineError as e:
        return {}, f"{CRITPATH}: {e}"
    out = {}
    if a.services.empty:
        return {}, "the traces held no analysable request"
    per_trace = a.services.groupby(["service", "trace_id"]).exclusive_ns.sum().reset_index()
    for service, g in per_trace.groupby("service"):
        xs = g.exclusive_ns.tolist()
        out[str(service)] = {"p50_ns": percentile(xs, 50), "p99_ns": percentile(xs, 99), "traces": len(xs)}
    return out, None


def run_placement(ctx: RunContext, study: str) -> list[EngineDocument]:
    """The study's runs (ceiling, sizing, sensitivity, placements) → the documents to store."""
    plan = make_plan(ctx)
    art = Path(ctx.artifacts_dir) / "placement"
    art.mkdir(parents=True, exist_ok=True)
    docs: list[EngineDocument] = []
    analysis: dict = {"plan": {**plan.__dict__, "weights": _jsonable(plan.weights)}, "unavailable": []}
    pools = make_pools(sorted(os.sched_getaffinity(0)), plan.form == "full")
    if pools is None:
        analysis["unavailable"].append(
            {"name": "placement", "variant": "", "reason": "fewer than 2 physical cores: no pools to compare"}
        )
        return [EngineDocument(study, ANALYSIS, _analysis_doc(analysis))]
    analysis["pools"] = pools.__dict__
    stress_missing = _missing(STRESS)
    hotel_doc = topology.load(HOTEL)
    topo_json = topology.write_json(hotel_doc, art / "hotel.json")
    budget = 4 + (plan.tested or len(SERVICES)) * (1 + len(plan.kernels) * len(plan.intensities) * 2) + 5
    progress = StepProgress(ctx, "placement", budget)

    mix_args = [a for path, w in MIX for a in ("--mix", f"{path}={w:g}")]

    def point(
        tag: str,
        rate: float,
        flags: list[str],
        load_cpus: list[int] | None,
        meta: dict,
        stress: tuple[str | None, int, list[int]] = (None, 0, []),
        sample_cpu: bool = False,
        store_cpus: dict[str, str] | None = None,
    ) -> dict:
        """One graph run; `store_cpus` (system → CPU list) pins the real store servers through the
        topology's store_servers key, the way --placement pins a service."""
        out, traces = art / f"graph-{tag}.json", art / "traces" / tag
        topo = topo_json
        if store_cpus:
            servers = {system: {"cpus": cpus} for system, cpus in store_cpus.items()}
            topo = topology.write_json({**hotel_doc, "store_servers": servers}, art / f"hotel-{tag}.json")
        stress_docs: list[dict] = []
        series: dict[str, list[float]] = {}
        traced = rate > 0  # the closed-loop ceiling only sets the rate: no traces
        with graph(
            topo,
            MODEL,
            out,
            TRACE_SAMPLE if traced else 0.0,
            traces if traced else None,
            extra=flags,
            stores=requested_stores(ctx.options),
        ) as (port, ready):
            with _stress(stress[0], stress[1], stress[2], plan.warmup_s + plan.duration_s + 1.0, stress_docs):
                args = http_load_args(
                    port, "/", CONNECTIONS, rate, plan.duration_s, plan.warmup_s, timeout="2s", cpus=load_cpus
                )
                if sample_cpu:
                    # The store servers too (store:SYSTEM): a real store's CPU is part of what a placement
                    # must fit; the sizing records it beside the services'.
                    sampled = {k: int(v) for k, v in (ready.get("pids") or {}).items()} | store_pids(ready)
                    with CpuSeries(sampled) as cs:
                        load = run_engine(LOAD, args + mix_args, timeout_s=plan.duration_s + 120).document
                    series = cs.samples
                else:
                    load = run_engine(LOAD, args + mix_args, timeout_s=plan.duration_s + 120).document
        try:
            gdoc = json.loads(out.read_text())
        except (OSError, ValueError) as e:
            raise EngineError(f"{SVC} --all wrote no result document at {out}: {e}") from e
        exclusive, why = _exclusive_by_service(traces) if rate > 0 else ({}, "closed-loop ceiling: not traced")
        meta = {**meta, "tag": tag, "rate_per_s": rate, "flags": flags, "load_cpus": load_cpus}
        if store_cpus:
            meta["store_cpus"] = store_cpus
        load["placement_point"] = {**meta, "exclusive": exclusive, "exclusive_unavailable": why}
        if series:
            load["placement_point"]["cpu_samples_pct"] = series
        gdoc["placement_point"] = meta
        docs.append(EngineDocument(study, LOAD, record_stores(load, ready), tag))
        docs.append(EngineDocument(study, SVC, record_stores(gdoc, ready), tag + "/graph"))
        for s in stress_docs:
            s["placement_point"] = meta
            docs.append(EngineDocument(study, STRESS, s, tag + "/stress"))
        return load

    # 1. Ceiling (closed loop, unpinned) → the study's offered rate; sizing at that rate.
    progress("closed-loop ceiling")
    ceiling = achieved_per_s(point("ceiling", 0, [], None, {"kind": "ceiling"}))
    rate = round_rate(LOAD_FRACTION * ceiling) if ceiling > 0 else 100.0
    analysis["rate_per_s"] = rate
    progress(f"sizing at {fmt_count(rate)}/s")
    sizing = point("sizing", rate, [], None, {"kind": "sizing"}, sample_cpu=True)
    cpu = sizing["placement_point"].get("cpu_samples_pct", {})
    # What is placed: the services and, with real stores, each store server (store:SYSTEM, sampled by
    # CpuSeries under that name): a real store competes for the cores like a service (issue 27).
    stores = tuple(sorted(s for s in cpu if is_store(s)))
    units = (*SERVICES, *stores)
    analysis["units"] = list(units)
    need = {s: {"peak_pct": max(cpu.get(s) or [0.0]), "p95_pct": percentile(cpu.get(s) or [], 95)} for s in units}
    weights = {s: weight_millicores(need[s]["peak_pct"]) for s in units}
    analysis["sizing"] = {s: {**need[s], "weight_millicores": weights[s]} for s in units}

    def placed(performance: Sequence[str] | None, pools_cpus: tuple[list[int], list[int]]) -> dict[str, str]:
        """store_cpus of the real stores: those in `performance` on the first CPUs, the rest on the second."""
        perf, general = pools_cpus
        return {store_system(s): cpu_text(perf if performance and s in performance else general) for s in stores}

    # 2. Sensitivity: the services with the largest need first (quick tests only the top ones); every
    # real store server is tested, so the study always gives the stores' sensitivity scores.
    tested = sorted(SERVICES, key=lambda s: -weights[s])[: plan.tested or len(SERVICES)] + list(stores)
    analysis["tested"] = tested
    perf_cores = sibling_groups(pools.performance)
    home = perf_cores[0][:1]  # the service under test: the first CPU of the first performance core
    same = perf_cores[0][1:2] if pools.smt and len(perf_cores[0]) > 1 else home
    positions = [("same-core", same)]
    if len(perf_cores) > 1:
        positions.append(("other-core", perf_cores[1]))
    else:
        analysis["unavailable"].append(
            {
                "name": "other-core interference",
                "variant": "",
                "reason": "the performance pool has one core here: kernels ran on the same core only",
            }
        )
    analysis["same_core"] = "SMT sibling" if same != home else "same CPU, time-shared (no SMT)"
    if stress_missing:
        analysis["unavailable"].append(
            {"name": "interference points", "variant": "", "reason": f"{STRESS} {stress_missing}"}
        )
    for service in tested:
        flags = [] if is_store(service) else ["--placement", f"{service}={cpu_text(home)}"]
        flags += [a for s in SERVICES if s != service for a in ("--placement", f"{s}={cpu_text(pools.general)}")]
        store_cpus = placed([service], (home, pools.general))
        base_meta = {"kind": "sensitivity", "service": service, "kernel": None, "instances": 0, "position": None}
        progress(f"{service} isolated")
        tag = service.replace(":", "-")  # a file name: store:redis → store-redis
        point(f"iso-{tag}", rate, flags, pools.general, base_meta, store_cpus=store_cpus)
        if stress_missing:
            continue
        for kernel in plan.kernels:
            for n in plan.intensities:
                for pos, cpus in positions:
                    progress(f"{service} with {kernel}×{n} ({pos})")
                    meta = {**base_meta, "kernel": kernel, "instances": n, "position": pos, "stress_cpus": cpus}
                    point(
                        f"{tag}-{kernel}-{n}-{pos}",
                        rate,
                        flags,
                        pools.general,
                        meta,
                        (kernel, n, cpus),
                        store_cpus=store_cpus,
                    )

    # 3. Placements, compared at the same offered rate.
    points = sensitivity_points([d.document for d in docs if d.engine in (LOAD, SVC)])
    scores = {s: v.score for s, v in sensitivity_scores(points, plan.weights).items()}
    excl = sizing["placement_point"].get("exclusive") or {}
    capacity = 1000 * len(pools.performance)
    plans = scenarios(units, weights, scores, {s: (excl.get(s) or {}).get("p99_ns") for s in units}, capacity)
    analysis["scenarios"] = {name: scenario_document(sc) for name, sc in plans.items()}
    analysis["capacity_millicores"] = capacity
    for name, sc in plans.items():
        progress(f"scenario {name}")
        flags = placement_flags(sc.performance, pools, SERVICES)
        point(
            f"scenario-{name}",
            rate,
            flags,
            None if sc.performance is None else pools.general,
            {"kind": "scenario", "scenario": name},
            # colocated pins nothing: its stores inherit the supervisor's affinity like its services
            store_cpus=None if sc.performance is None else placed(sc.performance, (pools.performance, pools.general)),
        )
    progress("done")
    docs.append(EngineDocument(study, ANALYSIS, _analysis_doc(analysis)))
    return docs


def _missing(engine: str) -> str | None:
    try:
        find_engine(engine)
    except EngineError as e:
        return f"is not available: {e}"
    return None


def _jsonable(w: dict) -> dict:
    return {g: {str(k): v for k, v in vals.items()} for g, vals in w.items()}


def _analysis_doc(analysis: dict) -> dict:
    return {"schema": "tailscope.result/1", "engine": ANALYSIS, "measurements": [], **analysis}
