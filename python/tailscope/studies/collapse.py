"""Study `collapse`: the blocking-pool collapse of the "not all async is created equal" article.

The article's setup, on the microservice runtime (`tailscope-svc --all`, topologies/collapse.yaml):
a front with an IO dispatcher and a fixed processing pool sized to the cores the graph runs on, a
little real CPU work per request and one remote call to a backend whose service time is waiting
(lognormal, median 1 ms). Variants, all with the same pool size (recorded):

- *sync-no-io*: pool-blocking, the same work with the call removed (the article's 40k QPS);
- *blocking*: pool-blocking — a pool thread blocks on the call's future (the 8k);
- *callback*: pool-callback — the call parks the request, the thread moves on (the 30k);
- *blocking-sized* (the article's aside): pool-blocking with N = cores × (1 + wait/compute)
  threads, wait and compute measured in the same run (docs/collapse-study.md says how).

Per (variant, client concurrency) one fresh graph and one closed-loop tailscope-load run (one
keep-alive connection per client, think time 0); the front's CPU is sampled from /proc over the
measured window and its queue wait — the "limbo" from a request's parse to a pool thread picking it
up — is read from the graph's document (`counters.queue_wait`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tailscope.lab import topology
from tailscope.lab.cpus import cpu_split
from tailscope.lab.engines import REPO_ROOT, EngineError
from tailscope.lab.graph import SVC, GraphStartError, pinned_graph, raise_nofile, run_point, store_pids
from tailscope.measure.measurement import achieved_per_s, connection_flags, measurement, point_flags, unflagged
from tailscope.report import plots
from tailscope.report.blocks import (
    DOES_NOT_HOLD,
    HOLDS,
    NOT_COMPARABLE,
    PARTLY,
    UNAVAILABLE,
    Figure,
    ReferenceCheck,
    Section,
    Table,
)
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.common import cite, record_stores, requested_stores, run_scale, study_section
from tailscope.studies.sources import ARTICLE_SHAPE
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

LOAD = "tailscope-load"
REPO = REPO_ROOT
TOPOLOGY = REPO / "topologies" / "collapse.yaml"
PATH = "/collapse"
FRONT = "front"
VARIANTS = ("sync-no-io", "blocking", "callback", "blocking-sized")
MODELS = {"sync-no-io": "pool-blocking", "blocking": "pool-blocking", "callback": "pool-callback"}
MODELS["blocking-sized"] = "pool-blocking"
# The article's figures (QPS), compared as ratios to its sync-no-IO figure.
ARTICLE_QPS = {"sync-no-io": 40_000.0, "blocking": 8_000.0, "callback": 30_000.0}
# The shape holds when blocking falls to at most this share of sync-no-io (the article: 0.2), callbacks
# recover at least this share (the article: 0.75) and at least twice blocking's (the article: 3.75×).
COLLAPSE_AT_MOST = 0.5
RECOVER_AT_LEAST = 0.5
CALLBACK_OVER_BLOCKING = 2.0
# The article's pool: a constant number of threads "usually equal to the number of logical cores in the
# server", "executed in parallel by several threads" (its example: 2 logical cores). One pool thread on
# one core is not that setup: the comparison needs at least this many pool threads, one per core.
ARTICLE_MIN_POOL = 2
MAX_SIZED_WORKERS = 2000  # bounds N when wait/compute is huge (a thread each: a documented cap)


@dataclass(frozen=True)
class Plan:
    users: tuple[int, ...]
    duration_s: float
    warmup_s: float


PLANS = {
    "tiny": Plan((2, 16), 0.4, 0.15),
    "quick": Plan((1, 4, 16, 64), 1.0, 0.3),
    "full": Plan((1, 4, 16, 64, 256, 1024), 10.0, 2.0),
}


def plan_for(ctx: RunContext) -> Plan:
    p = PLANS[ctx.options.get("collapse_form") or ("full" if ctx.form == "full" else "quick")]
    scale = run_scale(ctx.options)
    return Plan(p.users, max(0.3, p.duration_s * scale), max(0.1, p.warmup_s * min(scale, 1.0)))


def topology_json(out: Path, remote_call: bool) -> Path:
    """collapse.yaml as the engine reads it; without the remote call for sync-no-io (same work)."""
    doc = topology.load(TOPOLOGY)
    if not remote_call:
        for svc in doc["services"]:
            if svc["name"] == FRONT:
                for ep in svc["endpoints"]:
                    ep["stages"] = [st for st in ep["stages"] if "call" not in st]
    return topology.write_json(doc, out)


def mean_latency_ns(doc: dict) -> float | None:
    m = measurement(doc, "latency_intended")
    return m.mean_ns if m else None


def sizing(points: list[dict], cores: int) -> dict:
    """The aside's N = cores × (1 + wait/compute), from this run's points, or why it is unavailable.

    compute: the front's CPU time per request (schedstat run time of all its threads ÷ requests in
    the window) at the sync-no-io point of highest throughput; wait: mean latency of blocking minus
    sync-no-io at the lowest concurrency (no queueing there: the remote call as the handler sees it)."""
    sync = [p for p in unflagged(points, point_flags) if p["variant"] == "sync-no-io"]
    block = [p for p in unflagged(points, point_flags) if p["variant"] == "blocking"]
    if not sync or not block:
        return {"unavailable": "no unflagged sync-no-io and blocking points to measure wait and compute from"}
    best = max(sync, key=lambda p: p["achieved_per_s"])
    proc = (best.get("procstat") or {}).get("processes", {}).get(FRONT, {})
    window_s = (best.get("procstat") or {}).get("window_s") or 0.0
    requests = best["achieved_per_s"] * window_s
    if proc.get("run_ns") is not None and requests > 0:
        compute_ns = proc["run_ns"] / requests
    elif proc.get("cpu_pct") is not None and best["achieved_per_s"] > 0:
        compute_ns = proc["cpu_pct"] / 100.0 * 1e9 / best["achieved_per_s"]
    else:
        return {"unavailable": "the front's CPU time was not readable from /proc"}
    lo_users = min(p["users"] for p in sync if p["users"] in {b["users"] for b in block}) if block else None
    if lo_users is None:
        return {"unavailable": "no common concurrency for sync-no-io and blocking"}
    s = next(p for p in sync if p["users"] == lo_users)
    b = next(p for p in block if p["users"] == lo_users)
    if s.get("mean_ns") is None or b.get("mean_ns") is None or compute_ns <= 0:
        return {"unavailable": "a latency or CPU figure is missing"}
    # Queueing removed on both sides (limbo mean), so only the call's own time is left.
    wait_ns = max(0.0, (b["mean_ns"] - (_qw(b, "mean") or 0.0)) - (s["mean_ns"] - (_qw(s, "mean") or 0.0)))
    n = max(cores, round(cores * (1 + wait_ns / compute_ns)))
    return {
        "cores": cores,
        "compute_ns": compute_ns,
        "wait_ns": wait_ns,
        "workers": min(n, MAX_SIZED_WORKERS),
        "capped": n > MAX_SIZED_WORKERS,
        "compute_from": f"sync-no-io, {best['users']} clients",
        "wait_from": f"{lo_users} client(s)",
    }


class CollapseStudy:
    name = "collapse"
    title = "Blocking-pool collapse: blocking vs callbacks with a fixed pool"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        plan = plan_for(ctx)
        load_cpus, graph_cpus = cpu_split(ctx.options)
        cores = len(graph_cpus) or len(os.sched_getaffinity(0))
        nofile_hard = raise_nofile()
        art = Path(ctx.artifacts_dir) / "collapse"
        art.mkdir(parents=True, exist_ok=True)
        topo = {True: topology_json(art / "collapse.json", True), False: topology_json(art / "no-io.json", False)}
        pinning = {"load_cpus": load_cpus, "graph_cpus": graph_cpus}
        docs: list[EngineDocument] = []
        points: list[dict] = []
        steps = len(VARIANTS) * len(plan.users)
        done = 0

        def measure(variant: str, workers: int, extra: dict) -> None:
            nonlocal done
            for users in plan.users:
                ctx.progress(f"collapse: {variant} ({workers} threads), {users} clients", done / steps)
                done += 1
                key = f"{variant}/{users}"
                out = art / f"graph-{variant}-{users}.json"
                base = {"variant": variant, "model": MODELS[variant], "workers": workers, "cores": cores}
                base |= {"users": users, "pinning": pinning} | extra
                try:
                    with pinned_graph(
                        topo[variant != "sync-no-io"],
                        MODELS[variant],
                        out,
                        graph_cpus,
                        workers,
                        stores=requested_stores(ctx.options),
                    ) as (port, ready):
                        watched = {FRONT: int(ready["pids"][FRONT])} | store_pids(ready)
                        hlog = art / f"{variant}-{users}.hlog"
                        d, stats = run_point(
                            port, PATH, users, 0, plan.duration_s, plan.warmup_s, load_cpus, hlog, watched
                        )
                        record_stores(d, ready)
                except GraphStartError as e:
                    base["unavailable"] = str(e)
                    docs.append(EngineDocument(self.name, SVC, {"collapse_point": base}, key))
                    continue
                try:
                    front = json.loads(out.read_text())["services"][FRONT]
                except (OSError, ValueError, KeyError) as e:
                    raise EngineError(f"{SVC} --all --model {MODELS[variant]} wrote no result document: {e}") from e
                point = base | {
                    "achieved_per_s": achieved_per_s(d),
                    "mean_ns": mean_latency_ns(d),
                    "procstat": stats,
                    "queue_wait": front.get("counters", {}).get("queue_wait"),
                    "model_details": front.get("model_details", {}),
                    "flags": connection_flags(d, users, nofile_hard)
                    + (["generator-limited"] if d.get("load", {}).get("generator_bottleneck") else []),
                }
                d["collapse_point"] = point
                points.append(point)
                docs.append(EngineDocument(self.name, LOAD, d, key))

        for variant in ("sync-no-io", "blocking", "callback"):
            measure(variant, cores, {})
        size = sizing(points, cores)
        if "workers" in size:
            measure("blocking-sized", int(size["workers"]), {"sizing": size})
        else:
            docs.append(
                EngineDocument(self.name, SVC, {"collapse_point": {"variant": "blocking-sized"} | size}, "sized")
            )
        ctx.progress("collapse: done", 1.0)
        return docs

    def section(self, store: Store, run_id: str) -> Section:
        sec = study_section(
            self,
            store,
            run_id,
            section_id="collapse",
            graphs=True,
            intro=(
                "A front with one IO dispatcher and a fixed processing pool sized to the graph's cores does a little "
                "JSON work and one remote call per request (backend: lognormal wait, median 1 ms). "
                "<em>sync-no-io</em>: the same work without the call; <em>blocking</em>: the pool thread waits for "
                "the call; <em>callback</em>: the call parks the request; <em>blocking-sized</em>: a blocking pool "
                "of N = cores × (1 + wait/compute) threads. Closed loop, one keep-alive connection per client. "
                "See docs/collapse-study.md."
            ),
        )
        raw = [
            d.document["collapse_point"] for d in store.documents(run_id, self.name) if "collapse_point" in d.document
        ]
        for p in raw:
            if "unavailable" in p:
                sec.notes.append(f"{p['variant']} unavailable: {p['unavailable']}")
        points = [p for p in raw if "achieved_per_s" in p]
        if not points:
            sec.notes.append("no collapse measurements were stored for this run")
            return sec
        sec.blocks.append(throughput_figure(points))
        sec.blocks.append(shape_table(points))
        sec.add_references([article_check(points)], "The article's shape vs here")
        sec.blocks.append(limbo_table(points))
        sized = next((p.get("sizing") for p in points if p.get("sizing")), None)
        if sized:
            sec.blocks.append(sizing_table(points, sized))
        flagged = [p for p in points if p.get("flags")]
        for p in flagged:
            sec.notes.append(f"{p['variant']} at {p['users']} clients flagged: {'; '.join(p['flags'])}")
        return sec


STUDY = CollapseStudy()


# ---- reading the points ---------------------------------------------------------------


def _label(p: dict) -> str:
    return f"{p['variant']} ({p['workers']} threads) at {p['users']} clients"


def peak(points: list[dict], variant: str) -> dict | None:
    """The variant's highest-throughput point, preferring unflagged ones (a flagged one is cited as such)."""
    mine = [p for p in points if p["variant"] == variant]
    clean = unflagged(mine, point_flags)
    pool = clean or mine
    return max(pool, key=lambda p: p["achieved_per_s"]) if pool else None


