"""`tailscope cluster up|run|down`: the graph in containers on this machine (docs/deploy.md).

`up` starts a private Docker daemon unless --docker-host names one, builds the image
(lab/cluster.py), writes the Compose file (lab/compose.py) and starts the graph;
`run` drives it with the load container and collects every result document; `down`
removes exactly what `up` made — the prefix it printed names all of it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tailscope.cli.common import _fail, _results, console, deploy_model_option, number, whole


@click.group()
def cluster() -> None:
    """The graph in containers: a private Docker daemon, an image built without a registry, Compose."""


def _state(prefix: str):
    from tailscope.lab import cluster as cl

    return cl.ClusterState.load(cl.default_root() / prefix)


@cluster.command("up")
@click.option("--topology", "topology_path", type=click.Path(path_type=Path), required=True, help="Topology YAML/JSON.")
@click.option("--deployment", "deployment_path", type=click.Path(path_type=Path), default=None, help="CPU pinning.")
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
def up(
    topology_path: Path,
    deployment_path: Path | None,
    model: str,
    docker_host: str | None,
    subnet: str,
    rate_per_s: int,
    duration_s: int,
    trace_sample: float,
) -> None:
    """Start TOPOLOGY in containers; prints the run's prefix (for `run` and `down`)."""
    from tailscope.lab import cluster as cl
    from tailscope.lab import compose
    from tailscope.lab import deployment as dep_mod
    from tailscope.lab import topology as topo
    from tailscope.lab.engines import EngineError

    try:
        doc = topo.load(topology_path)
        plan = dep_mod.load(deployment_path, topo.services(doc)) if deployment_path else None
        compose.check_subnet(subnet)
    except (compose.DeployError, topo.TopologyError, ValueError, EngineError) as e:
        _fail(e)
    options = compose.ComposeOptions(
        model=model, subnet=subnet, trace_sample=trace_sample, load_rate_per_s=rate_per_s, load_duration_s=duration_s
    )
    try:
        state = cl.up(doc, plan, options, docker_host=docker_host, progress=console.print)
    except cl.ClusterError as e:
        _fail(e)
    console.print(f"up: {state.prefix} (tailscope cluster run {state.prefix}; tailscope cluster down {state.prefix})")


@cluster.command("run")
@click.argument("prefix")
@click.option("--results-dir", type=click.Path(path_type=Path), default=None)
def run(prefix: str, results_dir: Path | None) -> None:
    """Drive the graph with the load container, stop it, collect every result document."""
    from tailscope.lab import cluster as cl

    try:
        state = _state(prefix)
        out = cl.drive(state, _results(results_dir))
    except cl.ClusterError as e:
        _fail(f"{e} (tailscope cluster down {prefix} removes what the run made)")
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
