"""A Compose file for a topology: `tailscope deploy compose` (docs/deploy.md).

One service per topology service, each running the image's `tailscope-svc`
with the command line the Kubernetes manifests use (svc_command.py), on one
user-defined bridge network whose subnet is in the lab range 198.18.0.0/15.
Peers are addressed by their Compose service names: Docker's embedded DNS
answers them, and the engine resolves each name at start and on every
reconnect, checking the address against its allow-list (the subnet is in the
lab range, so no --allow-cidr is needed). Each service also gets a fixed
address in the subnet, which it binds (the engine binds numeric lab addresses
only, never 0.0.0.0).

Start order follows the call graph (`depends_on`: callees first), because
Docker's DNS answers a name only once its container runs and the engine
resolves its peers at start. CPU pinning is `cpuset`. The load generator is a
one-shot service in the `load` profile: `docker-compose up -d` starts the
graph, `docker-compose run --rm load` drives it and writes its result
document to the results folder, where every service writes its own at stop.

The file format is Compose 2.4 (the last format with `cpuset` and static
addresses that docker-compose 1.29, Debian bookworm's, and `docker compose`
v2 both read).

With a deployment whose services sit in host groups, `stack()` writes the same
graph for a Docker Swarm beside it (docker-stack.yml): Swarm reads only format
3.x and forbids `cpuset`, so there a group is a set of nodes instead —
`deploy.placement.constraints: [node.labels.tailscope.group == GROUP]` — and
every service is reached by DNS round robin (`endpoint_mode: dnsrr`: Swarm's
virtual IPs need IPVS, which this kernel lacks).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from tailscope.lab import deployment as dep_mod
from tailscope.lab import jaeger as jaeger_mod
from tailscope.lab import topology as topo
from tailscope.lab.svc_command import TOPOLOGY_IN_CONTAINER, svc_args

DeployError = dep_mod.DeploymentError

SERVICE_PORT = 9000
FRONT_PORT = 8080
DEFAULT_SUBNET = "198.19.128.0/24"  # outside the private daemon's pool 198.19.0.0/17 (docs/deploy.md)
LAB_RANGE = ipaddress.IPv4Network("198.18.0.0/15")
RESULTS_IN_CONTAINER = "/results"
JAEGER = "jaeger"
JAEGER_CONFIG = "jaeger.yaml"
JAEGER_CONFIG_IN_CONTAINER = f"/etc/jaeger/{JAEGER_CONFIG}"
NETWORK = "tailscope"
FIRST_HOST_INDEX = 10  # .1 is the bridge's gateway; a few low addresses stay free
SWARM_GROUP_LABEL = "tailscope.group"  # `docker node update --label-add tailscope.group=logic NODE`
STACK_FILE = "docker-stack.yml"
# A Swarm task's address is not known before it starts (Swarm ignores `ipv4_address`), and the engine
# binds a numeric address only: the task binds the address its own hostname has in the container's
# /etc/hosts, which Docker writes with the task's address on the stack's network.
_BIND_OWN_ADDRESS = 'exec tailscope-svc "$$@" --bind "$$(hostname -i | cut -d " " -f 1)"'


@dataclass
class ComposeOptions:
    image: str = "tailscope-lab:dev"
    model: str = "coroutine"
    subnet: str = DEFAULT_SUBNET
    otlp_endpoint: str | None = None
    trace_sample: float = 0.01
    load_rate_per_s: int = 100
    load_duration_s: int = 10
    load_connections: int = 16
    load_warmup_s: float = 0.0  # tailscope-load --warmup: not recorded
    load_cpuset: str | None = None  # the load container's CPUs (None: not pinned)
    jaeger: bool = False  # a Jaeger container `jaeger` on the network, the services' OTLP endpoint by name


def check_subnet(text: str) -> ipaddress.IPv4Network:
    try:
        net = ipaddress.ip_network(text, strict=True)
    except ValueError as e:
        raise DeployError(f"--subnet {text}: not a network address/prefix ({e})") from e
    if not isinstance(net, ipaddress.IPv4Network) or not net.subnet_of(LAB_RANGE):
        raise DeployError(f"--subnet {text}: must be an IPv4 block inside the lab range 198.18.0.0/15")
    if net.prefixlen > 28:
        raise DeployError(f"--subnet {text}: /{net.prefixlen} is too small (at most /28: 16 addresses)")
    return net


def callees(service_doc: dict) -> list[str]:
    """The services SERVICE_DOC calls, in first-call order: every call site anywhere in its
    endpoints' stages names a `service` and an `endpoint` (a `call` stage, or a call in a group)."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            target = node.get("service")
            if isinstance(target, str) and "endpoint" in node and target not in found:
                found.append(target)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(service_doc.get("endpoints", []))
    return found