def shape(points: list[dict]) -> dict:
    """Our peaks as ratios to sync-no-io beside the article's, and whether its shape holds here."""
    peaks = {v: peak(points, v) for v in ARTICLE_QPS}
    out: dict = {"peaks": peaks}
    sync = peaks["sync-no-io"]
    if not sync or not sync["achieved_per_s"]:
        out["verdict"] = "unavailable: no sync-no-io throughput was measured"
        return out
    ours = {v: (p["achieved_per_s"] / sync["achieved_per_s"] if p else None) for v, p in peaks.items()}
    out["ours"] = ours
    b, c = ours.get("blocking"), ours.get("callback")
    if b is None or c is None:
        out["verdict"] = "unavailable: blocking or callback was not measured"
        return out
    collapsed = b <= COLLAPSE_AT_MOST and c >= CALLBACK_OVER_BLOCKING * b
    holds = collapsed and c >= RECOVER_AT_LEAST
    pb, pc = peaks["blocking"], peaks["callback"]
    assert pb is not None and pc is not None
    why = (
        f"blocking peaks at {fmt_ratio(b)} of sync-no-io with {pb['workers']} thread(s) "
        f"({cite(_label(pb), point_flags(pb))}), callback at {fmt_ratio(c)} ({cite(_label(pc), point_flags(pc))})"
    )
    common = {p["users"] for p in points if p["variant"] == "blocking"} & {
        p["users"] for p in points if p["variant"] == "callback"
    }
    if common:
        top = max(common)
        qb = next(p for p in points if p["variant"] == "blocking" and p["users"] == top)
        qc = next(p for p in points if p["variant"] == "callback" and p["users"] == top)
        why += (
            f"; at {top} clients a request waited for a pool thread (limbo) {fmt_ns(_qw(qb, 'mean'))} on average "
            f"when threads block vs {fmt_ns(_qw(qc, 'mean'))} with callbacks"
            + ("" if not (point_flags(qb) or point_flags(qc)) else " [a flagged point: see the notes]")
        )
    size = next((p.get("sizing") for p in points if p.get("sizing")), None)
    if size:
        ceiling = pb["workers"] * 1e9 / (size["wait_ns"] + size["compute_ns"])
        why += (
            f"; a blocked thread serves at most 1 ÷ (wait + compute) = {fmt_count(ceiling / pb['workers'])}/s, "
            f"so {pb['workers']} thread(s) cap blocking near {fmt_count(ceiling)}/s"
        )
    out["holds"] = holds
    out["collapsed"] = collapsed
    out["pool"] = pb["workers"]
    out["cores"] = pb["cores"]
    out["why"] = why
    out["verdict"] = (
        ("The article's shape holds here: " if holds else "The article's shape does not hold here: ") + why + "."
    )
    return out


