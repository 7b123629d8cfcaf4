"""Study `threads`, the run: the plan (quick / full / tiny form), the graphs and load points it
starts, and the documents it stores (each load point's `threads_point` says what it measured)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tailscope.lab import topology
from tailscope.lab.cpus import cpu_split
from tailscope.lab.engines import REPO_ROOT, EngineError
from tailscope.lab.graph import (
    LOAD,
    PATH,
    POOL_SIZES,
    SVC,
    GraphStartError,
    pinned_graph,
    raise_nofile,
    run_point,
    store_pids,
)
from tailscope.measure import tail
from tailscope.measure.measurement import achieved_per_s, connection_flags
from tailscope.store import EngineDocument
from tailscope.studies.base import RunContext
from tailscope.studies.common import StepProgress, record_stores, requested_stores, round_rate, run_scale

REPO = REPO_ROOT
WORKLOADS = {
    "passthrough": (REPO / "topologies" / "passthrough.yaml", "/passthrough"),
    "transform": (REPO / "topologies" / "transform.yaml", "/transform"),
}
VARIANTS = {"blocking": "pool-blocking", "non-blocking": "pool-callback"}
FRONT = "front"  # the name the front's process is sampled under in each point's procstat
DEFAULT_OBJECTIVE_MS = 50.0
DEFAULT_MESSAGE_BYTES = 50


@dataclass
class Plan:
    threads: list[int]
    users: list[int]
    duration_s: float
    warmup_s: float
    open_fractions: list[float]
    open_duration_s: float
    workloads: list[str] = field(default_factory=lambda: list(WORKLOADS))
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    socialnet: bool = False


PLANS = {
    # the end-to-end test's form: a few seconds per point
    "tiny": Plan([2, 8], [2, 16], 0.5, 0.2, [0.5], 0.5, workloads=["passthrough"]),
    "quick": Plan([2, 10, 100], [10, 100, 500], 0.8, 0.3, [0.5, 0.9], 0.8),
    # ≥ 60 s per closed-loop point, so the kernel's 1-minute load average describes the point
    "full": Plan(
        [2, 4, 10, 25, 100, 200],
        [1, 10, 50, 100, 500, 1000],
        60.0,
        5.0,
        [0.25, 0.5, 0.75, 0.9, 1.0],
        10.0,
        socialnet=True,
    ),
}
SOCIALNET_PATH = PATH
SOCIALNET_THREADS = POOL_SIZES
SOCIALNET_USERS = [10, 100, 500]


def plan_for(ctx: RunContext) -> Plan:
    p = PLANS[ctx.options.get("threads_form") or ("full" if ctx.form == "full" else "quick")]
    scale = run_scale(ctx.options)
    return Plan(
        p.threads,
        p.users,
        max(0.3, p.duration_s * scale),
        max(0.1, p.warmup_s * min(scale, 1.0)),
        p.open_fractions,
        max(0.3, p.open_duration_s * scale),
        p.workloads,
        p.variants,
        p.socialnet,
    )


def workload_json(name: str, out: Path, message_bytes: int) -> Path:
    """The workload's topology with the message size applied (front ↔ backend, both ways)."""
    doc = topology.load(WORKLOADS[name][0])
    for svc in doc["services"]:
        for ep in svc["endpoints"]:
            ep["response_bytes"] = message_bytes
            for st in ep.get("stages", []):
                if "call" in st:
                    st["call"]["request_bytes"] = message_bytes
    return topology.write_json(doc, out)


def tail_of(hlog: Path) -> dict:
    """Tail verdict + CCDF points of a point's latency_intended, or why it is unavailable."""
    try:
        samples = tail.samples_from_hlog(hlog)
        verdict = tail.classify(samples)
    except (tail.TailError, OSError, ValueError) as e:
        return {"unavailable": str(e)}
    xs, surv = tail.ccdf_points(samples)
    return {"verdict": verdict.to_json(), "ccdf": [xs, surv], "samples": int(samples.size)}


