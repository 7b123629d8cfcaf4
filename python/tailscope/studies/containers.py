"""Study `containers`: the socialnet graph in containers on a real engine beside the same graph run
natively, in one run (issue 31): containers ÷ native p50 and p99 from the intended send time, CPU per
request of the services, and what the container network adds to one call (the engine's own ping).

Per model (quick: std-async and coroutine; full: every model):

* native — `tailscope-svc --all` on this machine's loopback, stores simulated (the image runs no
  store server, so both sides wait the same simulated latencies), the graph pinned to the server CPU
  and tailscope-load to the client CPU (lab/cpus.cpu_split);
* containers — the same topology, model, rate, duration, warm-up and connections through
  `lab/cluster.up` (a private Docker daemon, the registry-free image, one Compose project whose
  services reach each other by DNS name on a lab-range bridge), services' cpuset the graph's CPUs,
  the load container's the client CPU; then `lab/cluster.drive` stops the services so each writes
  its document, and `down` removes all of it.

Once per run, the ping: 1 call in flight from a container on the graph's network to one service
(the container network and bridge), beside the same ping natively on loopback. And, where the
bootstrap built Jaeger, one traced run of the first model in containers whose services export to a
Jaeger container by name: its traces are fetched into the artifacts (not a measurement).

Runs where the container path is installed (`scripts/bootstrap --docker`) and a private daemon can
start; anywhere else the section says why it did not run. docs/deploy.md ("containers ÷ native").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tailscope.lab import cluster, compose, procstat, tools, topology
from tailscope.lab.cpus import cpu_split
from tailscope.lab.engines import EngineError, run_engine
from tailscope.lab.graph import LOAD, SVC, graph, run_front_load
from tailscope.measure.intervals import QuantileInterval, from_latency
from tailscope.measure.measurement import measurement
from tailscope.report.blocks import Section, Table
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.common import StepProgress, front_requests, interval_cell, run_scale, study_section
from tailscope.traces import jaeger as jq
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

NAME = "containers"
MODELS_QUICK = ("std-async", "coroutine")
# 200/s for 6 s: 1200 samples, above the 1000 whose p99 has 10 beyond it (an interval;
# docs/measurement.md) — at 5 s the window's edges left 998.
RATE_PER_S = 200
CONNECTIONS = 16
DURATION_S = {"quick": 6, "full": 30}
WARMUP_S = 1
PING_CALLS = {"quick": 2000, "full": 20000}
PING_WARMUP = 200
# The traced run (after the measured ones, which trace nothing): the first model in containers with a
# Jaeger container as the services' OTLP endpoint, its traces fetched into the artifacts.
TRACE_SAMPLE = 0.1
TRACE_DURATION_S = 2
TRACES_POINT = "traces/containers"
STORES = "simulated"  # the image has no store server: both sides run the simulated waits
# Fewer samples beyond a percentile than this: its interval is not shown (docs/measurement.md).
MIN_BEYOND = 10


# ---- run --------------------------------------------------------------------------------------


def _marker(reason: str) -> EngineDocument:
    return EngineDocument(NAME, "tailscope", {"containers_unavailable": reason}, "unavailable")


def _remove(state: cluster.ClusterState) -> None:
    left = cluster.remove(state)
    if left:
        raise EngineError(f"containers: {state.prefix}: could not remove {', '.join(left)}")


def _front(doc: dict) -> str:
    return str((doc.get("front") or {}).get("service") or "")


@dataclass
class Plan:
    """What one form's run needs, beside the model."""

    doc: dict
    topo_json: Path
    work: Path
    duration_s: int
    ping_calls: int | None  # ping one service before the load (the first model's forms only)
    client: list[int]
    server: list[int]
    engine: cluster.ClusterState | None = None  # the study's daemon and image (containers)

    def meta(self, model: str, form: str) -> dict:
        return {
            "model": model,
            "form": form,
            "client_cpus": self.client,
            "server_cpus": self.server,
            "front": _front(self.doc),
        }

    def ping_target(self) -> str:
        front = _front(self.doc)
        return next(s for s in topology.services(self.doc) if s != front)


