"""Study `placement`: interference sensitivity and a knapsack placement of services on cores.

After the NTUA thesis on DeathStarBench hotel reservation (docs/placement-study.md): the graph
(topologies/hotel.yaml, one process per service, driven through its HTTP front with the
DeathStarBench mix search 60 % / recommend 39 % / login 0.5 % / reserve 0.5 %) is run

1. **sizing**: unpinned at the study's rate; every service's CPU % sampled every 100 ms from
   /proc (procstat.read_process), peak and p95 → its need in millicores (the knapsack weight);
2. **sensitivity**: each service tested alone on the performance pool (the rest of the graph and
   the load generator on the general pool), first without interference, then with each
   `tailscope-stress` kernel at each intensity on the same core (its SMT sibling where the machine
   has SMT, else the same CPU, time-shared) and, where the pool has a second core, on another core
   (shared LLC / memory). Per point: the service's own exclusive critical-path time p50/p99 from
   the traces (tailscope-critpath), end-to-end p50/p99, its CPU time per request and, where the
   PMU counts, IPC. Score = weighted mean of the relative slowdowns (`score_weights`);
3. **placement**: a 0-1 knapsack (placement_knapsack.solve: weight = millicores, value = score,
   capacity = the performance pool's CPUs × 1000) picks the services of the performance pool;
   compared in one run, at the same offered rate, with colocated (nothing pinned), two random
   placements of the same CPU budget (seeded, recorded) and a latency-driven placement (largest
   exclusive critical-path p99 first), by end-to-end p50/p99 and throughput.

Quick form (2 cores): general pool = CPU 0 (with the load generator), performance pool = CPU 1,
kernels on CPU 1; the two services with the largest CPU need, kernels cpu/l3/membw at 1 and 8
instances. Full form: every service, kernel and intensity, pools from sysfs (whole cores).
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tailscope.lab import procstat, topology
from tailscope.lab.engines import EngineError, find_engine, run_engine
from tailscope.lab.graph import graph
from tailscope.lab.load import http_load_args
from tailscope.lab.placement import cpu_text, make_pools, placement_flags, sibling_groups
from tailscope.measure.measurement import achieved_per_s, measurement
from tailscope.report import plots
from tailscope.report.blocks import Figure, Section, Table
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.common import StepProgress, round_rate, study_section
from tailscope.studies.placement_knapsack import Item
from tailscope.studies.placement_knapsack import solve as knapsack
from tailscope.traces.critpath import critical_paths
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

SVC, LOAD, STRESS, CRITPATH = "tailscope-svc", "tailscope-load", "tailscope-stress", "tailscope-critpath"
ANALYSIS = "placement-analysis"  # the study's own document: pools, sizing, decisions
HOTEL = topology.REPO_ROOT / "topologies" / "hotel.yaml"
MIX = (("/hotels", 60.0), ("/recommendations", 39.0), ("/user", 0.5), ("/reservation", 0.5))
SERVICES = ("frontend", "search", "geo", "rate", "profile", "recommendation", "reservation", "user")
KERNELS = ("cpu", "l1i", "l1d", "l2", "l3", "membw", "memcap")
INTENSITIES = (1, 2, 4, 8)
MODEL = "coroutine"  # DeathStarBench's hotel services are Go: goroutines on a few OS threads
CONNECTIONS = 16
LOAD_FRACTION = 0.5  # of the closed-loop ceiling: loaded, not saturated, so slowdowns show in the tail
TRACE_SAMPLE = 0.25
SAMPLE_INTERVAL_S = 0.1
# Defaults of the score (docs/placement-study.md): as in the thesis, the 8-instance points and
# membw weigh most. Override with options["score_weights"] = {"intensity": {...}, "kernel": {...}}.
DEFAULT_WEIGHTS: dict[str, dict] = {
    "intensity": {1: 1.0, 2: 1.5, 4: 2.0, 8: 3.0},
    "kernel": {"cpu": 1.0, "l1i": 1.0, "l1d": 1.0, "l2": 1.0, "l3": 1.5, "membw": 2.0, "memcap": 1.0},
    "position": {"same-core": 1.0, "other-core": 1.0},
}
RANDOM_SEEDS = (1, 2)


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
    weights = _weights(ctx.options.get("score_weights"))
    if ctx.options.get("placement_tiny"):
        return Plan(1, ("cpu",), (1,), 0.5, 0.2, "tiny", weights)
    if ctx.form == "full":
        return Plan(None, KERNELS, INTENSITIES, max(0.3, 5.0 * scale), max(0.1, 1.0 * scale), "full", weights)
    return Plan(2, ("cpu", "l3", "membw"), (1, 8), max(0.3, 2.0 * scale), max(0.1, 0.5 * scale), "quick", weights)


def _weights(override: dict | None) -> dict:
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


# ---- scores and placements (pure functions; tested without engines) ----------------------------


def weight_millicores(peak_cpu_pct: float | None) -> int:
    """A service's CPU need as the knapsack's integer weight: peak CPU % × 10, rounded up, ≥ 1."""
    return max(1, math.ceil((peak_cpu_pct or 0.0) * 10))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of a small sample; None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def relative_slowdowns(base: dict, point: dict) -> dict[str, float]:
    """Relative slowdown of each metric both points have: (interfered − isolated) ÷ isolated;
    IPC is a rate, so its loss is isolated ÷ interfered − 1."""
    out = {}
    for key in ("exclusive_p99_ns", "exclusive_p50_ns", "cpu_per_request_ns", "e2e_p99_ns"):
        b, p = base.get(key), point.get(key)
        if b and p is not None and b > 0:
            out[key] = p / b - 1
    b, p = base.get("ipc"), point.get("ipc")
    if b and p:
        out["ipc"] = b / p - 1
    return out


# The metrics a score uses: IPC where the PMU counts (the thesis's metric), else the service's own
# latency and CPU time. End-to-end p99 is shown, not scored: it moves with every other service.
SCORE_METRICS_COUNTERS = ("ipc", "exclusive_p99_ns")
SCORE_METRICS_NO_COUNTERS = ("exclusive_p99_ns", "cpu_per_request_ns")


def sensitivity_scores(points: list[dict], weights: dict) -> dict[str, dict]:
    """Per service: score = weighted mean over its interference points of the mean relative
    slowdown of the score metrics; `basis` says which metrics (IPC or latency + CPU time)."""
    out: dict[str, dict] = {}
    for service in dict.fromkeys(p["service"] for p in points):
        mine = [p for p in points if p["service"] == service]
        base = next((p for p in mine if p["kernel"] is None), None)
        if base is None:
            continue
        counters = base.get("ipc") is not None
        metrics = SCORE_METRICS_COUNTERS if counters else SCORE_METRICS_NO_COUNTERS
        num = den = 0.0
        cells = {}
        for p in mine:
            if p["kernel"] is None:
                continue
            slow = relative_slowdowns(base, p)
            vals = [slow[m] for m in metrics if m in slow]
            if not vals:
                continue
            s = sum(vals) / len(vals)
            w = (
                weights["intensity"].get(p["instances"], 1.0)
                * weights["kernel"].get(p["kernel"], 1.0)
                * weights["position"].get(p["position"], 1.0)
            )
            cells[f"{p['kernel']}×{p['instances']}@{p['position']}"] = s
            num, den = num + w * s, den + w
        out[service] = {
            "score": num / den if den else None,
            "basis": "IPC loss and exclusive p99" if counters else "exclusive p99 and CPU time per request",
            "cells": cells,
        }
    return out


def fill_pool(order: Sequence[str], weights: dict[str, int], capacity: int) -> list[str]:
    """Services taken in `order` while they fit the capacity (the random and latency-driven placements)."""
    chosen, used = [], 0
    for s in order:
        if used + weights[s] <= capacity:
            chosen.append(s)
            used += weights[s]
    return chosen


def scenarios(
    services: Sequence[str],
    weights: dict[str, int],
    scores: dict[str, float | None],
    exclusive_p99: dict[str, float | None],
    capacity: int,
    seeds: Sequence[int] = RANDOM_SEEDS,
) -> dict[str, dict]:
    """The placements compared: name → {performance: [services], how}. 'colocated' pins nothing."""
    items = [Item(s, weights[s], max(scores.get(s) or 0.0, 0.0)) for s in services]
    best = knapsack(items, capacity)
    out: dict[str, dict] = {
        "colocated": {"performance": None, "how": "nothing pinned: every service and the generator on every CPU"},
        "knapsack": {
            "performance": list(best.chosen),
            "how": f"0-1 knapsack: greatest total score {best.value:.3f} within {capacity} millicores "
            f"(uses {best.weight})",
        },
    }
    for i, seed in enumerate(seeds, 1):
        order = list(services)
        random.Random(seed).shuffle(order)
        out[f"random-{i}"] = {
            "performance": fill_pool(order, weights, capacity),
            "how": f"services in random order (seed {seed}) while they fit {capacity} millicores",
            "seed": seed,
        }
    by_latency = sorted(services, key=lambda s: -(exclusive_p99.get(s) or 0.0))
    out["latency-driven"] = {
        "performance": fill_pool(by_latency, weights, capacity),
        "how": "largest exclusive critical-path p99 first while they fit (the thesis's latency-driven placement)",
    }
    return out


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


class PlacementStudy:
    name = "placement"
    title = "Interference sensitivity and core placement (hotel reservation, knapsack)"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
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
            return [EngineDocument(self.name, ANALYSIS, _analysis_doc(analysis))]
        analysis["pools"] = pools.__dict__
        stress_missing = _missing(STRESS)
        topo_json = topology.to_engine_json(HOTEL, art / "hotel.json")
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
        ) -> dict:
            out, traces = art / f"graph-{tag}.json", art / "traces" / tag
            stress_docs: list[dict] = []
            series: dict[str, list[float]] = {}
            traced = rate > 0  # the closed-loop ceiling only sets the rate: no traces
            with graph(
                topo_json, MODEL, out, TRACE_SAMPLE if traced else 0.0, traces if traced else None, extra=flags
            ) as (port, ready):
                with _stress(stress[0], stress[1], stress[2], plan.warmup_s + plan.duration_s + 1.0, stress_docs):
                    args = http_load_args(
                        port, "/", CONNECTIONS, rate, plan.duration_s, plan.warmup_s, timeout="2s", cpus=load_cpus
                    )
                    if sample_cpu:
                        with CpuSeries({k: int(v) for k, v in (ready.get("pids") or {}).items()}) as cs:
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
            load["placement_point"] = {**meta, "exclusive": exclusive, "exclusive_unavailable": why}
            if series:
                load["placement_point"]["cpu_samples_pct"] = series
            gdoc["placement_point"] = meta
            docs.append(EngineDocument(self.name, LOAD, load, tag))
            docs.append(EngineDocument(self.name, SVC, gdoc, tag + "/graph"))
            for s in stress_docs:
                s["placement_point"] = meta
                docs.append(EngineDocument(self.name, STRESS, s, tag + "/stress"))
            return load

        # 1. Ceiling (closed loop, unpinned) → the study's offered rate; sizing at that rate.
        progress("closed-loop ceiling")
        ceiling = achieved_per_s(point("ceiling", 0, [], None, {"kind": "ceiling"}))
        rate = round_rate(LOAD_FRACTION * ceiling) if ceiling > 0 else 100.0
        analysis["rate_per_s"] = rate
        progress(f"sizing at {fmt_count(rate)}/s")
        sizing = point("sizing", rate, [], None, {"kind": "sizing"}, sample_cpu=True)
        cpu = sizing["placement_point"].get("cpu_samples_pct", {})
        need = {
            s: {"peak_pct": max(cpu.get(s) or [0.0]), "p95_pct": percentile(cpu.get(s) or [], 95)} for s in SERVICES
        }
        weights = {s: weight_millicores(need[s]["peak_pct"]) for s in SERVICES}
        analysis["sizing"] = {s: {**need[s], "weight_millicores": weights[s]} for s in SERVICES}

        # 2. Sensitivity: the services with the largest need first (quick tests only the top ones).
        tested = sorted(SERVICES, key=lambda s: -weights[s])[: plan.tested or len(SERVICES)]
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
            flags = ["--placement", f"{service}={cpu_text(home)}"]
            flags += [a for s in SERVICES if s != service for a in ("--placement", f"{s}={cpu_text(pools.general)}")]
            base_meta = {"kind": "sensitivity", "service": service, "kernel": None, "instances": 0, "position": None}
            progress(f"{service} isolated")
            point(f"iso-{service}", rate, flags, pools.general, base_meta)
            if stress_missing:
                continue
            for kernel in plan.kernels:
                for n in plan.intensities:
                    for pos, cpus in positions:
                        progress(f"{service} with {kernel}×{n} ({pos})")
                        meta = {**base_meta, "kernel": kernel, "instances": n, "position": pos, "stress_cpus": cpus}
                        point(f"{service}-{kernel}-{n}-{pos}", rate, flags, pools.general, meta, (kernel, n, cpus))

        # 3. Placements, compared at the same offered rate.
        points = sensitivity_points([d.document for d in docs if d.engine in (LOAD, SVC)])
        scores = {s: v["score"] for s, v in sensitivity_scores(points, plan.weights).items()}
        excl = sizing["placement_point"].get("exclusive") or {}
        capacity = 1000 * len(pools.performance)
        plans = scenarios(SERVICES, weights, scores, {s: (excl.get(s) or {}).get("p99_ns") for s in SERVICES}, capacity)
        analysis["scenarios"] = plans
        analysis["capacity_millicores"] = capacity
        for name, sc in plans.items():
            progress(f"scenario {name}")
            flags = placement_flags(sc["performance"], pools, SERVICES)
            point(
                f"scenario-{name}",
                rate,
                flags,
                None if sc["performance"] is None else pools.general,
                {"kind": "scenario", "scenario": name},
            )
        progress("done")
        docs.append(EngineDocument(self.name, ANALYSIS, _analysis_doc(analysis)))
        return docs

    # ---- report ---------------------------------------------------------------------------------

    def section(self, store: Store, run_id: str) -> Section:
        docs = store.documents(run_id, self.name)
        sec = study_section(
            self,
            store,
            run_id,
            intro=(
                "DeathStarBench hotel reservation (topologies/hotel.yaml: 8 services, memcached and MongoDB "
                "simulated) under the request mix search 60 % / recommend 39 % / login 0.5 % / reserve 0.5 %, "
                f"{MODEL} model. Each service's CPU need is sized from 100 ms /proc samples; each tested service "
                "runs alone on the performance pool beside tailscope-stress kernels; its sensitivity score "
                "decides, by a 0-1 knapsack, which services get the performance pool; the placements are then "
                "compared with colocated, random and latency-driven ones at the same offered rate."
            ),
        )
        analysis = next((d.document for d in docs if d.engine == ANALYSIS), None)
        if analysis is None or "pools" not in analysis:
            sec.notes.append("no placement measurements were stored for this run")
            return sec
        s = summarize([d.document for d in docs if d.engine in (LOAD, SVC)], analysis)
        pools = analysis["pools"]
        sec.intro += (
            f" Pools: general = CPUs {cpu_text(pools['general'])} (with the load generator), performance = CPUs "
            f"{cpu_text(pools['performance'])} ({pools['how']}); same-core interference = {analysis.get('same_core')}; "
            f"offered rate {fmt_count(analysis.get('rate_per_s'))}/s."
        )
        sec.notes += s["notes"]
        sec.blocks.append(_sizing_table(s, analysis))
        if s["heatmap"]["rows"]:
            sec.blocks.append(_heatmap_figure(s))
        else:
            sec.notes.append("slowdown heatmap unavailable: no interference point was measured")
        reasons = "; ".join(s["counter_reasons"]) or "no service was measured in isolation"
        if any(k in v for v in s["counter_bars"].values() for k in ("ipc", "llc_mpki", "l1d_mpki")):
            sec.blocks.append(_ipc_figure(s))
        else:
            sec.notes.append(f"IPC/MPKI bars unavailable: {reasons}")
        if any(k.startswith("topdown.") for v in s["counter_bars"].values() for k in v):
            sec.blocks.append(_topdown_figure(s))
        else:
            sec.notes.append(f"top-down bars unavailable: {reasons}")
        if s["scenarios"]:
            sec.blocks.append(_scenario_table(s, analysis))
            sec.blocks.append(_scenario_figure(s))
        return sec


STUDY = PlacementStudy()


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


# ---- analysis of the stored documents ----------------------------------------------------------


def _derived(sv: dict) -> tuple[dict[str, float], list[str]]:
    """The derived counter figures of one service (IPC, MPKI, top-down) that were measured, and the
    reasons given for those that were not (tailscope-svc --counters; docs/placement-study.md)."""
    hw = sv.get("counters") or {}
    derived = hw.get("derived") if isinstance(hw.get("derived"), dict) else None
    if derived is None:
        return {}, ["the graph's documents carry no per-service hardware counters (tailscope-svc without --counters)"]
    values: dict[str, float] = {}
    reasons: list[str] = []
    given = derived.get("reasons") if isinstance(derived.get("reasons"), dict) else {}
    for key, raw in derived.items():
        if key == "reasons":
            continue
        v: object = raw
        why = given.get(key) or derived.get(f"{key}_reason")
        if isinstance(raw, dict) and "value" in raw:  # {value, reason}
            v, why = raw.get("value"), raw.get("reason")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            values[key] = float(v)
        elif isinstance(v, dict):  # top-down: {source, frontend_bound, ..., pipeline_width} or {reason}
            # Only the level-1 shares are figures; pipeline_width is the parameter they were computed with.
            parts = {
                f"{key}.{k}": float(x)
                for k, x in v.items()
                if k in TOPDOWN_LEVEL1 and isinstance(x, (int, float)) and not isinstance(x, bool)
            }
            values |= parts
            if not parts and v.get("reason"):
                reasons.append(f"{key}: {v['reason']}")
        elif why:
            reasons.append(f"{key}: {why}")
    return values, reasons


TOPDOWN_LEVEL1 = ("frontend_bound", "bad_speculation", "backend_bound", "retiring")


def _service_figures(gdoc: dict | None, service: str) -> dict:
    """CPU time per request and counters of one service from the graph's document."""
    sv = ((gdoc or {}).get("services") or {}).get(service) or {}
    cpu = sv.get("cpu") or {}
    requests = int((sv.get("counters") or {}).get("requests") or 0)
    cpu_s = (cpu.get("user_s") or 0) + (cpu.get("sys_s") or 0)
    derived, reasons = _derived(sv)
    return {
        "cpu_per_request_ns": cpu_s * 1e9 / requests if requests and cpu_s else None,
        "ipc": derived.get("ipc"),
        "derived": derived,
        "counter_reasons": reasons,
        "placement": sv.get("placement"),
    }