def cpusets(names: list[str], deployment: dep_mod.Deployment | None, cpus: list[int]) -> dict[str, str]:
    """Each service's `cpuset`, as the lab pins it: the deployment's `pin` for the service, else its
    host group's `cpus`; else its `cpus` count (1 without a deployment) handed out in order from
    CPUS, wrapping round when the machine has fewer cores than the graph asks for."""
    out: dict[str, str] = {}
    at = 0
    for n in names:
        spec = deployment.services.get(n) if deployment else None
        host = deployment.hosts.get(spec.host) if deployment and spec and spec.host else None
        if spec and spec.pin:
            out[n] = dep_mod.format_cpu_list(spec.pin)
            continue
        if host and host.cpus:
            out[n] = dep_mod.format_cpu_list(host.cpus)
            continue
        want = spec.cpus if spec else 1
        out[n] = dep_mod.format_cpu_list(sorted({cpus[(at + i) % len(cpus)] for i in range(want)}))
        at += want
    return out


def compose(
    doc: dict, deployment: dep_mod.Deployment | None = None, options: ComposeOptions | None = None, cpus=None
) -> dict:
    o = options or ComposeOptions()
    net = check_subnet(o.subnet)
    names = topo.services(doc)
    hosts = list(net.hosts())
    if len(names) + FIRST_HOST_INDEX + 2 > len(hosts):
        raise DeployError(f"--subnet {o.subnet}: too small for {len(names)} services, the load generator and Jaeger")
    address = {n: str(hosts[FIRST_HOST_INDEX + i]) for i, n in enumerate(names)}
    otlp_endpoint = o.otlp_endpoint
    if o.jaeger:
        if JAEGER in names:
            raise DeployError(f"--jaeger: the topology has a service named '{JAEGER}' already")
        if o.otlp_endpoint:
            raise DeployError(
                "--jaeger points the services at the Jaeger container: give it or --otlp-endpoint, not both"
            )
        # By name: the engine resolves it at start and before every POST (Docker's DNS answers it).
        otlp_endpoint = f"http://{JAEGER}:{jaeger_mod.CONTAINER_PORTS['otlp']}"
    front = (doc.get("front") or {}).get("service")
    port = {n: FRONT_PORT if n == front else SERVICE_PORT for n in names}
    by_name = {s["name"]: s for s in doc["services"]}
    pinned = cpusets(names, deployment, sorted(cpus if cpus is not None else os.sched_getaffinity(0)))
    services: dict[str, dict] = {}
    for n in names:
        calls = callees(by_name[n])
        services[n] = {
            "image": o.image,
            "entrypoint": ["tailscope-svc"],
            "command": svc_args(
                n,
                model=o.model,
                port=port[n],
                bind=address[n],
                peers={c: f"{c}:{port[c]}" for c in calls},
                trace_sample=o.trace_sample,
                otlp_endpoint=otlp_endpoint if o.trace_sample > 0 else None,
                out=f"{RESULTS_IN_CONTAINER}/{n}.json",
            ),
            "cpuset": pinned[n],
            "networks": {NETWORK: {"ipv4_address": address[n]}},
            "volumes": [
                f"./topology.json:{TOPOLOGY_IN_CONTAINER}:ro",
                f"./results:{RESULTS_IN_CONTAINER}",
            ],
            # Docker's embedded DNS answers the graph's names and forwards any other name to these
            # servers: 127.0.0.1 inside the container, where nothing listens, so such a lookup fails
            # at once (a peer whose container is down: the reconnect fails fast, see lab-hosts.md)
            # and no DNS query leaves the machine.
            "dns": ["127.0.0.1"],
            # SIGTERM: the engine stops, writes its result document, exits 0.
            "stop_signal": "SIGTERM",
            "stop_grace_period": "20s",
        }
        if calls or o.jaeger:
            services[n]["depends_on"] = calls + ([JAEGER] if o.jaeger else [])
    if front:
        path = (doc.get("front") or {}).get("path", "/")
        services["load"] = {
            "image": o.image,
            "entrypoint": ["tailscope-load"],
            "command": [
                f"http://{front}:{FRONT_PORT}{path}",
                "-R",
                str(o.load_rate_per_s),
                "-d",
                f"{o.load_duration_s}s",
                "-c",
                str(o.load_connections),
                *(["--warmup", f"{o.load_warmup_s:g}s"] if o.load_warmup_s > 0 else []),
                "--allow-errors",
                "--out",
                f"{RESULTS_IN_CONTAINER}/load.json",
            ],
            "networks": {NETWORK: {"ipv4_address": str(hosts[FIRST_HOST_INDEX + len(names)])}},
            "volumes": [f"./results:{RESULTS_IN_CONTAINER}"],
            "dns": ["127.0.0.1"],
            "depends_on": [front],
            "profiles": ["load"],
            "restart": "no",
        }
        if o.load_cpuset:
            services["load"]["cpuset"] = o.load_cpuset
    if o.jaeger:
        services[JAEGER] = {
            "image": o.image,
            "entrypoint": [JAEGER],
            "command": ["--config", f"file:{JAEGER_CONFIG_IN_CONTAINER}"],
            "networks": {NETWORK: {"ipv4_address": str(hosts[FIRST_HOST_INDEX + len(names) + 1])}},
            "volumes": [f"./{JAEGER_CONFIG}:{JAEGER_CONFIG_IN_CONTAINER}:ro"],
            "dns": ["127.0.0.1"],
            "stop_signal": "SIGTERM",
            "stop_grace_period": "20s",
        }
    return {
        "version": "2.4",
        "services": services,
        "networks": {NETWORK: {"driver": "bridge", "ipam": {"config": [{"subnet": str(net)}]}}},
    }