def _native(model: str, plan: Plan) -> list[EngineDocument]:
    out = plan.work / f"native-{model}.json"
    docs: list[EngineDocument] = []
    with graph(plan.topo_json, model, out, stores=STORES, cpu=plan.server or None) as (port, ready):
        pids = {str(k): int(v) for k, v in (ready.get("pids") or {}).items()}
        if plan.ping_calls:
            target = plan.ping_target()
            args = ["--ping", str(ready["ports"][target]), "--ping-pid", str(pids[target])]
            args += ["--ping-calls", str(plan.ping_calls), "--ping-warmup", str(PING_WARMUP)]
            pin = ["taskset", "-c", ",".join(map(str, plan.client))] if plan.client else None
            ping = run_engine(SVC, args, timeout_s=120, wrapper=pin).document
            meta = plan.meta(model, "native") | {"ping": target}
            docs.append(EngineDocument(NAME, SVC, ping | {"containers_point": meta}, "ping/native"))
        load, window = procstat.window_cpu(
            pids,
            lambda: run_front_load(
                port,
                RATE_PER_S,
                CONNECTIONS,
                plan.duration_s,
                WARMUP_S,
                plan.duration_s + WARMUP_S + 60,
                client_cpu=plan.client[0] if plan.client else None,
            ),
        )
    graph_doc = json.loads(out.read_text()) | {"window_cpu": window}
    meta = plan.meta(model, "native")
    return [
        *docs,
        EngineDocument(NAME, LOAD, load | {"containers_point": meta}, f"{model}/native"),
        EngineDocument(NAME, SVC, graph_doc | {"containers_point": meta}, f"{model}/native-graph"),
    ]


def _in_containers(model: str, plan: Plan) -> list[EngineDocument]:
    options = compose.ComposeOptions(
        model=model,
        trace_sample=0.0,
        load_rate_per_s=RATE_PER_S,
        load_duration_s=plan.duration_s,
        load_connections=CONNECTIONS,
        load_warmup_s=WARMUP_S,
        load_cpuset=",".join(map(str, plan.client)) or None,
    )
    docs: list[EngineDocument] = []
    state = cluster.up(plan.doc, None, options, cpus=plan.server or None, progress=lambda _t: None, engine=plan.engine)
    try:
        if plan.ping_calls:
            target = plan.ping_target()
            spec = compose.compose(plan.doc, None, options, cpus=plan.server or None)
            address = spec["services"][target]["networks"][compose.NETWORK]["ipv4_address"]
            port = compose.FRONT_PORT if target == _front(plan.doc) else compose.SERVICE_PORT
            ping = cluster.ping(state, address, port, plan.ping_calls, PING_WARMUP)
            meta = plan.meta(model, "containers") | {"ping": target, "address": address}
            docs.append(EngineDocument(NAME, SVC, ping | {"containers_point": meta}, "ping/containers"))
        _, window = procstat.window_cpu(cluster.service_pids(state), lambda: cluster.run_load(state))
        results = cluster.collect(state, plan.work)
    finally:
        _remove(state)
    load = json.loads((results / "load.json").read_text())
    parts = [json.loads(p.read_text()) for p in sorted(results.glob("*.json")) if p.name != "load.json"]
    meta = plan.meta(model, "containers")
    merged = {"services": {k: v for d in parts for k, v in (d.get("services") or {}).items()}, "window_cpu": window}
    return [
        *docs,
        EngineDocument(NAME, LOAD, load | {"containers_point": meta}, f"{model}/containers"),
        EngineDocument(NAME, SVC, merged | {"containers_point": meta}, f"{model}/containers-graph"),
    ]