def run_sweep(ctx: RunContext, study: str) -> list[EngineDocument]:
    """Every (workload, variant, N) of the plan on its own graph: closed-loop points for every users
    count, then open-loop points at fractions of the best closed-loop throughput; the documents of
    the load points and of each graph, stored under `study`."""
    plan = plan_for(ctx)
    message_bytes = int(ctx.options.get("message_bytes") or DEFAULT_MESSAGE_BYTES)
    load_cpus, graph_cpus = cpu_split(ctx.options)
    nofile_hard = raise_nofile()
    art = Path(ctx.artifacts_dir) / "threads"
    art.mkdir(parents=True, exist_ok=True)
    docs: list[EngineDocument] = []
    configs = [(w, v, n) for w in plan.workloads for v in plan.variants for n in plan.threads]
    social = [("socialnet", v, n) for v in plan.variants for n in SOCIALNET_THREADS] if plan.socialnet else []
    progress = StepProgress(ctx, "threads", (len(configs) + len(social)) * (len(plan.users) + len(plan.open_fractions)))
    pinning = {
        "load_cpus": load_cpus,
        "graph_cpus": graph_cpus,
        "policy": "pinned" if graph_cpus else "unpinned (one CPU: generator and graph share it)",
    }

    for workload, variant, n in configs + social:
        if workload == "socialnet":
            topo, path, users_list = (
                topology.to_engine_json(topology.SOCIALNET, art / "socialnet.json"),
                SOCIALNET_PATH,
                SOCIALNET_USERS,
            )
        else:
            topo, path, users_list = (
                workload_json(workload, art / f"{workload}.json", message_bytes),
                WORKLOADS[workload][1],
                plan.users,
            )
        model = VARIANTS[variant]
        key = f"{workload}/{variant}/{n}"
        out = art / f"graph-{workload}-{variant}-{n}.json"
        base = {
            "workload": workload,
            "variant": variant,
            "model": model,
            "threads": n,
            "pinning": pinning,
            "message_bytes": message_bytes,
            "path": path,
            "objective_ms": float(ctx.options.get("objective_ms") or DEFAULT_OBJECTIVE_MS),
        }
        try:
            with pinned_graph(topo, model, out, graph_cpus, n, stores=requested_stores(ctx.options)) as (port, ready):
                pids = {name: int(pid) for name, pid in ready["pids"].items()}
                front = next((s for s in ("front", "nginx-web-server") if s in pids), None)
                watched = {FRONT: pids[front]} if front else {}
                watched |= {name: pid for name, pid in pids.items() if name != front}
                watched |= store_pids(ready)  # the store servers compete for the graph's cores too
                best = 0.0
                for users in users_list:
                    progress(f"{key} users={users}")
                    hlog = art / f"{workload}-{variant}-{n}-c{users}.hlog"
                    d, stats = run_point(port, path, users, 0, plan.duration_s, plan.warmup_s, load_cpus, hlog, watched)
                    best = max(best, achieved_per_s(d))
                    d["threads_point"] = base | {
                        "kind": "closed",
                        "users": users,
                        "procstat": stats,
                        "tail": tail_of(hlog),
                        "flags": connection_flags(d, users, nofile_hard),
                    }
                    docs.append(EngineDocument(study, LOAD, record_stores(d, ready), f"{key}/closed/{users}"))
                for f in plan.open_fractions:
                    progress(f"{key} open {f:.0%}")
                    rate = round_rate(f * best)
                    if rate <= 0:
                        continue
                    users = max(users_list)
                    hlog = art / f"{workload}-{variant}-{n}-r{rate:.0f}.hlog"
                    d, stats = run_point(
                        port, path, users, rate, plan.open_duration_s, plan.warmup_s, load_cpus, hlog, watched
                    )
                    d["threads_point"] = base | {
                        "kind": "open",
                        "users": users,
                        "fraction": f,
                        "rate_per_s": rate,
                        "procstat": stats,
                        "tail": tail_of(hlog),
                        "flags": connection_flags(d, users, nofile_hard),
                    }
                    docs.append(EngineDocument(study, LOAD, record_stores(d, ready), f"{key}/open/{rate:.0f}"))
        except GraphStartError as e:
            # e.g. --workers above the machine's thread limit: said, not skipped silently
            docs.append(EngineDocument(study, SVC, unavailable_graph_document(base, str(e)), f"{key}/graph"))
            continue
        try:
            g = json.loads(out.read_text())
        except (OSError, ValueError) as e:
            raise EngineError(f"{SVC} --all --model {model} --workers {n} wrote no result document: {e}") from e
        g["threads_point"] = base | {"kind": "graph"}
        docs.append(EngineDocument(study, SVC, g, f"{key}/graph"))
    ctx.progress("threads: done", 1.0)
    return docs


def unavailable_graph_document(base: dict, reason: str) -> dict:
    """The document stored for a graph that did not start: its figures unavailable, with the reason."""
    return {
        "schema": "tailscope.result/1",
        "engine": SVC,
        "machine": {},
        "measurements": [],
        "unavailable": [
            {
                "name": f"{base['workload']} {base['variant']} N={base['threads']}",
                "variant": base["model"],
                "reason": reason,
            }
        ],
        "threads_point": base | {"kind": "graph", "failed": reason},
    }