def sensitivity_points(docs: list[dict]) -> list[dict]:
    """One row per sensitivity point: the tested service's metrics (load + graph documents joined by tag)."""
    graphs = {d["placement_point"]["tag"]: d for d in docs if "services" in d and "placement_point" in d}
    rows = []
    for d in docs:
        pp = d.get("placement_point") or {}
        if pp.get("kind") != "sensitivity" or "load" not in d:
            continue
        service = pp["service"]
        m = measurement(d, "latency_intended")
        ex = (pp.get("exclusive") or {}).get(service) or {}
        rows.append(
            {
                "service": service,
                "kernel": pp.get("kernel"),
                "instances": pp.get("instances") or 0,
                "position": pp.get("position"),
                "exclusive_p50_ns": ex.get("p50_ns"),
                "exclusive_p99_ns": ex.get("p99_ns"),
                "traces": ex.get("traces", 0),
                "e2e_p50_ns": m.p_ns("50") if m else None,
                "e2e_p99_ns": m.p_ns("99") if m else None,
                "generator_bottleneck": bool(d["load"].get("generator_bottleneck")),
                **_service_figures(graphs.get(pp["tag"]), service),
            }
        )
    return rows


def summarize(docs: list[dict], analysis: dict) -> dict:
    weights = analysis.get("plan", {}).get("weights") or _jsonable(DEFAULT_WEIGHTS)
    w = {
        "intensity": {int(k): v for k, v in weights["intensity"].items()},
        "kernel": weights["kernel"],
        "position": weights["position"],
    }
    points = sensitivity_points(docs)
    scores = sensitivity_scores(points, w)
    notes: list[str] = []
    # Heatmap: services × (kernel, instances, position).
    cols = sorted(
        {(p["kernel"], p["instances"], p["position"]) for p in points if p["kernel"]},
        key=lambda c: (KERNELS.index(c[0]) if c[0] in KERNELS else 99, c[1], c[2] or ""),
    )
    hm_rows = [s for s in scores if any(p["service"] == s and p["kernel"] for p in points)]
    cells = [
        [scores[s]["cells"].get(f"{k}×{n}@{pos}") for (k, n, pos) in cols]
        for s in hm_rows  # None: not measured
    ]
    # Scenarios.
    sc_docs = {
        d["placement_point"]["scenario"]: d
        for d in docs
        if (d.get("placement_point") or {}).get("kind") == "scenario" and "load" in d
    }
    scen = {}
    for name in analysis.get("scenarios") or {}:
        d = sc_docs.get(name)
        if d is None:
            continue
        m = measurement(d, "latency_intended")
        scen[name] = {
            "p50_ns": m.p_ns("50") if m else None,
            "p99_ns": m.p_ns("99") if m else None,
            "low_confidence": sorted(m.low_confidence) if m else [],
            "achieved_per_s": achieved_per_s(d),
            "errors": d["load"].get("errors_total", 0),
            "generator_bottleneck": bool(d["load"].get("generator_bottleneck")),
        }
    base = scen.get("colocated", {}).get("p99_ns")
    for v in scen.values():
        v["p99_vs_colocated"] = v["p99_ns"] / base if base and v["p99_ns"] else None
    if scen:
        ranked = sorted((v["p99_ns"], n) for n, v in scen.items() if v["p99_ns"])
        if ranked:
            best_p99, best = ranked[0]
            flagged = [n for n, v in scen.items() if v["generator_bottleneck"]]
            notes.append(
                f"Lowest end-to-end p99: {best} ({fmt_ns(best_p99)}"
                + (
                    f", {fmt_ratio(scen[best]['p99_vs_colocated'])} of colocated"
                    if scen[best]["p99_vs_colocated"]
                    else ""
                )
                + "); "
                + ", ".join(
                    f"{n} {fmt_ns(v['p99_ns'])} ({fmt_ratio(v['p99_vs_colocated'])})"
                    for n, v in scen.items()
                    if n != best
                )
                + "."
                + (
                    f" Flagged generator-limited (the generator's own lag, not the graph, may set the tail): "
                    f"{', '.join(flagged)}."
                    if flagged
                    else ""
                )
            )
    knap = (analysis.get("scenarios") or {}).get("knapsack") or {}
    if knap.get("performance") == []:
        notes.append(
            "The knapsack placed no service on the performance pool: no tested service had a score > 0 "
            f"(scores: {', '.join(f'{k} {v:.3f}' for k, v in ((k, v['score']) for k, v in scores.items()) if v is not None) or 'none'}); "
            "its scenario is then the general pool for everything."
        )
    scored = {s: v for s, v in scores.items() if v["score"] is not None}
    if scored:
        top = max(scored, key=lambda s: scored[s]["score"])
        basis = {v["basis"] for v in scored.values()}
        notes.append(
            f"Most sensitive service: {top} (score {scored[top]['score']:.3f}); scores from "
            + " / ".join(sorted(basis))
            + (
                " — hardware counters were unavailable, so the score uses latency and CPU time."
                if all("IPC" not in b for b in basis)
                else "."
            )
        )
    base_points = [p for p in points if p["kernel"] is None]
    counter_bars = {p["service"]: p["derived"] for p in base_points if p["derived"]}
    counter_reasons = sorted({r for p in base_points for r in p["counter_reasons"]})
    return {
        "points": points,
        "scores": scores,
        "heatmap": {"rows": hm_rows, "cols": cols, "cells": cells},
        "scenarios": scen,
        "notes": notes,
        "counter_bars": counter_bars,
        "counter_reasons": counter_reasons,
    }