def _traced(model: str, plan: Plan) -> EngineDocument:
    """The graph in containers once more, tracing (TRACE_SAMPLE) to a Jaeger container by name; the
    traces fetched from it after the services stopped into the artifacts (containers/traces/): their
    summary is the point's document. Not a measurement — the measured forms trace nothing."""
    options = compose.ComposeOptions(
        model=model,
        trace_sample=TRACE_SAMPLE,
        load_rate_per_s=RATE_PER_S,
        load_duration_s=TRACE_DURATION_S,
        load_connections=CONNECTIONS,
        jaeger=True,
    )
    state = cluster.up(plan.doc, None, options, cpus=plan.server or None, progress=lambda _t: None, engine=plan.engine)
    try:
        cluster.run_load(state)
        out = cluster.collect(state, plan.work / "traces", traces=jq.fetch_into)
    finally:
        _remove(state)
    summary = json.loads((out / "traces.summary.json").read_text())
    # Inside the run's folder (artifacts/…): the staging folder it was written in is renamed at the end.
    summary["file"] = str(Path("artifacts") / Path(summary["file"]).relative_to(plan.work.parent))
    return EngineDocument(
        NAME, "jaeger", summary | {"containers_point": {"model": model, "form": "traced"}}, TRACES_POINT
    )


@dataclass
class ContainersStudy:
    name: str = NAME
    title: str = "The graph in containers: containers ÷ native"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        reason = cluster.unavailable_reason()
        if reason:
            return [_marker(reason)]
        models = list(ctx.options.get("containers_models") or MODELS_QUICK)
        scale = run_scale(ctx.options)
        work = ctx.artifacts_dir / NAME
        work.mkdir(parents=True, exist_ok=True)
        client, server = cpu_split(ctx.options)
        plan = Plan(
            doc=topology.load(topology.SOCIALNET),
            topo_json=topology.to_engine_json(topology.SOCIALNET, work / "socialnet.json"),
            work=work,
            duration_s=max(1, round(DURATION_S[ctx.form] * scale)),
            ping_calls=max(200, round(PING_CALLS[ctx.form] * scale)),
            client=client,
            server=server,
        )
        try:
            tools.tool_path("jaeger")
            no_jaeger = None
        except tools.ToolUnavailable as e:
            no_jaeger = str(e)
        step = StepProgress(ctx, NAME, 2 * len(models) + 1 + (no_jaeger is None))
        docs: list[EngineDocument] = []
        try:
            step("starting a private Docker daemon and building the image")
            plan.engine = cluster.engine_up(progress=lambda _t: None, jaeger=no_jaeger is None)
            # Alternating order (native first, then containers first, …): a machine that gets busier or
            # quieter during the study then biases the two forms alike instead of one of them.
            for i, model in enumerate(models):
                forms = [("natively", _native), ("in containers", _in_containers)]
                for label, form in forms if i % 2 == 0 else forms[::-1]:
                    step(f"{model} {label}")
                    docs += form(model, plan)
                plan.ping_calls = None  # the pings ran with the first model's graphs
            if no_jaeger is None:
                step(f"{models[0]} in containers, traced to a Jaeger container")
                docs.append(_traced(models[0], plan))
            else:
                docs.append(EngineDocument(NAME, "jaeger", {"unavailable": no_jaeger}, TRACES_POINT))
        except (cluster.ClusterError, EngineError, OSError, ValueError, jq.JaegerQueryError) as e:
            return [*docs, _marker(f"stopped: {e}")]
        finally:
            if plan.engine is not None:
                cluster.remove(plan.engine)
        return docs

    def section(self, store: Store, run_id: str) -> Section:
        return section(self, store, run_id)


STUDY = ContainersStudy()


# ---- analysis ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    requests: int
    p50_ns: float | None
    p99_ns: float | None
    p50: QuantileInterval | None
    p99: QuantileInterval | None
    errors: int
    cpu_per_request_ns: float | None
    cpu_unavailable: str | None


@dataclass(frozen=True)
class ModelComparison:
    model: str
    native: Side
    containers: Side
    p50_ratio: float | None
    p99_ratio: float | None
    # The ratio's bounds from the two sides' 95 % intervals' far corners (only where both have ≥ 10
    # samples beyond their p99, the rule every interval cell follows) (conservative: each side at
    # 95 % rather than √95 %, the corners rather than the product's own interval); None without both.
    p99_ratio_bounds: tuple[float, float] | None
    cpu_ratio: float | None