def article_check(points: list[dict]) -> ReferenceCheck:
    """The article's 40k / 8k / 30k beside this run, as ratios to sync-no-io (shape() judges it):
    holds when blocking collapses (≤ COLLAPSE_AT_MOST of sync, callbacks ≥ CALLBACK_OVER_BLOCKING × it)
    and callbacks recover ≥ RECOVER_AT_LEAST of sync; partly when only the collapse shows. Not
    comparable with fewer than ARTICLE_MIN_POOL pool threads, or a pool not sized to the cores."""
    reported = (
        f"{fmt_count(ARTICLE_QPS['sync-no-io'])} QPS without IO, {fmt_count(ARTICLE_QPS['blocking'])} when the "
        f"fixed pool (one thread per logical core) blocks on a remote call, {fmt_count(ARTICLE_QPS['callback'])} "
        f"with callbacks: blocking {fmt_ratio(ARTICLE_QPS['blocking'] / ARTICLE_QPS['sync-no-io'])}, callback "
        f"{fmt_ratio(ARTICLE_QPS['callback'] / ARTICLE_QPS['sync-no-io'])} of sync"
    )
    ref = "article: 40k / 8k / 30k"
    s = shape(points)
    if "holds" not in s:
        why = s["verdict"].removeprefix("unavailable: ")
        return ReferenceCheck(ref, reported, "unavailable", UNAVAILABLE, why, ARTICLE_SHAPE)
    ours = s["ours"]
    here = (
        f"blocking {fmt_ratio(ours['blocking'])}, callback {fmt_ratio(ours['callback'])} of sync-no-io (peaks), "
        f"pool of {s['pool']} thread(s) on {s['cores']} core(s)"
    )
    if s["pool"] < ARTICLE_MIN_POOL or s["pool"] != s["cores"]:
        why = (
            f"the article's pool has one thread per logical core of a multi-core server (its example: "
            f"{ARTICLE_MIN_POOL} cores, {ARTICLE_MIN_POOL} threads); here the graph ran on {s['cores']} core(s) "
            f"with a pool of {s['pool']} thread(s)"
            + (" (a 2-CPU machine: the load generator has the other CPU)" if s["cores"] < ARTICLE_MIN_POOL else "")
            + f", so one blocked thread stalls the whole pool. Measured all the same: {s['why']}."
        )
        return ReferenceCheck(ref, reported, here, NOT_COMPARABLE, why, ARTICLE_SHAPE)
    verdict = HOLDS if s["holds"] else PARTLY if s["collapsed"] else DOES_NOT_HOLD
    why = (
        f"{s['why']}; the shape holds when blocking falls to ≤ {fmt_ratio(COLLAPSE_AT_MOST)} of sync-no-io and "
        f"callbacks reach ≥ {fmt_ratio(RECOVER_AT_LEAST)} of it and ≥ {CALLBACK_OVER_BLOCKING:g}× blocking."
    )
    return ReferenceCheck(ref, reported, here, verdict, why, ARTICLE_SHAPE)


