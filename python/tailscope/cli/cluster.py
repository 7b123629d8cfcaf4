"""`tailscope cluster up|run|down|k8s`: the graph in containers on this machine (docs/deploy.md).

`up` starts a private Docker daemon unless --docker-host names one, builds the image
(lab/cluster.py), writes the Compose file (lab/compose.py) and starts the graph;
`run` drives it with the load container and collects every result document; `down`
removes exactly what `up` made — the prefix it printed names all of it. `k8s` runs the
manifests `deploy k8s` wrote on such a daemon as a kubelet would (lab/k8s_docker.py),
from start to removal in one command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tailscope.cli.common import _fail, _results, console, deploy_model_option, number, whole

if TYPE_CHECKING:
    from tailscope.lab.cluster import ClusterState
    from tailscope.lab.k8s_docker import Manifests


@click.group()
def cluster() -> None:
    """The graph in containers: a private Docker daemon, an image built without a registry, Compose."""


def _state(prefix: str):
    from tailscope.lab import cluster as cl

    return cl.ClusterState.load(cl.default_root() / prefix)


@cluster.command("up")
@click.option("--topology", "topology_path", type=click.Path(path_type=Path), required=True, help="Topology YAML/JSON.")
@click.option(
    "--deployment",
    "deployment_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Run the graph as the file's host groups: every service in a group, each group's containers on the "
    "group's CPUs (cpuset; read from this machine where the file gives none), the load on the load group's.",
)
@deploy_model_option
@click.option(
    "--docker-host",
    default=None,
    help="Use this daemon (e.g. unix:///run/docker.sock) as it is; default: start a private one.",
)
@click.option("--subnet", default="198.19.128.0/24", show_default=True, help="The graph's network (lab range).")
@click.option("--rate", "rate_per_s", type=whole(1, 10_000_000), default=100, show_default=True)
@click.option("--duration-s", type=whole(1, 86400), default=10, show_default=True)
@click.option("--trace-sample", type=number(0.0, 1.0), default=0.01, show_default=True)
@click.option(
    "--jaeger/--no-jaeger",
    default=False,
    show_default=True,
    help="A Jaeger container on the graph's network (the bootstrap's Jaeger copied into the image), the "
    "services' OTLP endpoint by name; `run` fetches its traces into the results.",
)
def up(
    topology_path: Path,
    deployment_path: Path | None,
    model: str,
    docker_host: str | None,
    subnet: str,
    rate_per_s: int,
    duration_s: int,
    trace_sample: float,
    jaeger: bool,
) -> None:
    """Start TOPOLOGY in containers; prints the run's prefix (for `run` and `down`)."""
    from tailscope.lab import cluster as cl
    from tailscope.lab import compose, groups
    from tailscope.lab import deployment as dep_mod
    from tailscope.lab import topology as topo
    from tailscope.lab.engines import EngineError

    try:
        doc = topo.load(topology_path)
        # Every check of the groups (a service in none, an empty group, a CPU not here) before any daemon starts.
        services = topo.services(doc)
        placed = groups.plan_groups(dep_mod.load(deployment_path, services), services) if deployment_path else None
        compose.check_subnet(subnet)
    except (compose.DeployError, topo.TopologyError, ValueError, EngineError) as e:
        _fail(e)
    options = compose.ComposeOptions(
        model=model,
        subnet=subnet,
        trace_sample=trace_sample,
        load_rate_per_s=rate_per_s,
        load_duration_s=duration_s,
        load_cpuset=dep_mod.format_cpu_list(placed.load_cpus) if placed and placed.load_cpus else None,
        jaeger=jaeger,
    )
    if placed:
        console.print(placed.text())
    try:
        state = cl.up(
            doc, placed.deployment if placed else None, options, docker_host=docker_host, progress=console.print
        )
    except cl.ClusterError as e:
        _fail(e)
    console.print(f"up: {state.prefix} (tailscope cluster run {state.prefix}; tailscope cluster down {state.prefix})")


@cluster.command("run")
@click.argument("prefix")
@click.option("--results-dir", type=click.Path(path_type=Path), default=None)
def run(prefix: str, results_dir: Path | None) -> None:
    """Drive the graph with the load container, stop it, collect every result document."""
    from tailscope.lab import cluster as cl
    from tailscope.traces import jaeger as jq

    try:
        state = _state(prefix)
        out = cl.drive(state, _results(results_dir), traces=jq.fetch_into)
    except (cl.ClusterError, jq.JaegerQueryError) as e:
        _fail(f"{e} (tailscope cluster down {prefix} removes what the run made)")
    if (out / "traces.summary.json").exists():
        t = json.loads((out / "traces.summary.json").read_text())
        console.print(f"traces: {t['traces']} traces, {t['spans']} spans from Jaeger at {t['jaeger']}")
    load = json.loads((out / "load.json").read_text())
    pct = next(m for m in load["measurements"] if m.get("hlog_tag") == "latency_intended")["latency"]["percentiles"]
    console.print(
        f"{prefix}: {load['load']['achieved_per_s']} req/s, {load['load']['errors_total']} errors, "
        f"p50 {pct['50'] / 1e3:.0f} µs, p99 {pct['99'] / 1e3:.0f} µs; documents in {out}"
    )