@dataclass(frozen=True)
class PingComparison:
    native_rtt_p50_ns: float | None
    containers_rtt_p50_ns: float | None
    added_p50_ns: float | None  # containers − native: what the bridge and the veth pair add per call
    unavailable: str | None


@dataclass
class ContainersAnalysis:
    unavailable: str | None
    models: list[ModelComparison] = field(default_factory=list)
    ping: PingComparison | None = None


def _side(load: dict | None, graph_doc: dict | None) -> Side | None:
    if load is None:
        return None
    m = measurement(load, "latency_intended")
    lat = next((x.get("latency") for x in load.get("measurements", []) if x.get("name") == "latency_intended"), None)
    p50 = from_latency(lat, "50") if lat else None
    p99 = from_latency(lat, "99") if lat else None
    front = str((load.get("containers_point") or {}).get("front") or "")
    window = (graph_doc or {}).get("window_cpu") or {"cpu_s": None, "unavailable": "no CPU reading was stored"}
    requests = front_requests((graph_doc or {}).get("services") or {}, front)
    per_request, why = None, window.get("unavailable")
    if window.get("cpu_s") is not None:
        if requests:
            per_request = window["cpu_s"] * 1e9 / requests
        else:
            why = f"the front {front} wrote no document" if requests is None else "the front received no request"
    return Side(
        requests=int(load.get("load", {}).get("requests_completed") or 0),
        p50_ns=m.p_ns("50") if m else None,
        p99_ns=m.p_ns("99") if m else None,
        p50=p50,
        p99=p99,
        errors=int(load.get("load", {}).get("errors_total") or 0),
        cpu_per_request_ns=per_request,
        cpu_unavailable=why,
    )


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def analyze(docs: dict[str, dict]) -> ContainersAnalysis:
    """Documents by point → the comparison. Pure: the unit tests build the documents."""
    if "unavailable" in docs and not any(p.endswith("/native") and not p.startswith("ping/") for p in docs):
        return ContainersAnalysis(str(docs["unavailable"].get("containers_unavailable")))
    out = ContainersAnalysis(str(docs["unavailable"].get("containers_unavailable")) if "unavailable" in docs else None)
    models = sorted({p.split("/")[0] for p in docs if p.endswith("/native") and not p.startswith("ping/")})
    for model in models:
        n = _side(docs.get(f"{model}/native"), docs.get(f"{model}/native-graph"))
        c = _side(docs.get(f"{model}/containers"), docs.get(f"{model}/containers-graph"))
        if n is None or c is None:
            continue
        bounds = None
        nlo, nhi = (n.p99.lo_ns, n.p99.hi_ns) if n.p99 else (None, None)
        clo, chi = (c.p99.lo_ns, c.p99.hi_ns) if c.p99 else (None, None)
        if nlo and nhi and clo is not None and chi is not None and not (_few_beyond(n.p99) or _few_beyond(c.p99)):
            bounds = (clo / nhi, chi / nlo)
        out.models.append(
            ModelComparison(
                model,
                n,
                c,
                _ratio(c.p50_ns, n.p50_ns),
                _ratio(c.p99_ns, n.p99_ns),
                bounds,
                _ratio(c.cpu_per_request_ns, n.cpu_per_request_ns),
            )
        )
    native_ping, inside_ping = docs.get("ping/native"), docs.get("ping/containers")
    if native_ping and inside_ping:
        a = (((native_ping.get("ping") or {}).get("rtt") or {}).get("percentiles") or {}).get("50")
        b = (((inside_ping.get("ping") or {}).get("rtt") or {}).get("percentiles") or {}).get("50")
        if a is not None and b is not None:
            out.ping = PingComparison(a, b, b - a, None)
        else:
            out.ping = PingComparison(a, b, None, "a ping document records no round-trip p50")
    else:
        out.ping = PingComparison(None, None, None, "the pings did not run (the study stopped before them)")
    return out


# ---- section ----------------------------------------------------------------------------------


def _few_beyond(i: QuantileInterval | None) -> bool:
    return i is None or i.samples_beyond < MIN_BEYOND