def throughput_figure(points: list[dict]) -> Figure:
    fig, ax = plots.new_figure(8.0, 4.0)
    variants = [v for v in VARIANTS if any(p["variant"] == v for p in points)]
    for k, v in enumerate(variants):
        mine = sorted((p for p in points if p["variant"] == v), key=lambda p: p["users"])
        ax.plot(
            [p["users"] for p in mine],
            [p["achieved_per_s"] for p in mine],
            "-o",
            color=plots.PALETTE[k % len(plots.PALETTE)],
            markersize=3,
            label=f"{v} ({mine[0]['workers']} threads)",
        )
        for p in mine:
            if p.get("flags"):
                ax.plot([p["users"]], [p["achieved_per_s"]], "x", color="#cf222e", markersize=8)
    ax.set_xscale("log")
    ax.set_xlabel("client concurrency (closed loop)")
    ax.set_ylabel("requests/s")
    ax.legend(fontsize=8, frameon=False)
    peaks = [(v, peak(points, v)) for v in variants]
    finding = (
        "; ".join(
            f"{v} peaks at {fmt_count(p['achieved_per_s'])}/s ({cite(_label(p), point_flags(p))})"
            for v, p in peaks
            if p
        )
        + ". Whether the article's shape holds: the table below."
    )
    cores = points[0]["cores"]
    return Figure(
        "Throughput vs client concurrency",
        plots.to_svg(fig),
        f"Graph pinned to CPU(s) {points[0]['pinning']['graph_cpus'] or 'any'}, load generator to "
        f"{points[0]['pinning']['load_cpus'] or 'any'}; pool sized to {cores} core(s). Red x: a flagged point "
        f"(see the notes).",
        finding,
    )


