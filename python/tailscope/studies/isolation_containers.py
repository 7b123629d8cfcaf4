"""The isolation study's containers arm: the capstone's split as three container groups beside the
three namespace hosts, in the same run (docs/isolation-study.md, "Containers arm").

The split's host groups (front | compose-post and its children | storage) become container groups on
one Docker engine: every service of a group in its own container with the group's CPUs as its
`cpuset` — the very CPUs the namespace arm pins that group's lab host to (lab/groups.py plans them
once from this machine's cores) — on one lab-range bridge, peers reached by name (lab/cluster.py, the
Compose path). A user with several machines runs the same groups as nodes (docs/deploy.md).

Per model and connection count, a pair in alternating order (a machine that gets busier or quieter
biases both alike):

* `namespaces/MODEL/cN` — the split on lab hosts (`tailscope-svc --all --deployment`);
* `containers/MODEL/cN` — the split as container groups;

both driven by the same closed-loop load agents (the study's own flags and window, the agents
pinned alike), stores simulated on both (the image runs no store server), tracing off on both (the
namespace points of the split ÷ single comparison trace, and tracing costs CPU) and no link delay on
either (the containers have no shim; the namespace side runs the split file without its `links`), so
the pair differs only in how the groups are isolated. Each point's document is the agents' merged one plus the
services' CPU over the load window (procstat.window_cpu; container processes by their host PIDs) and
the requests the front received: CPU per request. The ratios are containers ÷ namespace hosts at
p50, p99 and CPU per request.

Runs where a private Docker daemon can start (cluster.unavailable_reason, the containers study's
rule) and the option `isolation_containers` is not off; anywhere else the arm records why it did not
run, and its figures are null with that reason — never a number it did not measure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tailscope.lab import agents as agents_mod
from tailscope.lab import cluster, compose, deployment, procstat
from tailscope.lab.engines import EngineError
from tailscope.lab.graph import graph
from tailscope.lab.groups import GroupPlan
from tailscope.measure.measurement import measurement
from tailscope.report.blocks import Table
from tailscope.store import EngineDocument
from tailscope.studies.common import cite, front_requests, record_stores, stores_text
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

ARM = ("namespaces", "containers")
STORES = "simulated"
# The container side's stores, as a document records them: the image holds no store server (lab/cluster.py).
CONTAINER_STORES = {"mode": "simulated", "reason": "the container image runs no store server", "servers": []}
OPTION = "isolation_containers"  # False: the arm is off; absent or True: it runs where Docker can start


def unavailable_reason(options: dict) -> str | None:
    """Why the arm does not run here (None: it runs)."""
    if options.get(OPTION) is False:
        return f"turned off (option {OPTION})"
    reason = cluster.unavailable_reason()
    return f"Docker cannot start here: {reason}" if reason else None


# ---- run ----------------------------------------------------------------------------------------


@dataclass
class ArmPlan:
    """What the arm needs from the study's run: the split as the namespace arm runs it."""

    study: str
    topo_doc: dict
    topo_json: Path
    front: str
    groups: GroupPlan  # the split's groups with their CPUs: the same for both sides
    split_json: Path  # the engine's deployment of the split on the study's lab hosts, without links
    front_address: str  # the front's lab host address (namespace side)
    agents: list[agents_mod.Agent]  # the namespace side's agents (on the load lab host)
    load_args: list[str]
    models: list[str]
    counts: list[int]
    duration_s: float
    warmup_s: float
    art: Path


def _load(plan: ArmPlan, agents: list[agents_mod.Agent], host: str, port: int, c: int, where: Path) -> dict:
    _results, merged = agents_mod.run_agents(
        agents,
        host=host,
        port=port,
        connections=c,
        rate_per_s=0,
        duration_s=plan.duration_s,
        warmup_s=plan.warmup_s,
        args=plan.load_args,
        artifacts_dir=where,
        timeout_s=30.0,
    )
    return merged