def jaeger_address(spec: dict) -> str | None:
    """The Jaeger container's address in the Compose file SPEC (None: it has none)."""
    j = spec["services"].get(JAEGER)
    return str(j["networks"][NETWORK]["ipv4_address"]) if j else None


def jaeger_query_url(spec: dict) -> str | None:
    """Where the host reads the Jaeger container's traces: its query API at its lab-range address."""
    address = jaeger_address(spec)
    return f"http://{address}:{jaeger_mod.CONTAINER_PORTS['query']}" if address else None


def jaeger_config(spec: dict) -> str:
    """The Jaeger container's configuration: every port on its own address on the graph's network."""
    cp = jaeger_mod.CONTAINER_PORTS
    return jaeger_mod.config_text(
        str(jaeger_address(spec)), otlp=cp["otlp"], query=cp["query"], query_grpc=cp["query_grpc"]
    )


def group_constraint(group: str) -> str:
    return f"node.labels.{SWARM_GROUP_LABEL} == {group}"


def stack(spec: dict, deployment: dep_mod.Deployment) -> dict:
    """The Compose file SPEC as a Swarm stack (format 3.8): each service on the nodes of its host
    group (a placement constraint on the node label SWARM_GROUP_LABEL), `endpoint_mode: dnsrr`, the
    topology as a Swarm config (a bind mount would need the file on every node), the results in a
    volume on each node, no `cpuset` (Swarm forbids it; a group's nodes are its CPUs), the load as a
    service that runs once on the load group's nodes. A service in no group has no constraint."""
    if JAEGER in spec["services"]:
        raise DeployError("a Swarm stack with the Jaeger container is not written (its ports bind a fixed address)")
    group_of = {n: s.host for n, s in deployment.services.items() if s.host}
    load_group = deployment.load_hosts[0] if deployment.load_hosts else None
    services: dict[str, dict] = {}
    for name, svc in spec["services"].items():
        group = load_group if name == "load" else group_of.get(name)
        out: dict = {"image": svc["image"]}
        command = list(svc["command"])
        if name == "load":
            out["entrypoint"] = svc["entrypoint"]
            out["command"] = command
        else:
            i = command.index("--bind")
            del command[i : i + 2]
            out["entrypoint"] = ["/bin/sh", "-c", _BIND_OWN_ADDRESS, "tailscope-svc"]
            out["command"] = command
            out["configs"] = [{"source": "topology", "target": TOPOLOGY_IN_CONTAINER}]
        out["networks"] = [NETWORK]
        out["volumes"] = [f"results:{RESULTS_IN_CONTAINER}"]
        out["dns"] = svc["dns"]
        if "stop_signal" in svc:
            out["stop_signal"] = svc["stop_signal"]
            out["stop_grace_period"] = svc["stop_grace_period"]
        deploy: dict = {"endpoint_mode": "dnsrr", "replicas": 1}
        if group:
            deploy["placement"] = {"constraints": [group_constraint(group)]}
        if name == "load":
            # Started by hand once the graph runs (`docker service scale STACK_load=1`), and run once:
            # Swarm has no depends_on, and a load that starts before the front measures nothing.
            deploy["replicas"] = 0
            deploy["restart_policy"] = {"condition": "none"}
        out["deploy"] = deploy
        services[name] = out
    subnet = spec["networks"][NETWORK]["ipam"]["config"][0]["subnet"]
    return {
        "version": "3.8",
        "services": services,
        "networks": {NETWORK: {"driver": "overlay", "attachable": True, "ipam": {"config": [{"subnet": subnet}]}}},
        "volumes": {"results": {}},
        "configs": {"topology": {"file": "./topology.json"}},
    }


