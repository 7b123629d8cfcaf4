"""Lab hosts (`tailscope hosts`) and deployments (`tailscope deploy`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click
from rich.table import Table as RichTable

from tailscope.cli.common import (
    _fail,
    console,
    deploy_model_option,
    err_console,
    number,
    whole,
)
from tailscope.lab.allow_list import check_base_url


@click.group()
def hosts() -> None:
    """Lab hosts: network namespaces on one bridge, addresses from 198.18.0.0/15 (docs/lab-hosts.md)."""


def _lab_failure(e: Exception) -> NoReturn:
    _fail(e, getattr(e, "exit_code", 1))


lab_prefix_option = click.option(
    "--prefix", default="ts", show_default=True, help="Name prefix of every lab object (PREFIX-hN, PREFIX-br0)."
)


@hosts.command("up")
@click.option("--hosts", "count", type=whole(1, 64), default=2, show_default=True, help="Number of lab hosts, 1 … 64.")
@click.option("--subnet", default="198.18.0.0/24", show_default=True, help="Addresses, inside 198.18.0.0/15.")
@lab_prefix_option
def hosts_up(count: int, subnet: str, prefix: str) -> None:
    """Create the lab hosts (idempotent: the same lab twice is a no-op)."""
    from tailscope.lab import labhosts

    try:
        config = labhosts.validate(count, subnet, prefix)
        lab = labhosts.up(config, log=lambda m: console.print(m))
    except labhosts.LabError as e:
        _lab_failure(e)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted: what `hosts up` had made was removed[/]")
        sys.exit(130)
    console.print(f"lab {prefix}: {len(lab.hosts)} hosts on {subnet}, bridge {prefix}-br0")


@hosts.command("down")
@click.option("--stop", "stop_processes", is_flag=True, help="Terminate processes still running inside lab hosts.")
@lab_prefix_option
def hosts_down(stop_processes: bool, prefix: str) -> None:
    """Remove every lab object of PREFIX (and nothing else); refuses while processes run inside unless --stop."""
    from tailscope.lab import labhosts

    try:
        labhosts.validate(1, labhosts.DEFAULT_SUBNET, prefix)
        removed = labhosts.down(prefix, stop_processes=stop_processes, log=lambda m: console.print(m))
    except labhosts.LabError as e:
        _lab_failure(e)
    console.print(f"lab {prefix}: removed {len(removed)} objects" if removed else f"lab {prefix}: nothing to remove")


@hosts.command("list")
@lab_prefix_option
def hosts_list(prefix: str) -> None:
    """Show the lab hosts as the kernel holds them: addresses and processes inside."""
    from tailscope.lab import labhosts

    try:
        labhosts.validate(1, labhosts.DEFAULT_SUBNET, prefix)
        lab = labhosts.state(prefix)
    except labhosts.LabError as e:
        _lab_failure(e)
    shape = f"{lab.config.hosts} hosts on {lab.config.subnet}" if lab.config else "no state file"
    console.print(f"lab {prefix}: {lab.status} ({shape})")
    if not lab.hosts:
        return
    t = RichTable()
    for col in ("host", "address", "link", "processes"):
        t.add_column(col)
    for h in lab.hosts:
        t.add_row(h.name, h.address or "none", h.veth, ", ".join(map(str, h.pids)) or "none")
    console.print(t)


@click.group()
def deploy() -> None:
    """Hand a topology to a real cluster (docs/deploy.md)."""


@deploy.command("k8s")
@click.option("--topology", "topology_path", type=click.Path(path_type=Path), required=True, help="Topology YAML/JSON.")
@click.option(
    "--deployment",
    "deployment_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Host groups, CPUs and memory per service (docs/lab-hosts.md).",
)
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True, help="New folder for the manifests.")
@click.option("--namespace", default="tailscope", show_default=True)
@click.option(
    "--image", default="tailscope:dev", show_default=True, help="Image built from the repository's Dockerfile."
)
@deploy_model_option
@click.option(
    "--pod-cidr",
    required=True,
    help="The cluster's pod range (e.g. 100.64.0.0/16): every container's --allow-cidr, so pods reach pods. "
    "IPv4, /8 … /24, private (RFC 1918), shared (100.64.0.0/10) or the lab range.",
)
@click.option(
    "--service-cidr",
    required=True,
    help="The cluster's service range (e.g. 100.96.0.0/12): every container's --allow-cidr, so Service names "
    "are accepted. IPv4, /12 … /28, not overlapping --pod-cidr.",
)
@click.option(
    "--otlp-endpoint",
    default=None,
    help="Where services send spans: http://ADDR:PORT (loopback or lab range) or a Service, "
    "http://NAME.NAMESPACE.svc.cluster.local:PORT. Default: the manifests' Jaeger with --jaeger, "
    "else http://127.0.0.1:4318 (a collector agent in the pod's network namespace).",
)
@click.option(
    "--jaeger/--no-jaeger",
    default=False,
    show_default=True,
    help="Add Jaeger (in-memory) as a Deployment and a Service `jaeger`, the services' OTLP endpoint; "
    "the image must hold /usr/local/bin/jaeger.",
)
@click.option("--trace-sample", type=number(0.0, 1.0), default=0.01, show_default=True)
@click.option(
    "--rate",
    "rate_per_s",
    type=whole(1, 10_000_000),
    default=100,
    show_default=True,
    help="The load Job's request rate per second.",
)
@click.option(
    "--duration-s",
    type=whole(1, 86400),
    default=60,
    show_default=True,
    help="The load Job's measured duration.",
)
def deploy_k8s(
    topology_path: Path,
    deployment_path: Path | None,
    out_dir: Path,
    namespace: str,
    image: str,
    model: str,
    pod_cidr: str,
    service_cidr: str,
    otlp_endpoint: str | None,
    jaeger: bool,
    trace_sample: float,
    rate_per_s: int,
    duration_s: int,
) -> None:
    """Write Kubernetes manifests for TOPOLOGY: Namespace, ConfigMap, Deployment + Service per service, a load Job."""
    from tailscope.lab import k8s
    from tailscope.lab import topology as topo
    from tailscope.lab.engines import EngineError

    try:
        k8s.check_cidrs(pod_cidr, service_cidr)  # before the topology is read: bad input first, cheaply
        doc = topo.load(topology_path)
        plan = k8s.load_deployment(deployment_path, topo.services(doc)) if deployment_path else None
        objs = k8s.manifests(
            doc,
            plan,
            namespace=namespace,
            image=image,
            model=model,
            pod_cidr=pod_cidr,
            service_cidr=service_cidr,
            otlp_endpoint=otlp_endpoint,
            jaeger=jaeger,
            trace_sample=trace_sample,
            load_rate_per_s=rate_per_s,
            load_duration_s=duration_s,
        )
        paths = k8s.write(objs, out_dir)
    except (k8s.DeployError, topo.TopologyError, ValueError, EngineError) as e:
        _fail(e)
    for p in paths:
        console.print(str(p))


@deploy.command("compose")
@click.option("--topology", "topology_path", type=click.Path(path_type=Path), required=True, help="Topology YAML/JSON.")
@click.option(
    "--deployment",
    "deployment_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Host groups and CPUs (docs/lab-hosts.md): each container's cpuset is its group's CPUs (read from this "
    "machine where the file gives none); with groups, a Swarm stack file too (docker-stack.yml: placement by "
    "node label tailscope.group, endpoint_mode dnsrr).",
)
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True, help="New folder for the files.")
@click.option("--image", default="tailscope-lab:dev", show_default=True, help="An image with the engines.")
@deploy_model_option
@click.option(
    "--subnet",
    default="198.19.128.0/24",
    show_default=True,
    help="The Compose network's subnet: inside the lab range 198.18.0.0/15.",
)
@click.option(
    "--otlp-endpoint",
    default=None,
    help="Where services send spans: http://ADDR:PORT, ADDR in the lab range (default: no export).",
)
@click.option("--trace-sample", type=number(0.0, 1.0), default=0.01, show_default=True)
@click.option("--rate", "rate_per_s", type=whole(1, 10_000_000), default=100, show_default=True)
@click.option("--duration-s", type=whole(1, 86400), default=10, show_default=True)
def deploy_compose(
    topology_path: Path,
    deployment_path: Path | None,
    out_dir: Path,
    image: str,
    model: str,
    subnet: str,
    otlp_endpoint: str | None,
    trace_sample: float,
    rate_per_s: int,
    duration_s: int,
) -> None:
    """Write a Compose file for TOPOLOGY: one container per service, peers by name, a one-shot load service."""
    from tailscope.lab import compose, groups
    from tailscope.lab import deployment as dep_mod
    from tailscope.lab import topology as topo
    from tailscope.lab.engines import EngineError

    try:
        if otlp_endpoint:
            check_base_url(otlp_endpoint, "--otlp-endpoint")
        doc = topo.load(topology_path)
        plan = dep_mod.load(deployment_path, topo.services(doc)) if deployment_path else None
        placed = groups.plan_groups(plan, topo.services(doc), check=False) if plan else None
        spec = compose.compose(
            doc,
            placed.deployment if placed else None,
            compose.ComposeOptions(
                image=image,
                model=model,
                subnet=subnet,
                otlp_endpoint=otlp_endpoint,
                trace_sample=trace_sample,
                load_rate_per_s=rate_per_s,
                load_duration_s=duration_s,
                load_cpuset=dep_mod.format_cpu_list(placed.load_cpus) if placed and placed.load_cpus else None,
            ),
        )
        swarm = compose.stack(spec, plan) if plan and plan.service_hosts() else None
        paths = compose.write(doc, spec, out_dir, swarm=swarm)
    except (compose.DeployError, topo.TopologyError, ValueError, EngineError) as e:
        _fail(e)
    if placed and placed.cpus:
        console.print(placed.text())
    for p in paths:
        console.print(str(p))


# ---- from traces to a runnable twin (docs/twin.md) ----------------------------------------------