# ---- figures and tables -----------------------------------------------------------------------------


def _sizing_table(s: dict, analysis: dict) -> Table:
    knap = set((analysis.get("scenarios", {}).get("knapsack") or {}).get("performance") or [])
    rows = []
    for svc, v in (analysis.get("sizing") or {}).items():
        sc = s["scores"].get(svc, {})
        rows.append(
            [
                svc,
                f"{v['peak_pct']:.0f} %" if v.get("peak_pct") is not None else "unavailable",
                f"{v['p95_pct']:.0f} %" if v.get("p95_pct") is not None else "unavailable",
                fmt_count(v["weight_millicores"]),
                f"{sc['score']:.3f}" if sc.get("score") is not None else "not tested",
                "performance" if svc in knap else "general",
            ]
        )
    return Table(
        title="Sizing, sensitivity score and the knapsack's choice",
        columns=["service", "CPU peak", "CPU p95", "weight (millicores)", "score", "knapsack pool"],
        rows=rows,
        caption=f"CPU % of each service process from /proc every {SAMPLE_INTERVAL_S * 1000:.0f} ms at the study's "
        f"rate, unpinned; weight = peak × 10 (millicores), capacity {fmt_count(analysis.get('capacity_millicores'))}.",
    )


def _heatmap_figure(s: dict) -> Figure:
    import numpy as np

    hm = s["heatmap"]
    fig, ax = plots.new_figure(height_in=1.2 + 0.35 * len(hm["rows"]))
    data = np.array([[np.nan if v is None else 100 * v for v in row] for row in hm["cells"]], dtype=float)
    im = ax.imshow(data, aspect="auto", cmap="OrRd")
    ax.set_yticks(range(len(hm["rows"])))
    ax.set_yticklabels(hm["rows"], fontsize=8)
    ax.set_xticks(range(len(hm["cols"])))
    ax.set_xticklabels([f"{k}×{n}\n{p}" for k, n, p in hm["cols"]], fontsize=7)
    fig.colorbar(im, ax=ax, label="slowdown %")
    flat = [(v, r, c) for r, row in zip(hm["rows"], hm["cells"]) for c, v in zip(hm["cols"], row) if v is not None]
    v, r, c = max(flat)
    return Figure(
        title="Slowdown by interference kernel and intensity",
        svg=plots.to_svg(fig),
        caption="Mean relative slowdown of the score metrics of the tested service (isolated on the performance "
        "pool) with tailscope-stress kernels beside it; blank = not measured.",
        finding=f"largest slowdown: {r} with {c[0]}×{c[1]} ({c[2]}): {100 * v:+.0f} %",
    )