def write(doc: dict, spec: dict, out_dir: Path, swarm: dict | None = None) -> list[Path]:
    """docker-compose.yml (and `swarm`, a stack(), as docker-stack.yml), the engine's topology.json
    beside it, and an empty results/ folder, written to a temp folder and renamed (an error leaves
    nothing; an existing non-empty folder is refused)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise DeployError(f"--out {out_dir}: exists and is not an empty folder (choose a new one)")
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    try:
        tmp.mkdir(parents=True)
        (tmp / "results").mkdir()
        (tmp / "docker-compose.yml").write_text(yaml.safe_dump(spec, sort_keys=False))
        if swarm is not None:
            (tmp / STACK_FILE).write_text(yaml.safe_dump(swarm, sort_keys=False))
        if JAEGER in spec["services"]:
            (tmp / JAEGER_CONFIG).write_text(jaeger_config(spec))
        topo.write_json(doc, tmp / "topology.json")
        if out_dir.exists():
            out_dir.rmdir()
        tmp.replace(out_dir)
    except OSError as e:
        for f in sorted(tmp.rglob("*"), reverse=True):
            f.rmdir() if f.is_dir() else f.unlink()
        if tmp.exists():
            tmp.rmdir()
        raise DeployError(f"--out {out_dir}: cannot write the compose files ({e.strerror or e})") from e
    written = [out_dir / "docker-compose.yml", out_dir / "topology.json", out_dir / "results"]
    return written + ([out_dir / STACK_FILE] if swarm is not None else [])