@cluster.command("down")
@click.argument("prefix")
def down(prefix: str) -> None:
    """Remove the containers, network and image PREFIX made, and its daemon if it started one."""
    from tailscope.lab import cluster as cl

    try:
        state = _state(prefix)
        left = cl.remove(state)
    except cl.ClusterError as e:
        _fail(e)
    if left:
        _fail(f"{prefix}: could not remove {', '.join(left)}")
    console.print(f"down: {prefix}: removed")


@cluster.command("k8s")
@click.argument("manifests", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option(
    "--docker-host",
    default=None,
    help="Use this daemon (e.g. unix:///run/docker.sock) as it is; default: start a private one.",
)
@click.option("--results-dir", type=click.Path(path_type=Path), default=None)
def k8s(manifests: Path, docker_host: str | None, results_dir: Path | None) -> None:
    """Run the manifests `tailscope deploy k8s` wrote on Docker, as a kubelet would: every Deployment's
    pod with the same image, command line and Service DNS names, then the load Job; collect the
    documents (and Jaeger's traces when the manifests have Jaeger), then remove everything."""
    from tailscope.lab import cluster as cl
    from tailscope.lab import k8s as k8s_mod
    from tailscope.lab import k8s_docker

    try:
        ms = k8s_docker.read(manifests)
    except cl.ClusterError as e:
        _fail(e)
    with_jaeger = any(p.name == k8s_mod.JAEGER for p in ms.pods)
    try:
        state = cl.engine_up(docker_host, progress=console.print, jaeger=with_jaeger)
    except cl.ClusterError as e:
        _fail(e)
    console.print(f"run: {state.prefix} (everything it makes carries the prefix)")
    try:
        out = _run_pods(state, ms, _results(results_dir), with_jaeger)
    except BaseException as e:  # an interrupt too: nothing is left behind
        left = cl.remove(state)
        if not isinstance(e, (cl.ClusterError, OSError, ValueError, subprocess.TimeoutExpired)):
            raise
        _fail(f"{e} ({'could not remove: ' + ', '.join(left) if left else 'everything it made was removed'})")
    left = cl.remove(state)
    load = json.loads((out / "load.json").read_text())
    pct = next(m for m in load["measurements"] if m.get("hlog_tag") == "latency_intended")["latency"]["percentiles"]
    console.print(
        f"{state.prefix}: {load['load']['achieved_per_s']} req/s, {load['load']['errors_total']} errors, "
        f"p50 {pct['50'] / 1e3:.0f} µs, p99 {pct['99'] / 1e3:.0f} µs; documents in {out}"
    )
    if left:
        _fail(f"{state.prefix}: could not remove {', '.join(left)}")


def _run_pods(state: ClusterState, ms: Manifests, results: Path, with_jaeger: bool) -> Path:
    """The pods, the Job, Jaeger's traces while Jaeger still runs, then every document."""
    from tailscope.lab import k8s as k8s_mod
    from tailscope.lab import k8s_docker

    k8s_docker.up(state, ms, progress=console.print)
    stdout, stderr, code = k8s_docker.run_job(state, ms)
    out = results / f"k8s-{state.prefix}"
    out.mkdir(parents=True, exist_ok=True)
    try:
        json.loads(stdout)
    except ValueError as e:
        raise ValueError(f"the load Job (exit {code}) printed no result document: {stderr.strip()[-300:]}") from e
    (out / "load.json").write_text(stdout)
    if with_jaeger:
        k8s_docker.stop(state, ms, keep=(k8s_mod.JAEGER,))  # the services flush their last spans at stop
        _fetch_traces(ms, out)
    k8s_docker.collect(state, ms, results)
    return out


def _fetch_traces(ms: Manifests, out: Path) -> None:
    """Every trace of the front service from the Jaeger pod's query API (its address is in the lab
    range, inside the allow-list), into OUT/traces.jaeger.json and OUT/traces.summary.json."""
    from tailscope.lab import jaeger as jaeger_mod
    from tailscope.lab import k8s as k8s_mod
    from tailscope.lab import k8s_docker
    from tailscope.traces import jaeger as jq

    topology = next(json.loads(d["topology.json"]) for d in ms.config_maps.values() if "topology.json" in d)
    front = str((topology.get("front") or {}).get("service") or "")
    url = f"http://{k8s_docker.pod_address(ms, k8s_mod.JAEGER)}:{jaeger_mod.CONTAINER_PORTS['query']}"
    try:
        summary = jq.fetch_into(url, front, out)
    except jq.JaegerQueryError as e:
        raise ValueError(f"traces from the Jaeger pod: {e}") from e
    (out / "traces.summary.json").write_text(json.dumps(summary, indent=1))
    console.print(f"traces: {summary['traces']} traces, {summary['spans']} spans of {front} from Jaeger at {url}")