def shape_table(points: list[dict]) -> Table:
    s = shape(points)
    rows = []
    for v, qps in ARTICLE_QPS.items():
        p = s["peaks"].get(v)
        ours = (s.get("ours") or {}).get(v)
        rows.append(
            [
                v,
                fmt_count(qps),
                fmt_ratio(qps / ARTICLE_QPS["sync-no-io"]),
                fmt_count(p["achieved_per_s"]) if p else "—",
                fmt_ratio(ours),
                str(p["users"]) if p else "—",
                "; ".join(p["flags"]) if p and p.get("flags") else "—",
            ]
        )
    return Table(
        "The article's 40k / 8k / 30k shape, side by side with this run",
        ["variant", "article QPS", "article ÷ sync", "ours, peak/s", "ours ÷ sync", "at clients", "flags"],
        rows,
        "Peak = the variant's highest closed-loop throughput over the concurrency sweep (unflagged points "
        "preferred). Absolute figures differ by machine; the shape is the ratios.",
        numeric_from=1,
    )


def _qw(p: dict, key: str) -> float | None:
    q = p.get("queue_wait") or {}
    return (q.get("percentiles") or {}).get(key) if key != "mean" else q.get("mean")


def limbo_table(points: list[dict]) -> Table:
    rows = []
    for p in sorted(points, key=lambda p: (VARIANTS.index(p["variant"]), p["users"])):
        rows.append(
            [
                p["variant"],
                str(p["workers"]),
                str(p["users"]),
                fmt_count(p["achieved_per_s"]),
                fmt_ns(p.get("mean_ns")),
                fmt_ns(_qw(p, "mean")),
                fmt_ns(_qw(p, "50")),
                fmt_ns(_qw(p, "99")),
                fmt_count((p.get("model_details") or {}).get("max_queue_depth")),
            ]
        )
    return Table(
        "Limbo: time from a request's parse to a pool thread picking it up",
        ["variant", "threads", "clients", "req/s", "mean latency", "limbo mean", "limbo p50", "limbo p99", "max queue"],
        rows,
        "Limbo is the front's queue wait (counters.queue_wait of the graph's document, HdrHistogram): requests "
        "that arrived while every pool thread was busy — or, blocking, waiting on its remote call. Max queue = "
        "deepest the pool's queue got.",
        numeric_from=1,
    )