def _topdown_figure(s: dict) -> Figure:
    fig, ax = plots.new_figure()
    groups = [g for g, v in s["counter_bars"].items() if any(k.startswith("topdown.") for k in v)]
    parts = sorted({k for g in groups for k in s["counter_bars"][g] if k.startswith("topdown.")})
    bottom = [0.0] * len(groups)
    for part in parts:
        vals = [s["counter_bars"][g].get(part) or 0.0 for g in groups]
        ax.bar(groups, vals, bottom=bottom, label=part.split(".", 1)[1])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("share of pipeline slots")
    ax.legend(fontsize=7)
    worst = {g: max(parts, key=lambda p: s["counter_bars"][g].get(p) or 0.0) for g in groups}
    return Figure(
        title="Top-down level 1 per service (isolated)",
        svg=plots.to_svg(fig),
        caption="Pipeline slots by top-down category, each service alone on the performance pool.",
        finding="; ".join(f"{g}: mostly {worst[g].split('.', 1)[1]}" for g in groups),
    )


def _ipc_figure(s: dict) -> Figure:
    fig, ax = plots.new_figure()
    groups = list(s["counter_bars"])
    keys = ["ipc", "l1d_mpki", "l1i_mpki", "llc_mpki", "dtlb_mpki", "itlb_mpki", "branch_mpki"]
    series = {
        k: [v if isinstance(v := s["counter_bars"][g].get(k), (int, float)) else None for g in groups] for k in keys
    }
    plots.grouped_bars(ax, groups, series, "IPC / misses per 1000 instructions")
    with_ipc = [g for g in groups if s["counter_bars"][g].get("ipc") is not None]
    best = max(with_ipc, key=lambda g: s["counter_bars"][g]["ipc"]) if with_ipc else None
    return Figure(
        title="IPC and MPKI per service (isolated)",
        svg=plots.to_svg(fig),
        caption="Per-service perf_event counter group (inherit), each service alone on the performance pool.",
        finding=f"highest IPC: {best} ({s['counter_bars'][best]['ipc']:.2f})" if best else "IPC unavailable",
    )


