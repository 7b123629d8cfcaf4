"""Study `isolation`: compose-post on one host vs split over three (the capstone's experiment).

The capstone split DeathStarBench over three nodes — nginx front | compose-post and its
first-phase children | storage and timelines — and measured how latency and the
scheduling and join delays change. Here the nodes are lab hosts (network namespaces on
one bridge, labhosts.py) described by two deployment files (deployments/socialnet-1-host.yaml,
deployments/socialnet-3-hosts.yaml); `tailscope-svc --all --deployment` starts each
service inside its host, and load agents (agents.py) drive the front from a fourth lab
host, closed loop, at 20 … 100 connections, with tracing at the socialnet study's sampling.

Per point: end-to-end p50/p99 from the agents' merged histogram (sample counts beside
them), the scheduling and join delay CDFs of the async calls (the capstone's Figures 8–9,
via the critical-path engine as in the contention study), the RPC delays and the delay on
the critical path; then split ÷ single ratios at each connection count.

The split file's links carry a small one-way delay (applied by the RPC transport's
link-delay shim on a kernel without netem); the study measures its accuracy with the
engine's own ping (`tailscope-svc --ping --ping-host`) from the front host to a logic
service, with and without the shim on the pinger: added RTT ÷ configured delay.

On a small machine the hosts share CPUs: the study pins each host to a core from sysfs
where there are enough, reads back the affinity and network namespace every service
actually got, and says what was and was not isolated. Needs root and iproute2; without
them the section says unavailable and why. The lab it brings up (prefix `tsi`, its own
subnet) is taken down at the end, on error and on SIGINT/SIGTERM.

Where Docker can start, a containers arm (isolation_containers.py) runs the same split as three
container groups on the same CPUs (cpusets) beside the namespace hosts, paired per model and
connection count: containers ÷ namespace hosts p50/p99 and CPU per request in the same run.

Quick form: connections 20, 60, 100, 1 s points; full form: 20, 40, 60, 80, 100, 4 s
points (docs/isolation-study.md). Tiny form (tests): options `isolation_models`,
`isolation_connections`, `scale`.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

from tailscope.lab import agents as agents_mod
from tailscope.lab import deployment, labhosts, procstat, topology
from tailscope.lab.engines import REPO_ROOT, run_engine
from tailscope.lab.graph import PATH, SVC, graph, svc_models
from tailscope.lab.groups import cores_from_sysfs, plan_groups
from tailscope.measure.measurement import measurement
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
from tailscope.studies.common import cite, record_stores, requested_stores, study_section
from tailscope.studies.contention import _cdf_figure as delay_cdf_figure
from tailscope.studies.isolation_containers import ARM, ArmPlan, arm_lines, arm_table, compare, run_arm
from tailscope.studies.socialnet.analysis import BASELINE_MODEL, BEST_CEILING_FILE
from tailscope.studies.socialnet.analysis import TRACE_SAMPLE as SOCIALNET_TRACE_SAMPLE
from tailscope.studies.sources import CAPSTONE_SPLIT
from tailscope.traces.critpath import run_critpath
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

REPO = REPO_ROOT
SINGLE_FILE = REPO / "deployments" / "socialnet-1-host.yaml"
SPLIT_FILE = REPO / "deployments" / "socialnet-3-hosts.yaml"
LAYOUTS = ("single", "split")
LAB_PREFIX = "tsi"  # a lab of its own: never the one a user has up (prefix ts)
LAB_SUBNET = "198.19.252.0/28"
DEFAULT_BEST = "pool-callback"
CONNECTIONS_FULL = [20, 40, 60, 80, 100]
CONNECTIONS_QUICK = [20, 60, 100]
TRACE_SAMPLE = SOCIALNET_TRACE_SAMPLE
PING_CALLS = 2000
PING_WARMUP = 200
CRITPATH = "tailscope-critpath"
AGENTS = agents_mod.ENGINE
ANALYSIS = "isolation-analysis"
LATE_START_S = 0.05  # an agent starting later than this missed part of the others' warm-up
DELAYS = (
    ("probe_scheduling", "async-call scheduling"),
    ("probe_join", "async-call join"),
    ("rpc_scheduling", "RPC scheduling"),
    ("rpc_join", "RPC join"),
    ("delay_on_path", "delay on the critical path"),
)


def unavailable_reason() -> str | None:
    """Why the study cannot run here, or None."""
    if os.geteuid() != 0:
        return "lab hosts need root (network namespaces, veth links, a bridge: CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    if shutil.which("ip") is None:
        return "lab hosts need iproute2 (the `ip` command), which is not installed"
    return None


def choose_models(ctx: RunContext) -> tuple[list[str], str]:
    """std-async and the best model, and a sentence saying which and why."""
    asked = ctx.options.get("isolation_models")
    if asked:
        known = svc_models()
        bad = [m for m in asked if m not in known]
        if bad:
            raise ValueError(f"isolation_models: '{bad[0]}' is not one of {', '.join(known)}")
        return list(asked), f"models {', '.join(asked)} (chosen with the isolation_models option)"
    # The socialnet study names the model of the highest closed-loop ceiling in its artifacts.
    best = _socialnet_best(Path(ctx.artifacts_dir) / "socialnet" / BEST_CEILING_FILE)
    if best:
        why = f"{best}: the highest closed-loop ceiling in this run's socialnet study"
        chosen = best
    else:
        chosen = DEFAULT_BEST
        why = (
            f"{DEFAULT_BEST}: the socialnet study did not run in this run, so the default best model "
            "(docs/isolation-study.md says why)"
        )
    models = list(dict.fromkeys([BASELINE_MODEL, chosen]))
    if len(models) == 1:
        why += "; it is std-async itself, so only std-async runs"
    return models, f"DeathStarBench's std-async and {why}"


def _socialnet_best(path: Path) -> str | None:
    """The model socialnet's BEST_CEILING_FILE names; None when the study did not run (or left no such file)."""
    try:
        return str(json.loads(path.read_text())["model"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


# ---- CPU placement ---------------------------------------------------------------------------


def _netns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def applied_isolation(ready: dict, service_netns: dict[str, str | None]) -> dict:
    """What each service process actually got: its CPU affinity and whether it runs in its
    host's network namespace (/proc/PID/ns/net against /run/netns/NAME), read while it runs."""
    pids = ready.get("pids") or {}
    out: dict[str, dict] = {}
    for svc, ns in service_netns.items():
        pid = pids.get(svc)
        if pid is None:
            out[svc] = {"pid": None, "cpus": None, "in_netns": None}
            continue
        want = _netns_inode(f"/run/netns/{ns}" if ns else "/proc/self/ns/net")
        have = _netns_inode(f"/proc/{pid}/ns/net")
        out[svc] = {
            "pid": pid,
            "cpus": procstat.cpus_allowed_list(int(pid)),
            "in_netns": None if want is None or have is None else want == have,
        }
    return out


def shared_llc(cpus: list[int]) -> list[str]:
    """Groups of the given CPUs that share a last-level cache (sysfs cache/index*/level 3)."""
    groups: dict[str, None] = {}
    for c in cpus:
        base = Path(f"/sys/devices/system/cpu/cpu{c}/cache")
        for idx in sorted(base.glob("index*")):
            try:
                if (idx / "level").read_text().strip() == "3":
                    groups[(idx / "shared_cpu_list").read_text().strip()] = None
            except OSError:
                continue
    return list(groups)


# ---- the study ----------------------------------------------------------------------------------


class IsolationStudy:
    name = "isolation"
    title = "Isolation: compose-post on one host vs split over three lab hosts"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        reason = unavailable_reason()
        if reason:
            return [_analysis_document({"unavailable_reason": reason}, reason)]
        full = ctx.form == "full"
        scale = float(ctx.options.get("scale") or 1.0)
        duration = max(0.3, (4.0 if full else 1.0) * scale)
        warmup = max(0.1, (1.0 if full else 0.3) * scale)
        counts = [int(c) for c in ctx.options.get("isolation_connections") or []] or (
            CONNECTIONS_FULL if full else CONNECTIONS_QUICK
        )
        bad = [c for c in counts if not 1 <= c <= 10_000]
        if bad:
            raise ValueError(f"isolation_connections: {bad[0]} is outside 1..10000")
        models, models_why = choose_models(ctx)
        art = Path(ctx.artifacts_dir) / "isolation"
        art.mkdir(parents=True, exist_ok=True)
        topo_json = topology.to_engine_json(topology.SOCIALNET, art / "socialnet.json")
        topo_doc = json.loads(topo_json.read_text())
        services = topology.services(topo_doc)
        front = (topo_doc.get("front") or {}).get("service")
        files = {"single": SINGLE_FILE, "split": SPLIT_FILE}
        deps = {k: deployment.with_lab_prefix(deployment.load(p, services), LAB_PREFIX) for k, p in files.items()}
        split = deps["split"]
        cores = cores_from_sysfs()
        # The file fixes no CPUs: one plan of the groups' CPUs from this machine's cores serves both arms.
        groups = plan_groups(split, services, cores)
        host_cpus, load_cpus = groups.cpus, groups.load_cpus
        # One host on one core set in the single layout: every core the split's hosts use.
        union = tuple(sorted({c for cs in host_cpus.values() for c in cs}))
        placed = {
            "split": deployment.with_host_cpus(split, host_cpus),
            "single": deployment.with_host_cpus(deps["single"], {h: union for h in deps["single"].service_hosts()}),
        }
        lab_config = labhosts.validate(max(d.lab_hosts_needed() for d in deps.values()), LAB_SUBNET, LAB_PREFIX)
        analysis: dict = {
            "models": models,
            "models_why": models_why,
            "connections": counts,
            "duration_s": duration,
            "warmup_s": warmup,
            "trace_sample": TRACE_SAMPLE,
            "lab": {"prefix": LAB_PREFIX, "subnet": LAB_SUBNET, "hosts": lab_config.hosts},
            "cores": [list(c) for c in cores],
            "plan": {
                "split": {h: list(c) for h, c in host_cpus.items()},
                "single": list(union),
                "load": list(load_cpus),
            },
            "links": [
                {"between": [lk.a, lk.b], "delay_us": lk.delay_us, "jitter_us": lk.jitter_us} for lk in split.links
            ],
            "applied": {},
            "llc_groups": shared_llc(sorted({c for core in cores for c in core})),
            "ping": None,
        }
        docs: list[EngineDocument] = []
        total = len(LAYOUTS) * len(models) * len(counts)
        step = 0
        try:
            try:
                labhosts.up(lab_config)
            except labhosts.LabError as e:
                return [_analysis_document(analysis | {"unavailable_reason": str(e)}, f"lab hosts: {e}")]
            lab = {h.name: h.address for h in labhosts.state(LAB_PREFIX).hosts}
            for layout in LAYOUTS:
                dep = placed[layout]
                engine_doc = deployment.engine_json(dep, services, lab)
                dep_json = deployment.write_engine_json(engine_doc, art / f"deployment-{layout}.json")
                addresses = deployment.host_addresses(dep, lab)
                # engine_json checked that every service has a host.
                host_of = {s: str(dep.services[s].host) for s in services}
                front_address = addresses[host_of[str(front)]][1]
                service_netns = {s: addresses[host_of[s]][0] for s in services}
                load_agents = _agents(dep, addresses, load_cpus)
                for model in models:
                    for c in counts:
                        point = f"{layout}/{model}/c{c}"
                        ctx.progress(f"isolation: {layout} {model} c={c}", step / total)
                        step += 1
                        traces = art / "traces" / layout / model / str(c)
                        out = art / f"graph-{layout}-{model}-{c}.json"
                        extra = ["--deployment", str(dep_json)]
                        # Real stores run on the storage host (the deployment places them; docs/stores.md).
                        with graph(
                            topo_json,
                            model,
                            out,
                            TRACE_SAMPLE,
                            traces,
                            extra=extra,
                            stores=requested_stores(ctx.options),
                        ) as (port, ready):
                            _results, merged = agents_mod.run_agents(
                                load_agents,
                                host=front_address,
                                port=port,
                                connections=c,
                                rate_per_s=0,
                                duration_s=duration,
                                warmup_s=warmup,
                                args=_load_args(),
                                artifacts_dir=art / "hlog" / layout / model / str(c),
                                timeout_s=30.0,
                            )
                            # Read after the load, not at the ready line: a service forked just before it
                            # may still be entering its namespace and CPUs.
                            analysis["applied"].setdefault(layout, applied_isolation(ready, service_netns))
                            record_stores(merged, ready)
                            if layout == "split" and analysis["ping"] is None and split.links:
                                ctx.progress("isolation: link-delay accuracy (ping)", step / total)
                                analysis["ping"] = _ping_accuracy(ready, dep, addresses, services, scale)
                        merged["isolation_point"] = {"layout": layout, "model": model, "connections": c}
                        docs.append(EngineDocument(self.name, AGENTS, merged, point))
                        trace_files = sorted(traces.glob("**/traces.jaeger.json"))
                        if trace_files:
                            doc = run_critpath(
                                [str(f) for f in trace_files], artifacts_dir=art / "analyze" / layout / model / str(c)
                            )
                            doc["isolation_point"] = merged["isolation_point"]
                            docs.append(EngineDocument(self.name, CRITPATH, doc, point))
            # The containers arm: the same split as container groups, beside the namespace hosts, paired.
            # Its namespace side runs without the links' delay, which the containers have no shim for.
            unlinked = replace(placed["split"], links=[])
            split_json = deployment.write_engine_json(
                deployment.engine_json(unlinked, services, lab), art / "deployment-split-unlinked.json"
            )
            addresses = deployment.host_addresses(unlinked, lab)
            arm = ArmPlan(
                study=self.name,
                topo_doc=topo_doc,
                topo_json=topo_json,
                front=str(front),
                groups=groups,
                split_json=split_json,
                front_address=addresses[str(unlinked.services[str(front)].host)][1],
                agents=_agents(unlinked, addresses, load_cpus),
                load_args=_load_args(),
                models=models,
                counts=counts,
                duration_s=duration,
                warmup_s=warmup,
                art=art / "containers-arm",
            )
            arm.art.mkdir(parents=True, exist_ok=True)
            arm_docs, analysis["containers"] = run_arm(arm, ctx.options, lambda what: ctx.progress(what, 1.0))
            docs += arm_docs
        finally:
            # On success, error and interrupt alike: nothing of the lab outlives the study.
            labhosts.down(LAB_PREFIX, stop_processes=True)
        docs.append(_analysis_document(analysis, None))
        return docs

    def section(self, store: Store, run_id: str) -> Section:
        sec = study_section(
            self,
            store,
            run_id,
            graphs=True,
            intro="The capstone's experiment: DeathStarBench's compose-post graph with every service on one lab host, "
            "and split over three (nginx front | compose-post with text, user, media, unique-id, url-shorten and "
            "user-mention | post-storage, the timelines and social-graph), lab hosts being network namespaces on "
            f"one bridge (deployments/socialnet-1-host.yaml, socialnet-3-hosts.yaml). Load agents on a fourth lab "
            f"host drive {PATH} closed loop; tracing at {TRACE_SAMPLE * 100:g} % sampling (the socialnet study's).",
        )
        docs = store.documents(run_id, self.name)
        analysis = next((d.document for d in docs if d.engine == ANALYSIS), None)
        if analysis is None:
            sec.notes.append("no isolation measurements were stored for this run")
            return sec
        if analysis.get("unavailable_reason"):
            return sec  # the unavailable note says why
        sec.intro += f" Models: {analysis['models_why']}."
        all_loads = {d.point: d.document for d in docs if d.engine == AGENTS}
        loads = {p: d for p, d in all_loads.items() if p.split("/")[0] in LAYOUTS}
        crit = {d.point: d.document for d in docs if d.engine == CRITPATH}
        for point in sorted(set(loads) - set(crit)):
            sec.notes.append(f"{point}: delays unavailable: the graph wrote no traces at this point")
        sec.notes += isolation_lines(analysis)
        sec.notes.append(link_accuracy_line(analysis))
        rows = point_rows(loads, crit)
        sec.blocks.append(_points_table(rows, analysis))
        sec.blocks.append(_ratio_table(rows))
        sec.add_references([split_check(ratios(rows), analysis)])
        df = store.measurements(run_id, self.name)
        cdf = store.cdf(run_id, self.name)
        for key, label in DELAYS[:2]:
            fig = delay_cdf_figure(df[df["engine"] == CRITPATH], cdf, key, label.split()[-1])
            if fig:
                sec.blocks.append(
                    Figure(
                        fig.title.replace("Async-call", "Isolation: async-call") + " (panel = layout/model)",
                        fig.svg,
                        fig.caption,
                        fig.finding,
                    )
                )
        sec.blocks.append(_agents_table(loads))
        record = analysis.get("containers")
        arm = compare(record, {p: d for p, d in all_loads.items() if p.split("/")[0] in ARM}, point_flags)
        sec.notes += arm_lines(arm, record)
        table = arm_table(arm)
        if table is not None:
            sec.blocks.append(table)
        return sec


STUDY = IsolationStudy()


def _agents(dep, addresses: dict, load_cpus: tuple) -> list[agents_mod.Agent]:
    """One load agent per load host of DEP, in its namespace (else one here), on the load CPUs."""
    cpus = frozenset(load_cpus) or None
    agents = [agents_mod.Agent(f"{h}@{addresses[h][0]}", addresses[h][0], cpus) for h in dep.load_hosts]
    return agents or [agents_mod.Agent("load", None, cpus)]


def _load_args() -> list[str]:
    """The flags every agent shares (run_agents sets connections, rate, duration, warm-up, host and
    port per agent): HTTP keep-alive on the front's path, one load thread, errors counted, not fatal."""
    return ["-t", "1", "--protocol", "http", "--path", PATH, "--timeout", "2s", "--allow-errors"]


def _ping_accuracy(ready: dict, dep, addresses: dict, services: list[str], scale: float) -> dict:
    """RTT across the first link as the graph's calls see it, and without any delay.

    With: pings from inside the link's first host, carrying that host's side of the link
    (`--link-delay`), to a service on the second host, which holds its answers to the first
    host's address (the shim sits in both senders: the RTT gains 2 × (delay + jitter/2) on
    average). Without: the same pings from the load host, which no link touches. Same target,
    same bridge, one run apart."""
    link = dep.links[0]
    ports, pids = ready.get("ports") or {}, ready.get("pids") or {}
    target = next((s for s in services if dep.services[s].host == link.b and s in ports), None)
    near_ns, far_addr = addresses[link.a][0], addresses[link.b][1]
    plain_host = next((h for h in dep.load_hosts if h in addresses), None)
    base_doc = {
        "from_host": link.a,
        "to_host": link.b,
        "plain_host": plain_host,
        "target": target,
        "delay_us": link.delay_us,
        "jitter_us": link.jitter_us,
    }
    if target is None:
        return base_doc | {"unavailable": f"no service of host {link.b} reported a port in the graph's ready line"}
    if plain_host is None:
        return base_doc | {"unavailable": "the deployment has no load host to ping from without a link"}
    calls = max(200, round(PING_CALLS * scale))
    args = [
        "--ping",
        str(ports[target]),
        "--ping-host",
        far_addr,
        "--ping-calls",
        str(calls),
        "--ping-warmup",
        str(max(1, round(PING_WARMUP * scale))),
        "--ping-concurrency",
        "1",
    ]
    if target in pids:
        args += ["--ping-pid", str(pids[target])]
    plain_ns = addresses[plain_host][0]
    shim = f"{far_addr}={link.delay_us}" + (f":{link.jitter_us}" if link.jitter_us else "")
    without = run_engine(SVC, args, timeout_s=120, wrapper=labhosts.exec_args(plain_ns) if plain_ns else None)
    with_delay = run_engine(
        SVC, [*args, "--link-delay", shim], timeout_s=120, wrapper=labhosts.exec_args(near_ns) if near_ns else None
    )
    return base_doc | {
        "calls": calls,
        "without": (without.document.get("ping") or {}).get("rtt"),
        "with": (with_delay.document.get("ping") or {}).get("rtt"),
    }


def _analysis_document(analysis: dict, unavailable: str | None) -> EngineDocument:
    doc = {
        "schema": "tailscope.result/1",
        "engine": ANALYSIS,
        "machine": {},
        "measurements": [],
        "unavailable": [{"name": "isolation study", "variant": "", "reason": unavailable}] if unavailable else [],
        **analysis,
    }
    return EngineDocument(STUDY.name, ANALYSIS, doc, "analysis")


# ---- analysis (pure functions of the stored documents) ------------------------------------------


def _point(point: str) -> tuple[str, str, int]:
    layout, model, c = point.split("/")
    return layout, model, int(c.removeprefix("c"))


def point_flags(load: dict) -> list[str]:
    """Why a point may not be cited as a clean finding: errors, a generator-limited agent, a late start."""
    flags = []
    errors = int((load.get("load") or {}).get("errors_total") or 0)
    if errors:
        flags.append(f"{errors} errors")
    limited = [a["name"] for a in load.get("agents", []) if a.get("generator_limited")]
    if limited:
        flags.append(f"generator-limited ({', '.join(limited)})")
    late = [a["name"] for a in load.get("agents", []) if (a.get("start_late_s") or 0) > LATE_START_S]
    if late:
        flags.append(f"agent started late ({', '.join(late)})")
    return flags


def _dist(doc: dict | None, name: str) -> tuple[float | None, float | None, int]:
    m = measurement(doc, name)
    if m is None:
        return None, None, 0
    return m.p_ns("50"), m.p_ns("99"), m.count


def point_rows(loads: dict[str, dict], crit: dict[str, dict]) -> list[dict]:
    rows = []
    for point in sorted(loads, key=_point):
        layout, model, c = _point(point)
        load = loads[point]
        lat = measurement(load, agents_mod.TAG, "merged")
        row = {
            "point": point,
            "layout": layout,
            "model": model,
            "connections": c,
            "rate_per_s": float((load.get("load") or {}).get("achieved_per_s") or 0.0),
            "p50_ns": lat.p_ns("50") if lat else None,
            "p99_ns": lat.p_ns("99") if lat else None,
            "samples": lat.count if lat else 0,
            "low_confidence": sorted(lat.low_confidence) if lat else [],
            "flags": point_flags(load),
        }
        for key, _label in DELAYS:
            row[key] = _dist(crit.get(point), key)
        rows.append(row)
    return rows


def ratios(rows: list[dict]) -> list[dict]:
    """split ÷ single per (model, connections), for every figure both points have."""
    by = {(r["layout"], r["model"], r["connections"]): r for r in rows}
    out = []
    for (layout, model, c), split in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        if layout != "split" or ("single", model, c) not in by:
            continue
        single = by[("single", model, c)]

        def r(a: float | None, b: float | None) -> float | None:
            return a / b if a is not None and b else None

        out.append(
            {
                "model": model,
                "connections": c,
                "flags": single["flags"] + split["flags"],
                "rate": r(split["rate_per_s"], single["rate_per_s"]),
                "p50": r(split["p50_ns"], single["p50_ns"]),
                "p99": r(split["p99_ns"], single["p99_ns"]),
                **{key: r(split[key][1], single[key][1]) for key, _ in DELAYS},
            }
        )
    return out


SPLIT_REPORTED = (
    "splitting compose-post over 3 nodes (nginx | compose-post and its children | storage) gave "
    "“a huge drop in the overall latencies”"
)


def split_check(rs: list[dict], analysis: dict) -> ReferenceCheck:
    """The capstone's split result beside this run's: split ÷ single end-to-end p99 over the unflagged
    pairs; it holds where the split lowered p99 at every pair, partly at some, not at none. The
    capstone's 3 nodes had cores of their own: when the plan gave two service hosts a CPU in common,
    the split is not comparable (the reason names the shared CPUs; the ratios are shown all the same)."""
    ref = "capstone: the 3-node split"
    clean = [r for r in rs if not r["flags"] and r["p99"] is not None]
    if not clean:
        why = "no pair of points measured in both layouts without a flag"
        return ReferenceCheck(ref, SPLIT_REPORTED, "unavailable", UNAVAILABLE, why, CAPSTONE_SPLIT)
    lower = [r for r in clean if r["p99"] < 1.0]
    lo = min(r["p99"] for r in clean)
    hi = max(r["p99"] for r in clean)
    here = f"split ÷ single p99 {fmt_ratio(lo)} … {fmt_ratio(hi)} over {len(clean)} unflagged pairs"
    split = (analysis.get("plan") or {}).get("split") or {}
    hosts = sorted(split)
    shared = sorted({c for i, a in enumerate(hosts) for b in hosts[i + 1 :] for c in set(split[a]) & set(split[b])})
    if shared:
        why = (
            f"the capstone's 3 nodes had cores of their own; here service hosts share CPU(s) "
            f"{', '.join(map(str, shared))} of this machine, so the split added network hops and link delay, not "
            f"cores. Measured all the same: {here}; the split lowered p99 at {len(lower)} of {len(clean)}."
        )
        return ReferenceCheck(ref, SPLIT_REPORTED, here, NOT_COMPARABLE, why, CAPSTONE_SPLIT)
    verdict = HOLDS if len(lower) == len(clean) else PARTLY if lower else DOES_NOT_HOLD
    cpus = sorted({c for v in split.values() for c in v})
    why = f"{here}; the split lowered p99 at {len(lower)} of {len(clean)}" + (
        f" — its 3 service hosts on CPUs of their own ({len(cpus)} of this machine), on one machine's bridge"
        if cpus
        else ""
    )
    return ReferenceCheck(ref, SPLIT_REPORTED, here, verdict, why + ".", CAPSTONE_SPLIT)


def _dist_cell(d: tuple[float | None, float | None, int]) -> str:
    p50, p99, n = d
    if not n:
        return "unavailable"
    return f"{fmt_ns(p50)} / {fmt_ns(p99)} (n={fmt_count(n)})"


def _points_table(rows: list[dict], analysis: dict) -> Table:
    body = []
    for r in rows:
        low = " *" if "99" in r["low_confidence"] else ""
        body.append(
            [
                cite(f"{r['layout']} {r['model']}", r["flags"]),
                str(r["connections"]),
                fmt_count(r["rate_per_s"]),
                fmt_ns(r["p50_ns"]),
                fmt_ns(r["p99_ns"]) + low,
                fmt_count(r["samples"]),
                *[_dist_cell(r[key]) for key, _ in DELAYS],
            ]
        )
    return Table(
        "End-to-end latency and delays per point",
        ["layout / model", "connections", "requests/s", "p50", "p99", "samples"]
        + [f"{label} p50 / p99" for _, label in DELAYS],
        body,
        f"Closed loop, {analysis['duration_s']:g} s measured after {analysis['warmup_s']:g} s warm-up per point, a "
        "fresh graph per point; end-to-end latency from the load agents' merged histogram; delays from the sampled "
        "traces (critical-path engine), n = how many values stand behind each. A p99 marked * has fewer than 10 "
        "samples beyond it.",
        numeric_from=1,
    )


def _ratio_table(rows: list[dict]) -> Table:
    rs = ratios(rows)
    body = [
        [
            cite(r["model"], r["flags"]),
            str(r["connections"]),
            fmt_ratio(r["rate"]),
            fmt_ratio(r["p50"]),
            fmt_ratio(r["p99"]),
            *[fmt_ratio(r[key]) for key, _ in DELAYS],
        ]
        for r in rs
    ]
    clean = [r for r in rs if not r["flags"] and r["p99"] is not None]
    if clean:
        lo = min(clean, key=lambda r: r["p99"])
        hi = max(clean, key=lambda r: r["p99"])
        finding = (
            f"Split ÷ single p99 over the {len(clean)} unflagged points: from {fmt_ratio(lo['p99'])} "
            f"({lo['model']}, {lo['connections']} connections) to {fmt_ratio(hi['p99'])} "
            f"({hi['model']}, {hi['connections']} connections)"
        )
        for key, label in DELAYS:
            vals = [r[key] for r in clean if r[key] is not None]
            if vals:
                finding += f"; {label} p99 {fmt_ratio(min(vals))} … {fmt_ratio(max(vals))}"
        finding += "."
    elif rs:
        finding = "Every compared pair has a flagged point (see the flags in the first column): no clean finding."
    else:
        finding = "Ratios unavailable: no connection count was measured in both layouts."
    return Table(
        "Split ÷ single, per model and connection count",
        ["model", "connections", "requests/s", "p50", "p99"] + [f"{label} p99" for _, label in DELAYS],
        body,
        "Each figure of the 3-host split over the same figure on one host, same model and connections, same run. "
        + finding,
        numeric_from=1,
    )


def _agents_table(loads: dict[str, dict]) -> Table:
    body = []
    for point in sorted(loads, key=_point):
        for a in loads[point].get("agents", []):
            body.append(
                [
                    point,
                    a["name"],
                    "unpinned" if not a.get("cpus") else deployment.format_cpu_list(a["cpus"]),
                    str(a["connections"]),
                    fmt_count(a["achieved_per_s"]),
                    fmt_ns(a.get("p50_ns")),
                    fmt_ns(a.get("p99_ns")),
                    fmt_count(a.get("errors_total", 0)),
                ]
            )
    return Table(
        "Load agents, per point",
        ["point", "agent", "CPUs", "connections", "requests/s", "p50", "p99", "errors"],
        body,
        "Each agent's own figures (its document); the points' end-to-end figures are of the agents' merged "
        "histograms (HdrHistogram logs added).",
        numeric_from=3,
    )


def isolation_lines(analysis: dict) -> list[str]:
    """What was and was not isolated, from the affinity and namespaces the services really had."""
    lines = []
    for layout, applied in (analysis.get("applied") or {}).items():
        checked = [s for s, a in applied.items() if a.get("in_netns") is not None]
        inside = [s for s in checked if applied[s]["in_netns"]]
        net = (
            f"{layout}: network namespaces: {len(inside)} of {len(applied)} services verified inside their "
            f"host's namespace (/proc/PID/ns/net)"
            + (f"; not verifiable for {len(applied) - len(checked)}" if len(checked) < len(applied) else "")
        )
        cpus_by = {s: a.get("cpus") for s, a in applied.items() if a.get("cpus")}
        distinct = sorted(set(cpus_by.values()))
        cpu = f"CPU affinity seen: {'; '.join(f'{c} ({sum(1 for v in cpus_by.values() if v == c)} services)' for c in distinct)}"
        lines.append(f"{net}. {cpu}.")
    plan = analysis.get("plan") or {}
    split = plan.get("split") or {}
    hosts = sorted(split)
    shared = [
        (a, b, sorted(set(split[a]) & set(split[b])))
        for i, a in enumerate(hosts)
        for b in hosts[i + 1 :]
        if set(split[a]) & set(split[b])
    ]
    cores = analysis.get("cores") or []
    cpu_line = (
        f"CPU isolation of the split ({len(cores)} core(s) available for {len(hosts)} service hosts): "
        + ", ".join(f"{h} on CPU {deployment.format_cpu_list(split[h])}" for h in hosts)
        + "; "
        + (
            f"{len(shared)} of {len(hosts) * (len(hosts) - 1) // 2} host pairs share CPUs ("
            + ", ".join(f"{a}–{b} on {deployment.format_cpu_list(c)}" for a, b, c in shared)
            + "): CPU only partly isolated"
            if shared
            else "no two service hosts share a CPU"
        )
        + "; load agents "
        + (
            f"on CPU {deployment.format_cpu_list(plan['load'])} of their own"
            if plan.get("load")
            else "unpinned (no core left for them): they share every CPU with the services"
        )
        + "."
    )
    lines.append(cpu_line)
    llc = analysis.get("llc_groups") or []
    if llc:
        lines.append(
            "Shared last-level cache (sysfs): CPUs "
            + "; ".join(llc)
            + (" — every host shares one L3" if len(llc) == 1 else "")
            + "."
        )
    return lines


def link_accuracy_line(analysis: dict) -> str:
    ping = analysis.get("ping")
    links = analysis.get("links") or []
    if not links:
        return "Link-delay accuracy unavailable: the split deployment configures no link delay."
    if not ping:
        return "Link-delay accuracy unavailable: no ping was run (no split point completed)."
    if ping.get("unavailable"):
        return f"Link-delay accuracy unavailable: {ping['unavailable']}."
    w, wo = ping.get("with") or {}, ping.get("without") or {}
    p_w, p_wo = (w.get("percentiles") or {}).get("50"), (wo.get("percentiles") or {}).get("50")
    if p_w is None or p_wo is None or w.get("mean") is None or wo.get("mean") is None:
        return "Link-delay accuracy unavailable: a ping run answered no call."
    delay, jitter = float(ping["delay_us"]), float(ping["jitter_us"])
    # Both senders hold their frames: delay + U[0, jitter] each way.
    expected_us = 2 * (delay + jitter / 2)
    added_p50_us = (p_w - p_wo) / 1e3
    added_mean_us = (w["mean"] - wo["mean"]) / 1e3
    # The ratio is taken at p50: on a shared machine a few descheduled pings move the mean far more
    # than the shim does (the mean is shown beside it).
    return (
        f"Link-delay accuracy ({ping['from_host']} → {ping['to_host']}: {ping['calls']} pings to {ping['target']}, "
        f"one in flight, n={w.get('count')} and {wo.get('count')}): RTT p50 {fmt_ns(p_w)} across the link "
        f"({delay:g} µs one way, jitter {jitter:g} µs, both ends) vs {fmt_ns(p_wo)} from the {ping['plain_host']} "
        f"host (no link): added {added_p50_us:.1f} µs at p50 ({added_mean_us:.1f} µs in the mean), "
        f"{added_p50_us / expected_us:.2f} × the configured {expected_us:g} µs round trip."
    )