def sizing_table(points: list[dict], size: dict) -> Table:
    rows = []
    for v in ("blocking", "blocking-sized", "callback"):
        p = peak(points, v)
        if not p:
            continue
        proc = (p.get("procstat") or {}).get("processes", {}).get(FRONT, {})
        rows.append(
            [
                v,
                str(p["workers"]),
                fmt_count(p["achieved_per_s"]),
                fmt_ns(p.get("mean_ns")),
                fmt_ns(_qw(p, "99")),
                "—" if proc.get("cpu_pct") is None else f"{proc['cpu_pct']:.0f} %",
                fmt_count(proc.get("threads_max")),
                "—"
                if proc.get("involuntary_ctx_switches") is None or not p["achieved_per_s"]
                else f"{proc['involuntary_ctx_switches'] / max(1.0, p['achieved_per_s'] * (p['procstat'].get('window_s') or 1)):.2f}",
            ]
        )
    return Table(
        f"The aside: N = cores × (1 + wait/compute) = {size['cores']} × (1 + {fmt_ns(size['wait_ns'])} ÷ "
        f"{fmt_ns(size['compute_ns'])}) = {size['workers']} threads" + (" (capped)" if size.get("capped") else ""),
        [
            "variant",
            "threads",
            "peak req/s",
            "mean latency",
            "limbo p99",
            "front CPU",
            "front threads",
            "invol. cs/req",
        ],
        rows,
        f"compute = the front's CPU time per request ({size['compute_from']}); wait = mean latency of blocking minus "
        f"sync-no-io at {size['wait_from']}. What more threads buy: throughput and limbo; what they cost: threads, "
        "CPU and involuntary context switches per request (/proc over the measured window).",
        numeric_from=1,
    )
