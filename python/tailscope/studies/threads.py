"""Study `threads`: how the processing pool's size changes throughput, tail latency, load and run queue.

Two workloads (topologies/passthrough.yaml — IO-bound; topologies/transform.yaml — the same plus a
JSON transformation, CPU-bound at saturation) each run as a graph of two processes
(`tailscope-svc --all`): a front whose model is the variant — *blocking* (`pool-blocking`: a pool
thread blocks on the backend call) or *non-blocking* (`pool-callback`: N scheduler threads, a call
parks the request) — with `--workers N`, and a backend pinned to the coroutine model. The IO
dispatcher count stays at the runtime's default (1) and is read back from the graph's document.

Per (workload, variant, N), on one graph: closed-loop points (tailscope-load -R 0, one keep-alive
connection per user, think time 0) for every users count, then open-loop points at fractions of the
best closed-loop throughput (latency from the intended send time) for the p99-vs-load curve. During
every point's measured window `tailscope.lab.procstat` samples /proc every 100 ms. Each point's
latency_intended histogram (.hlog) is read back for the tail analysis (`tailscope.measure.tail`).

The generator and the graph are pinned to different CPUs (first allowed CPU for the generator,
the others for the graph; `--cpus CLIENT,SERVER` overrides) and the pinning is recorded.
docs/threads-study.md: method, definitions, how to read the figures.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from tailscope.lab import topology
from tailscope.lab.cpus import cpu_split
from tailscope.lab.engines import REPO_ROOT, EngineError
from tailscope.lab.graph import LOAD, PATH, POOL_SIZES, SVC, GraphStartError, pinned_graph, raise_nofile, run_point
from tailscope.measure import tail
from tailscope.measure.measurement import achieved_per_s, connection_flags
from tailscope.report import plots
from tailscope.report.blocks import Figure, Section, Table
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.common import LATENCY_COLUMNS, latency_cells, round_rate, run_scale
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

REPO = REPO_ROOT
WORKLOADS = {
    "passthrough": (REPO / "topologies" / "passthrough.yaml", "/passthrough"),
    "transform": (REPO / "topologies" / "transform.yaml", "/transform"),
}
VARIANTS = {"blocking": "pool-blocking", "non-blocking": "pool-callback"}
FRONT = "front"
DEFAULT_OBJECTIVE_MS = 50.0
DEFAULT_MESSAGE_BYTES = 50
COMPARE = (10, 100)  # the article's comparison: 100 vs 10 threads


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


class ThreadsStudy:
    name = "threads"
    title = "Thread count: pool size vs throughput, tail latency, load average and run queue"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        plan = plan_for(ctx)
        message_bytes = int(ctx.options.get("message_bytes") or DEFAULT_MESSAGE_BYTES)
        load_cpus, graph_cpus = cpu_split(ctx.options)
        nofile_hard = raise_nofile()
        art = Path(ctx.artifacts_dir) / "threads"
        art.mkdir(parents=True, exist_ok=True)
        docs: list[EngineDocument] = []
        configs = [(w, v, n) for w in plan.workloads for v in plan.variants for n in plan.threads]
        social = [("socialnet", v, n) for v in plan.variants for n in SOCIALNET_THREADS] if plan.socialnet else []
        steps = (len(configs) + len(social)) * (len(plan.users) + len(plan.open_fractions))
        done = 0
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
                with pinned_graph(topo, model, out, graph_cpus, n) as (port, ready):
                    pids = {name: int(pid) for name, pid in ready["pids"].items()}
                    front = next((s for s in ("front", "nginx-web-server") if s in pids), None)
                    watched = {FRONT: pids[front]} if front else {}
                    watched |= {name: pid for name, pid in pids.items() if name != front}
                    best = 0.0
                    for users in users_list:
                        ctx.progress(f"threads: {key} users={users}", done / steps)
                        done += 1
                        hlog = art / f"{workload}-{variant}-{n}-c{users}.hlog"
                        d, stats = run_point(
                            port, path, users, 0, plan.duration_s, plan.warmup_s, load_cpus, hlog, watched
                        )
                        best = max(best, achieved_per_s(d))
                        d["threads_point"] = base | {
                            "kind": "closed",
                            "users": users,
                            "procstat": stats,
                            "tail": tail_of(hlog),
                            "flags": connection_flags(d, users, nofile_hard),
                        }
                        docs.append(EngineDocument(self.name, LOAD, d, f"{key}/closed/{users}"))
                    for f in plan.open_fractions:
                        ctx.progress(f"threads: {key} open {f:.0%}", done / steps)
                        done += 1
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
                        docs.append(EngineDocument(self.name, LOAD, d, f"{key}/open/{rate:.0f}"))
            except GraphStartError as e:
                # e.g. --workers above the machine's thread limit: said, not skipped silently
                docs.append(EngineDocument(self.name, SVC, _unavailable_doc(base, str(e)), f"{key}/graph"))
                continue
            try:
                g = json.loads(out.read_text())
            except (OSError, ValueError) as e:
                raise EngineError(f"{SVC} --all --model {model} --workers {n} wrote no result document: {e}") from e
            g["threads_point"] = base | {"kind": "graph"}
            docs.append(EngineDocument(self.name, SVC, g, f"{key}/graph"))
        ctx.progress("threads: done", 1.0)
        return docs

    def section(self, store: Store, run_id: str) -> Section:
        docs = [d for d in store.documents(run_id, self.name) if "threads_point" in d.document]
        objective_ns = (
            (docs[0].document["threads_point"].get("objective_ms") if docs else None) or DEFAULT_OBJECTIVE_MS
        ) * 1e6
        sec = Section(
            id="threads",
            title=self.title,
            intro=(
                "A front service with a processing pool of N threads calls one backend (≈ 1 ms of waiting, "
                "lognormal) per request: <em>passthrough</em> (IO-bound) and <em>transform</em> (the same plus a "
                "JSON transformation: CPU-bound at saturation). Variants: <em>blocking</em> (pool-blocking — the "
                "thread waits for the backend) and <em>non-blocking</em> (pool-callback — the call parks the "
                "request). Closed loop (one keep-alive connection per user, think time 0), then open loop at "
                "fractions of the best throughput. /proc sampled every 100 ms. See docs/threads-study.md."
            ),
        )
        for study, name, variant, reason in store.unavailable(run_id):
            if study == self.name:
                sec.notes.append(f"{name} ({variant}) unavailable: {reason}")
        if not docs:
            sec.notes.append("no thread-count measurements were stored for this run")
            return sec
        s = summarize([d.document for d in docs], objective_ns)
        sec.notes += s["notes"]
        sec.blocks += figures(s)
        return sec


STUDY = ThreadsStudy()


def _unavailable_doc(base: dict, reason: str) -> dict:
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


# ---- analysis (pure functions of the stored documents) -----------------------------------------------------


def _lat(doc: dict) -> dict:
    return next((m["latency"] for m in doc.get("measurements", []) if m.get("name") == "latency_intended"), {})


def point_row(doc: dict) -> dict:
    tp = doc["threads_point"]
    lat = _lat(doc)
    pct = lat.get("percentiles", {})
    ps = tp.get("procstat", {})
    sysm = ps.get("system", {})
    front = (ps.get("processes") or {}).get(FRONT, {})
    load = doc.get("load", {})
    completed = load.get("requests_completed") or 0
    window = ps.get("window_s") or 0
    achieved = achieved_per_s(doc)
    # Requests served in the sampler's window (≈ the measured window), for per-request figures.
    in_window = achieved * window if window else 0

    def per_request(v):
        return v / in_window if v is not None and in_window else None

    cpu_pct = front.get("cpu_pct")
    return {
        "workload": tp["workload"],
        "variant": tp["variant"],
        "threads": tp["threads"],
        "users": tp["users"],
        "kind": tp["kind"],
        "rate": tp.get("rate_per_s"),
        "achieved": achieved,
        "completed": completed,
        "mean": lat.get("mean"),
        "p50": pct.get("50"),
        "p90": pct.get("90"),
        "p99": pct.get("99"),
        "p999": pct.get("99.9"),
        "count": lat.get("count"),
        "low_confidence": lat.get("low_confidence", []),
        "errors": load.get("errors_total", 0),
        "cpu_pct": sysm.get("cpu_busy_pct"),
        "front_cpu_pct": cpu_pct,
        "procs_running": sysm.get("procs_running_mean"),
        "inst_load": sysm.get("instantaneous_load_mean"),
        "loadavg_1m": sysm.get("loadavg_1m_end"),
        "window_s": window,
        "front_runnable": front.get("runnable_threads_mean"),
        "front_threads": front.get("threads_max"),
        "vcs_per_req": per_request(front.get("voluntary_ctx_switches")),
        "ics_per_req": per_request(front.get("involuntary_ctx_switches")),
        "rq_wait_per_req_ns": per_request(front.get("runqueue_wait_ns")),
        "compute_ns": per_request(cpu_pct / 100 * window * 1e9) if cpu_pct is not None and window else None,
        "tail": tp.get("tail", {}),
        "flags": tp.get("flags", []),
    }


def summarize(docs: list[dict], objective_ns: float) -> dict:
    loads = [d for d in docs if d["threads_point"]["kind"] in ("closed", "open")]
    graphs = [d for d in docs if d["threads_point"]["kind"] == "graph"]
    rows = [point_row(d) for d in loads]
    combos = sorted(
        {(r["workload"], r["variant"]) for r in rows}, key=lambda c: (list(WORKLOADS) + ["socialnet"]).index(c[0])
    )
    threads = sorted({r["threads"] for r in rows})
    notes: list[str] = []
    cpus = None
    for d in loads:
        cpus = len(d["threads_point"]["pinning"].get("graph_cpus") or []) or (
            d["threads_point"].get("procstat", {}).get("system", {}).get("cpus")
        )
        pin = d["threads_point"]["pinning"]
        break
    else:
        pin = {}
    flagged = [r for r in rows if r["flags"]]
    for r in flagged:
        notes.append(
            f"flagged: {r['workload']} {r['variant']} N={r['threads']} users={r['users']} ({r['kind']}): "
            + "; ".join(r["flags"])
        )
    failures, rejections, dispatchers = 0, 0, set()
    for g in graphs:
        if g["threads_point"].get("failed"):
            notes.append(
                f"{g['threads_point']['workload']} {g['threads_point']['variant']} "
                f"N={g['threads_point']['threads']}: the graph did not start — {g['threads_point']['failed']}"
            )
            continue
        for s in g.get("services", {}).values():
            md = s.get("model_details", {})
            failures += int(md.get("thread_create_failures") or 0)
            rejections += int(s.get("counters", {}).get("rejections") or 0)
            if "io_dispatchers" in md:
                dispatchers.add(md["io_dispatchers"])
    notes.append(
        f"Threads the system refused to create: {failures}; requests rejected by the services: "
        f"{rejections}. IO dispatchers per pool service: "
        f"{', '.join(map(str, sorted(dispatchers))) or 'not reported'} (fixed for every N). "
        f"Pinning: generator on CPU {pin.get('load_cpus') or '—'}, graph on CPU(s) {pin.get('graph_cpus') or '—'}."
    )
    window = max((r["window_s"] for r in rows if r["kind"] == "closed"), default=0)
    recs = {
        c: recommend([r for r in rows if (r["workload"], r["variant"]) == c], objective_ns, cpus or 1) for c in combos
    }
    compare = {c: compare_threads([r for r in rows if (r["workload"], r["variant"]) == c]) for c in combos}
    for c in combos:
        cmp_ = compare[c]
        if cmp_:
            notes.append(closing_line(c, cmp_, recs[c], cpus or 1))
    return {
        "rows": rows,
        "combos": combos,
        "threads": threads,
        "notes": notes,
        "recs": recs,
        "compare": compare,
        "objective_ns": objective_ns,
        "cpus": cpus or 1,
        "window_s": window,
        "failures": failures,
    }


def _closed(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["kind"] == "closed"]


def recommend(rows: list[dict], objective_ns: float, cores: int) -> dict:
    """The N with the highest closed-loop throughput among points with p99 within the objective and
    no errors, and the analytic N ≈ cores × (1 + wait/compute) from this run's measurements."""
    ok = [r for r in _closed(rows) if r["p99"] is not None and r["p99"] <= objective_ns and not r["errors"]]
    best = max(ok, key=lambda r: r["achieved"], default=None)
    computes = sorted(r["compute_ns"] for r in _closed(rows) if r["compute_ns"])
    compute = computes[len(computes) // 2] if computes else None
    # Wait: what a request spends not computing when it does not queue — the least-loaded point's mean
    # latency minus its compute (backend wait + loopback + runtime hand-offs).
    quiet = min((r for r in _closed(rows) if r["mean"]), key=lambda r: r["mean"], default=None)
    wait = max(quiet["mean"] - compute, 0.0) if quiet and compute else None
    analytic = cores * (1 + wait / compute) if wait is not None and compute else None
    return {
        "best": best,
        "compute_ns": compute,
        "wait_ns": wait,
        "analytic": analytic,
        "cores": cores,
        "wait_at": (quiet["threads"], quiet["users"]) if quiet else None,
    }


def compare_threads(rows: list[dict]) -> dict | None:
    """The article's comparison at the most users: COMPARE[1] vs COMPARE[0] threads (else the largest
    vs the smallest N run) as ratios of p99, instantaneous load, run queue and throughput."""
    closed = _closed(rows)
    if not closed:
        return None
    ns = sorted({r["threads"] for r in closed})
    lo, hi = COMPARE if all(n in ns for n in COMPARE) else (ns[0], ns[-1])
    if lo == hi:
        return None
    users = max(r["users"] for r in closed)
    a = next((r for r in closed if r["threads"] == lo and r["users"] == users), None)
    b = next((r for r in closed if r["threads"] == hi and r["users"] == users), None)
    if not a or not b:
        return None

    def ratio(k):
        return b[k] / a[k] if a.get(k) and b.get(k) is not None else None

    return {
        "lo": lo,
        "hi": hi,
        "users": users,
        "p99": ratio("p99"),
        "load": ratio("inst_load"),
        "runq": ratio("procs_running"),
        "front_runnable": ratio("front_runnable"),
        "throughput": ratio("achieved"),
        "a": a,
        "b": b,
    }


def _verdict(r: dict) -> str:
    v = (r["tail"] or {}).get("verdict")
    return v["kind"] if v else "unavailable"


def closing_line(combo: tuple[str, str], c: dict, rec: dict, cores: int) -> str:
    w, v = combo
    thr = c["throughput"]
    text = (
        f"{w}, {v}, {c['hi']} vs {c['lo']} threads at {c['users']} users: p99 {fmt_ratio(c['p99'])}, "
        f"load {fmt_ratio(c['load'])} (instantaneous), run queue {fmt_ratio(c['runq'])}, throughput "
        + (f"{(thr - 1) * 100:+.0f} %" if thr else "—")
        + f"; tail {_verdict(c['a'])} at {c['lo']}, {_verdict(c['b'])} at {c['hi']}. "
    )
    best = rec["best"]
    text += (
        f"Recommended N = {best['threads']} ({fmt_count(best['achieved'])}/s with p99 {fmt_ns(best['p99'])}) "
        if best
        else "No N met the p99 objective. "
    )
    if rec["analytic"]:
        text += (
            f"vs the rule of thumb N ≈ {cores} × (1 + {fmt_ns(rec['wait_ns'])} / {fmt_ns(rec['compute_ns'])}) "
            f"= {rec['analytic']:.1f}"
        )
        if best:
            text += (
                " — the rule holds here"
                if 0.5 <= best["threads"] / rec["analytic"] <= 2
                else " — the rule does not hold here (off by more than 2×)"
            )
        text += "."
    else:
        text += "(analytic estimate unavailable: compute or wait not measured)."
    # Where the shape differs from the article (more threads → higher p99 and load, same throughput), say so.
    diffs = []
    if c["p99"] is not None and c["p99"] < 1.1:
        diffs.append(f"p99 did not rise (×{c['p99']:.2f})")
    if c["load"] is not None and c["load"] < 1.1:
        diffs.append(f"load did not rise (×{c['load']:.2f})")
    if thr is not None and abs(thr - 1) > 0.1:
        diffs.append(f"throughput changed by {(thr - 1) * 100:+.0f} %")
    if diffs:
        rq = c["b"].get("procs_running")
        text += (
            f" Differs from the article: {', '.join(diffs)}; measured cause: the system run queue averaged "
            f"{rq:.1f} tasks on {cores} graph CPU(s) at {c['hi']} threads"
            if rq is not None
            else f" Differs from the article: {', '.join(diffs)}"
        )
        fr = c["b"].get("front_runnable")
        text += f", the front had {fr:.1f} runnable threads on average." if fr is not None else "."
    return text


# ---- figures ---------------------------------------------------------------------------------------------------


def _panels(s: dict, key: str, kind: str = "closed", x: str = "users") -> dict:
    panels = {}
    for w, v in s["combos"]:
        lines = {}
        for n in s["threads"]:
            pts = sorted(
                (r[x], r[key])
                for r in s["rows"]
                if (r["workload"], r["variant"], r["threads"], r["kind"]) == (w, v, n, kind) and r[key] is not None
            )
            if pts:
                lines[f"N={n}"] = ([p[0] for p in pts], [p[1] for p in pts])
        panels[f"{w} · {v}"] = lines
    return panels


def _finding_vs_threads(s: dict, key: str, fmt) -> str:
    parts = []
    for c in s["combos"]:
        cmp_ = s["compare"].get(c)
        if cmp_ and cmp_["a"].get(key) is not None and cmp_["b"].get(key) is not None:
            a, b = cmp_["a"][key], cmp_["b"][key]
            parts.append(
                f"{c[0]} {c[1]}: {fmt(a)} at N={cmp_['lo']} → {fmt(b)} at N={cmp_['hi']}"
                + (f" (×{b / a:.2f})" if a else "")
            )
    return (
        "; ".join(parts) + (f" ({max(r['users'] for r in s['rows'])} users)." if parts else "")
        or "no pair of thread counts to compare in this run."
    )


def figures(s: dict) -> list:
    out: list = []
    pts = len(_closed(s["rows"]))
    cap = (
        f"Closed loop, {pts} points, ≈ {s['window_s']:.1f} s measured each; graph on {s['cpus']} CPU(s), "
        "the generator on another. Latency from the intended send time (tailscope-load)."
    )
    for key, title, ylabel, kw, fmt in (
        ("achieved", "Throughput vs users (one line per N)", "requests/s", {"log_x": True}, fmt_count),
        ("mean", "Mean latency vs users", "mean latency", {"log_x": True, "log_y": True, "ns_y": True}, fmt_ns),
        ("p99", "p99 latency vs users", "p99 latency", {"log_x": True, "log_y": True, "ns_y": True}, fmt_ns),
    ):
        fig, _ = plots.line_panels(_panels(s, key), "concurrent users", ylabel, **kw)
        out.append(Figure(title=title, svg=plots.to_svg(fig), caption=cap, finding=_finding_vs_threads(s, key, fmt)))
    # Load and run queue vs N (bars), at the most users.
    fig, axes = plots.new_figure(
        plots.PANEL_GRID_WIDTH_IN, plots.PANEL_ROW_HEIGHT_IN * math.ceil(len(s["combos"]) / 2) + 0.6
    )
    fig.clf()
    grid = fig.subplots(math.ceil(len(s["combos"]) / 2) or 1, 2, squeeze=False)
    top_users = max((r["users"] for r in _closed(s["rows"])), default=0)
    for ax, c in zip(grid.flat, s["combos"]):
        rows = {
            r["threads"]: r
            for r in _closed(s["rows"])
            if (r["workload"], r["variant"]) == c and r["users"] == top_users
        }
        ns = sorted(rows)
        series = {
            "instantaneous load": [rows[n]["inst_load"] for n in ns],
            "run queue (procs_running)": [rows[n]["procs_running"] for n in ns],
            "front runnable threads": [rows[n]["front_runnable"] for n in ns],
        }
        if s["window_s"] >= 60:
            series["loadavg 1 min (end)"] = [rows[n]["loadavg_1m"] for n in ns]
        plots.grouped_bars(ax, [f"N={n}" for n in ns], series, "tasks")
        ax.set_title(f"{c[0]} · {c[1]}", fontsize=9)
    for ax in list(grid.flat)[len(s["combos"]) :]:
        ax.set_visible(False)
    la_note = (
        ""
        if s["window_s"] >= 60
        else " The kernel's 1-minute load average is not shown: points ran "
        f"{s['window_s']:.1f} s < 60 s, so it would mostly show earlier points (unavailable, not 0)."
    )
    out.append(
        Figure(
            title=f"Load and run-queue length vs N ({top_users} users)",
            svg=plots.to_svg(fig),
            caption="Instantaneous load = mean of runnable + uninterruptible tasks over the point (system, "
            "less the sampler); run queue = procs_running; front runnable = threads of the front in "
            "state R." + la_note,
            finding=_finding_vs_threads(s, "inst_load", lambda v: f"{v:.1f}")
            + " Run queue: "
            + _finding_vs_threads(s, "procs_running", lambda v: f"{v:.1f}"),
        )
    )
    # Context switches per request vs N.
    fig, _ = plots.line_panels(
        _panels(s, "vcs_per_req", x="users"), "concurrent users", "voluntary cs / request", log_x=True
    )
    out.append(
        Figure(
            title="Context switches per request (front, voluntary)",
            svg=plots.to_svg(fig),
            caption="Summed over the front's threads from /proc/PID/task/*/status, start to end of the "
            "measured window, ÷ requests served in it. Involuntary switches and run-queue wait per "
            "request are in the table below.",
            finding="Voluntary: "
            + _finding_vs_threads(s, "vcs_per_req", lambda v: f"{v:.2f}")
            + " Involuntary: "
            + _finding_vs_threads(s, "ics_per_req", lambda v: f"{v:.2f}"),
        )
    )
    # Open loop: p99 vs achieved rate.
    if any(r["kind"] == "open" for r in s["rows"]):
        fig, _ = plots.line_panels(
            _panels(s, "p99", kind="open", x="achieved"), "achieved requests/s", "p99", log_y=True, ns_y=True
        )
        opens = [r for r in s["rows"] if r["kind"] == "open" and r["p99"]]
        worst = max(opens, key=lambda r: r["p99"])
        out.append(
            Figure(
                title="p99 vs load (open loop, fractions of each N's best throughput)",
                svg=plots.to_svg(fig),
                caption="Latency from the intended send time; connections = the most users of the sweep.",
                finding=f"highest open-loop p99: {fmt_ns(worst['p99'])} ({worst['workload']} {worst['variant']} "
                f"N={worst['threads']} at {fmt_count(worst['achieved'])}/s)",
            )
        )
    out.append(_ccdf_figure(s))
    out.append(_tail_table(s))
    out.append(_points_table(s))
    out.append(_recommendation_table(s))
    return out


def _ccdf_figure(s: dict) -> Figure:
    fig, _ = plots.new_figure(
        plots.PANEL_GRID_WIDTH_IN, plots.PANEL_ROW_HEIGHT_IN * math.ceil(len(s["combos"]) / 2) + 0.6
    )
    fig.clf()
    grid = fig.subplots(math.ceil(len(s["combos"]) / 2) or 1, 2, squeeze=False)
    top_users = max((r["users"] for r in _closed(s["rows"])), default=0)
    verdicts = []
    for ax, c in zip(grid.flat, s["combos"]):
        for r in sorted(_closed(s["rows"]), key=lambda r: r["threads"]):
            if (r["workload"], r["variant"]) != c or r["users"] != top_users or not r["tail"].get("ccdf"):
                continue
            v = r["tail"]["verdict"]
            xs, surv = r["tail"]["ccdf"]
            plots.ccdf_axis(
                ax,
                xs,
                surv,
                f"N={r['threads']} ({v['kind']})",
                (v["hill"]["threshold"], v["tail_fraction"], v["exponential_scale"]),
            )
            verdicts.append(f"{c[0]} {c[1]} N={r['threads']}: {v['kind']}")
        ax.set_title(f"{c[0]} · {c[1]}", fontsize=9)
        ax.set_ylabel("P(latency > x)", fontsize=8)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    for ax in list(grid.flat)[len(s["combos"]) :]:
        ax.set_visible(False)
    return Figure(
        title=f"Latency survival (log-log CCDF) at {top_users} users, against the fitted exponential",
        svg=plots.to_svg(fig),
        caption="Solid: empirical P(X > x) from the point's HdrHistogram (samples reconstructed from the "
        "buckets, ≤ 0.1 % off). Dashed: the exponential tail fitted to the excesses over the Hill "
        "threshold. A power-law tail is a straight line here and bends above the dashed curve.",
        finding="; ".join(verdicts) or "no tail could be analysed (too few samples per point)",
    )


def _tail_table(s: dict) -> Table:
    rows = []
    for r in sorted(s["rows"], key=lambda r: (r["workload"], r["variant"], r["kind"], r["threads"], r["users"])):
        t = r["tail"] or {}
        v = t.get("verdict")
        if v:
            h = v["hill"]
            rows.append(
                [
                    f"{r['workload']} · {r['variant']}",
                    r["kind"],
                    str(r["threads"]),
                    str(r["users"]),
                    fmt_count(h["n"]),
                    str(h["k"]),
                    f"{h['alpha']:.2f} [{h['ci_low']:.2f}, {h['ci_high']:.2f}]",
                    f"{v['xi']:+.2f}",
                    "—" if v["mean_excess_slope"] is None else f"{v['mean_excess_slope']:+.2f}",
                    v["kind"],
                ]
            )
        else:
            rows.append(
                [
                    f"{r['workload']} · {r['variant']}",
                    r["kind"],
                    str(r["threads"]),
                    str(r["users"]),
                    "—",
                    "—",
                    "—",
                    "—",
                    "—",
                    f"unavailable: {t.get('unavailable', 'not analysed')}",
                ]
            )
    return Table(
        title="Tail index per point",
        columns=[
            "workload · variant",
            "loop",
            "N",
            "users",
            "samples",
            "k",
            "Hill α [95 % CI]",
            "GPD ξ",
            "mean-excess slope",
            "verdict",
        ],
        rows=rows,
        numeric_from=2,
        wrap_columns=(9,),
        caption="Hill estimator on the top k = ⌊√n⌋ latencies (bootstrap CI); verdict from the generalized "
        "Pareto shape ξ of the same excesses (heavy: CI above 0; light: below; else exponential-like); "
        "mean-excess slope > 0 corroborates a heavy tail. docs/threads-study.md.",
    )


def _points_table(s: dict) -> Table:
    rows = []
    for r in sorted(_closed(s["rows"]), key=lambda r: (r["workload"], r["variant"], r["threads"], r["users"])):
        low = set(r["low_confidence"] or [])
        rows.append(
            [
                f"{r['workload']} · {r['variant']}",
                str(r["threads"]),
                str(r["users"]),
                fmt_count(r["achieved"]),
                *latency_cells(r["mean"], r["p50"], r["p90"], r["p99"], r["p999"], r["count"], low),
                "—" if r["cpu_pct"] is None else f"{r['cpu_pct']:.0f} %",
                "—" if r["ics_per_req"] is None else f"{r['ics_per_req']:.2f}",
                fmt_ns(r["rq_wait_per_req_ns"]),
                "; ".join(r["flags"]) or "",
            ]
        )
    return Table(
        title="Every closed-loop point",
        columns=[
            "workload · variant",
            "N",
            "users",
            "req/s",
            *LATENCY_COLUMNS,
            "CPU (system)",
            "invol. cs / req",
            "run-queue wait / req",
            "flags",
        ],
        rows=rows,
        numeric_from=1,
        wrap_columns=(13,),
        caption="* fewer than 10 samples beyond that percentile. Run-queue wait: the front's threads' time "
        "runnable but not running (/proc/PID/task/*/schedstat), per request.",
    )


def _recommendation_table(s: dict) -> Table:
    rows = []
    for c in s["combos"]:
        rec = s["recs"][c]
        best = rec["best"]
        rows.append(
            [
                f"{c[0]} · {c[1]}",
                str(best["threads"]) if best else "none met it",
                fmt_count(best["achieved"]) if best else "—",
                fmt_ns(best["p99"]) if best else "—",
                fmt_ns(rec["compute_ns"]),
                fmt_ns(rec["wait_ns"])
                + (f" (N={rec['wait_at'][0]}, {rec['wait_at'][1]} users)" if rec["wait_at"] else ""),
                f"{rec['analytic']:.1f}" if rec["analytic"] else "unavailable",
            ]
        )
    return Table(
        title=f"Recommended thread count (p99 ≤ {fmt_ns(s['objective_ns'])})",
        columns=[
            "workload · variant",
            "recommended N",
            "req/s",
            "p99",
            "compute / req",
            "wait / req",
            f"analytic N ≈ {s['cpus']} × (1 + wait/compute)",
        ],
        rows=rows,
        numeric_from=1,
        caption="Recommended: the N whose best closed-loop point has the highest throughput with p99 within "
        "the objective and no errors. Compute: the front's CPU time per request (median over points); "
        "wait: the least-loaded point's mean latency minus compute (queueing at that point, e.g. "
        "with 10 users in the quick form, inflates it; the full form has a 1-user point). Cores: the "
        "graph's CPUs.",
    )