def _scenario_table(s: dict, analysis: dict) -> Table:
    rows = []
    for name, v in s["scenarios"].items():
        perf = (analysis["scenarios"].get(name) or {}).get("performance")
        rows.append(
            [
                name,
                "none (unpinned)" if perf is None else (", ".join(perf) or "none"),
                "all (unpinned)" if perf is None else ", ".join(x for x in SERVICES if x not in perf),
                fmt_ns(v["p50_ns"]),
                fmt_ns(v["p99_ns"]) + (" *" if "99" in v["low_confidence"] else ""),
                fmt_ratio(v["p99_vs_colocated"]),
                fmt_count(v["achieved_per_s"]),
                fmt_count(v["errors"]) + (" (generator-limited)" if v["generator_bottleneck"] else ""),
            ]
        )
    return Table(
        title="Placements compared (the thesis's table: scenario × pool)",
        columns=[
            "scenario",
            "performance pool",
            "general pool",
            "p50",
            "p99",
            "p99 vs colocated",
            "achieved /s",
            "errors",
        ],
        rows=rows,
        caption=f"Same offered rate ({fmt_count(analysis.get('rate_per_s'))}/s, mix {', '.join(f'{p} {w:g}' for p, w in MIX)}), "
        "one run, end-to-end latency from the intended send time. "
        + " ".join(f"{n}: {sc['how']}." for n, sc in analysis["scenarios"].items()),
        numeric_from=3,
        wrap_columns=(1, 2),
    )


def _scenario_figure(s: dict) -> Figure:
    fig, ax = plots.new_figure()
    names = list(s["scenarios"])
    plots.grouped_bars(
        ax,
        names,
        {
            "p50": [s["scenarios"][n]["p50_ns"] for n in names],
            "p99": [s["scenarios"][n]["p99_ns"] for n in names],
        },
        "latency",
    )
    plots.format_ns_axis(ax.yaxis)
    ranked = sorted((v["p99_ns"], n) for n, v in s["scenarios"].items() if v["p99_ns"])
    return Figure(
        title="End-to-end p50 / p99 per placement",
        svg=plots.to_svg(fig),
        caption="latency_intended of the whole mix; a missing bar is unavailable (no request completed).",
        finding=f"lowest p99: {ranked[0][1]} ({fmt_ns(ranked[0][0])})" if ranked else "no scenario measured a p99",
    )