def _namespaces(plan: ArmPlan, model: str, c: int) -> dict:
    out = plan.art / f"graph-namespaces-{model}-{c}.json"
    extra = ["--deployment", str(plan.split_json)]
    with graph(plan.topo_json, model, out, 0.0, None, extra=extra, stores=STORES) as (port, ready):
        pids = {str(k): int(v) for k, v in (ready.get("pids") or {}).items()}
        hlog = plan.art / "hlog" / "namespaces" / model / str(c)
        merged, window = procstat.window_cpu(pids, lambda: _load(plan, plan.agents, plan.front_address, port, c, hlog))
        record_stores(merged, ready)
    services = json.loads(out.read_text()).get("services") or {}
    return merged | {"window_cpu": window, "front_requests": front_requests(services, plan.front)}


def _containers(plan: ArmPlan, model: str, c: int, engine: cluster.ClusterState, record: dict) -> dict:
    options = compose.ComposeOptions(model=model, trace_sample=0.0)
    state = cluster.up(plan.topo_doc, plan.groups.deployment, options, progress=lambda _t: None, engine=engine)
    try:
        spec = cluster.spec(state)
        address = spec["services"][plan.front]["networks"][compose.NETWORK]["ipv4_address"]
        pids = cluster.service_pids(state)
        # What each container really got, read from the kernel while it runs (the first point's).
        record.setdefault("applied", applied_cpusets(spec, pids, plan.groups))
        agent = agents_mod.Agent("load", None, frozenset(plan.groups.load_cpus) or None)
        hlog = plan.art / "hlog" / "containers" / model / str(c)
        merged, window = procstat.window_cpu(pids, lambda: _load(plan, [agent], address, compose.FRONT_PORT, c, hlog))
        results = cluster.collect(state, plan.art / "containers")
    finally:
        left = cluster.remove(state)
        if left:
            raise cluster.ClusterError(f"{state.prefix}: could not remove {', '.join(left)}")
    services: dict = {}
    for p in results.glob("*.json"):
        services |= json.loads(p.read_text()).get("services") or {}
    return merged | {
        "window_cpu": window,
        "front_requests": front_requests(services, plan.front),
        "stores": CONTAINER_STORES,
        "front_address": address,
    }


def applied_cpusets(spec: dict, pids: dict[str, int], groups: GroupPlan) -> dict[str, dict]:
    """Per service container: its group, the group's CPUs, the cpuset the Compose file gave it, and
    the CPUs the kernel lets its engine run on (/proc/PID/status of its host PID)."""
    out: dict[str, dict] = {}
    for name, svc in spec["services"].items():
        if name not in pids:
            continue
        spec_of = groups.deployment.services.get(name)
        group = spec_of.host if spec_of else None
        cpus = groups.cpus.get(group) if group else None
        out[name] = {
            "group": group,
            "group_cpus": deployment.format_cpu_list(cpus) if cpus else None,
            "cpuset": svc.get("cpuset"),
            "cpus_allowed": procstat.cpus_allowed_list(pids[name]),
        }
    return out


def run_arm(plan: ArmPlan, options: dict, progress: Callable[[str], None]) -> tuple[list[EngineDocument], dict]:
    """The pairs, on one private daemon and image (removed at the end, on error too). Returns the
    points' documents and the arm's record for the study's analysis document ({"unavailable": why}
    when it did not run or stopped; a stopped arm keeps the pairs it measured)."""
    record: dict = {
        "groups": plan.groups.record(),
        "stores": CONTAINER_STORES,
        "links": "none on either side",
        "trace_sample": 0.0,
        "unavailable": None,
    }
    reason = unavailable_reason(options)
    if reason:
        return [], record | {"unavailable": reason}
    docs: list[EngineDocument] = []
    engine: cluster.ClusterState | None = None
    try:
        progress("isolation: containers arm: starting a private Docker daemon and building the image")
        engine = up = cluster.engine_up(progress=lambda _t: None)
        i = 0
        for model in plan.models:
            for c in plan.counts:
                for side in ARM if i % 2 == 0 else ARM[::-1]:
                    progress(f"isolation: {side} {model} c={c}")
                    doc = (
                        _namespaces(plan, model, c) if side == "namespaces" else _containers(plan, model, c, up, record)
                    )
                    doc["isolation_point"] = {"layout": side, "model": model, "connections": c}
                    docs.append(EngineDocument(plan.study, agents_mod.ENGINE, doc, f"{side}/{model}/c{c}"))
                i += 1
    except (cluster.ClusterError, EngineError, OSError, ValueError, KeyError) as e:
        record["unavailable"] = f"stopped: {e}"
    finally:
        if engine is not None:
            cluster.remove(engine)
    return docs, record