def section(study: ContainersStudy, store: Store, run_id: str) -> Section:
    sec = study_section(
        study,
        store,
        run_id,
        graphs=False,
        intro="The socialnet compose-post graph in containers on a private Docker daemon (services reached by "
        "DNS name on a lab-range bridge) beside the same graph natively, per model, at the same open-loop rate "
        f"({RATE_PER_S}/s, {CONNECTIONS} connections, {WARMUP_S} s warm-up excluded), stores simulated on both "
        "sides: containers ÷ native at p50 and p99 from the intended send time, and the services' CPU per request.",
    )
    docs = {d.point: d.document for d in store.documents(run_id, NAME)}
    a = analyze(docs)
    if a.unavailable and not a.models:
        sec.notes.append(f"not run here: {a.unavailable}")
        return sec
    if a.unavailable:
        sec.notes.append(a.unavailable)
    rows = []
    for m in a.models:
        for label, s in (("native", m.native), ("containers", m.containers)):
            rows.append(
                [
                    m.model,
                    label,
                    fmt_count(s.requests),
                    f"{fmt_ns(s.p50_ns)} {interval_cell(s.p50, _few_beyond(s.p50))}",
                    f"{fmt_ns(s.p99_ns)} {interval_cell(s.p99, _few_beyond(s.p99))}",
                    fmt_count(s.errors),
                    fmt_ns(s.cpu_per_request_ns) if s.cpu_per_request_ns else f"unavailable ({s.cpu_unavailable})",
                ]
            )
        bounds = f" [{m.p99_ratio_bounds[0]:.2f}–{m.p99_ratio_bounds[1]:.2f}]" if m.p99_ratio_bounds else ""
        rows.append(
            [
                m.model,
                "containers ÷ native",
                "",
                fmt_ratio(m.p50_ratio),
                fmt_ratio(m.p99_ratio) + bounds,
                "",
                fmt_ratio(m.cpu_ratio),
            ]
        )
    sec.blocks.append(
        Table(
            "Containers ÷ native, per model",
            [
                "model",
                "form",
                "requests",
                "p50 [95 % interval]",
                "p99 [95 % interval]",
                "errors",
                "services' CPU per request",
            ],
            rows,
            "Both forms in one run, one after the other (alternating which goes first, model by model); the graph pinned to the server CPU(s) and the load "
            "generator to the client CPU in both (containers: cpuset). CPU per request: user+sys of every "
            "service process (containers: by host PID) from just before to just after the load run, ÷ the "
            "requests the front received (warm-up included on both sides; start-up and shut-down excluded). "
            "The p99 ratio's bounds are the far corners of the two sides' 95 % intervals.",
            numeric_from=2,
        )
    )
    traced = docs.get(TRACES_POINT)
    if traced is not None:
        if traced.get("unavailable"):
            sec.notes.append(f"traces from a Jaeger container: unavailable ({traced['unavailable']})")
        else:
            sec.notes.append(
                f"traces (a separate {TRACE_DURATION_S} s run of {(traced.get('containers_point') or {}).get('model')}, "
                f"{TRACE_SAMPLE:g} of requests traced, the services exporting to a Jaeger container by name): "
                f"{fmt_count(traced.get('traces') or 0)} traces, {fmt_count(traced.get('spans') or 0)} spans of "
                f"{len(traced.get('services') or [])} services fetched from it, in the run's artifacts "
                f"({traced.get('file')})"
            )
    p = a.ping
    if p is not None:
        if p.unavailable:
            sec.notes.append(f"container network ping: unavailable ({p.unavailable})")
        else:
            added = p.added_p50_ns or 0.0
            what = f"adds {fmt_ns(added)}" if added >= 0 else f"was {fmt_ns(-added)} faster"
            sec.notes.append(
                f"one call, one in flight (tailscope-svc --ping, pinned like the graph): "
                f"{fmt_ns(p.native_rtt_p50_ns)} round-trip p50 on loopback, {fmt_ns(p.containers_rtt_p50_ns)} from a "
                f"container across the bridge: the container network {what} per call at p50"
            )
    return sec