# ---- analysis -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArmSide:
    p50_ns: float | None
    p99_ns: float | None
    samples: int
    requests_per_s: float
    cpu_per_request_ns: float | None
    cpu_unavailable: str | None  # why cpu_per_request_ns is None
    flags: tuple[str, ...]
    stores: str


@dataclass(frozen=True)
class ArmPair:
    model: str
    connections: int
    namespaces: ArmSide
    containers: ArmSide
    p50_ratio: float | None  # containers ÷ namespace hosts
    p99_ratio: float | None
    cpu_ratio: float | None
    unavailable: str | None  # why a ratio is None


@dataclass
class ArmComparison:
    unavailable: str | None  # the arm did not run, or stopped (then `pairs` holds what it measured)
    pairs: list[ArmPair] = field(default_factory=list)


def _side(load: dict, flags: list[str]) -> ArmSide:
    lat = measurement(load, agents_mod.TAG, "merged")
    window = load.get("window_cpu") or {"cpu_s": None, "unavailable": "no CPU reading was stored"}
    requests = load.get("front_requests")
    per_request, why = None, window.get("unavailable")
    if window.get("cpu_s") is not None:
        if requests:
            per_request = window["cpu_s"] * 1e9 / requests
        else:
            why = "the front wrote no document" if requests is None else "the front received no request"
    stores = load.get("stores") or {}
    return ArmSide(
        p50_ns=lat.p_ns("50") if lat else None,
        p99_ns=lat.p_ns("99") if lat else None,
        samples=lat.count if lat else 0,
        requests_per_s=float((load.get("load") or {}).get("achieved_per_s") or 0.0),
        cpu_per_request_ns=per_request,
        cpu_unavailable=why,
        flags=tuple(flags),
        stores=stores_text(str(stores.get("mode") or "unrecorded"), str(stores.get("reason") or "")),
    )


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def compare(record: dict | None, loads: dict[str, dict], flags: Callable[[dict], list[str]]) -> ArmComparison:
    """The arm's pairs from the stored point documents (`loads`: point -> document; `flags`: the
    study's point_flags). Pure: the unit tests build the documents."""
    if record is None:
        return ArmComparison("the run stored no containers arm (a run from before it)")
    out = ArmComparison(record.get("unavailable"))
    keys = sorted(
        {tuple(p.split("/")[1:]) for p in loads if p.split("/")[0] in ARM},
        key=lambda k: (k[0], int(k[1].removeprefix("c"))),
    )
    for model, c in keys:
        ns, ct = loads.get(f"namespaces/{model}/{c}"), loads.get(f"containers/{model}/{c}")
        if ns is None or ct is None:
            continue
        n, k = _side(ns, flags(ns)), _side(ct, flags(ct))
        p50, p99, cpu = (
            _ratio(k.p50_ns, n.p50_ns),
            _ratio(k.p99_ns, n.p99_ns),
            _ratio(k.cpu_per_request_ns, n.cpu_per_request_ns),
        )
        why = None
        if p50 is None or p99 is None:
            why = "a side recorded no latency"
        elif cpu is None:
            why = f"CPU per request: {k.cpu_unavailable or n.cpu_unavailable}"
        out.pairs.append(ArmPair(model, int(c.removeprefix("c")), n, k, p50, p99, cpu, why))
    return out


# ---- section --------------------------------------------------------------------------------------


def _cpu_cell(s: ArmSide) -> str:
    return fmt_ns(s.cpu_per_request_ns) if s.cpu_per_request_ns is not None else f"unavailable ({s.cpu_unavailable})"


def arm_table(cmp: ArmComparison) -> Table | None:
    if not cmp.pairs:
        return None
    rows = []
    for p in cmp.pairs:
        for label, s in (("namespace hosts", p.namespaces), ("containers", p.containers)):
            rows.append(
                [
                    cite(f"{p.model} {label}", list(s.flags)),
                    str(p.connections),
                    fmt_count(s.requests_per_s),
                    fmt_ns(s.p50_ns),
                    fmt_ns(s.p99_ns),
                    fmt_count(s.samples),
                    _cpu_cell(s),
                ]
            )
        rows.append(
            [
                f"{p.model} containers ÷ namespace hosts",
                str(p.connections),
                "",
                fmt_ratio(p.p50_ratio),
                fmt_ratio(p.p99_ratio),
                "",
                fmt_ratio(p.cpu_ratio) if p.cpu_ratio is not None else f"unavailable ({p.unavailable})",
            ]
        )
    return Table(
        "The split as container groups ÷ as namespace hosts",
        ["model / arm", "connections", "requests/s", "p50", "p99", "samples", "services' CPU per request"],
        rows,
        "Each pair in one run, one after the other (alternating which goes first), the same closed-loop load "
        "agents, the groups on the same CPUs (containers: cpuset; lab hosts: affinity), stores simulated, "
        "tracing off and no link delay on both. CPU per request: user+sys of every service process (containers: by host PID) "
        "over the load run (warm-up included), ÷ the requests the front received.",
        numeric_from=1,
    )


def arm_lines(cmp: ArmComparison, record: dict | None) -> list[str]:
    """What the section says about the arm: why it did not run, the groups' CPUs and what the
    containers really got, the stores of both sides."""
    if record is None or (cmp.unavailable and not cmp.pairs):
        why = cmp.unavailable or "not recorded"
        return [
            f"Containers arm: not run ({why}); containers ÷ namespace hosts p50, p99 and CPU per request: "
            f"unavailable ({why})."
        ]
    lines = []
    if cmp.unavailable:
        lines.append(f"Containers arm: {cmp.unavailable}; the pairs measured before it stopped are shown.")
    groups = record.get("groups") or {}
    cpus = groups.get("groups") or {}
    shared = groups.get("shared") or []
    lines.append(
        "Container groups (cpuset = the group's CPUs, the same CPUs as its lab host): "
        + ", ".join(f"{g} on CPU {deployment.format_cpu_list(c)}" for g, c in cpus.items())
        + f" ({len(groups.get('cores') or [])} core(s) here; "
        + (
            "; ".join(
                f"{s['groups'][0]} and {s['groups'][1]} share CPU {deployment.format_cpu_list(s['cpus'])}"
                for s in shared
            )
            + ": not isolated from each other"
            if shared
            else "no two groups share a CPU"
        )
        + "); load agents "
        + (f"on CPU {deployment.format_cpu_list(groups['load'])}" if groups.get("load") else "unpinned")
        + "."
    )
    applied = record.get("applied") or {}
    if applied:
        match = [s for s, a in applied.items() if a.get("cpus_allowed") == a.get("group_cpus")]
        lines.append(
            f"cpusets seen (/proc/PID/status of each container's engine): {len(match)} of {len(applied)} "
            "containers run on exactly their group's CPUs"
            + ("" if len(match) == len(applied) else f" (not: {', '.join(sorted(set(applied) - set(match)))})")
            + "."
        )
    for label, arm in (
        ("namespace hosts", [p.namespaces for p in cmp.pairs]),
        ("containers", [p.containers for p in cmp.pairs]),
    ):
        lines.append(f"stores ({label}): {', '.join(sorted({s.stores for s in arm})) or 'no pair measured'}.")
    return lines
