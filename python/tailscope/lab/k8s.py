"""Kubernetes manifests for a topology: `tailscope deploy k8s` (docs/deploy.md).

One Namespace; a ConfigMap with the topology (the engine's normalised JSON), the
OTLP endpoint, each service's peers and the cluster's pod and service ranges; per
service a Deployment and a Service; optionally Jaeger (a Deployment and a Service);
a Job for the load generator. The services run the Compose path's command line
(svc_command.py) with their peers addressed by Service DNS names
(NAME.NAMESPACE.svc.cluster.local), `--bind` the pod's own address (downward API,
POD_IP), and `--allow-cidr` the pod and service ranges, so the engine's allow-list
admits what the cluster DNS answers. Every container asks for whole CPUs with
requests == limits (CPU and memory), which puts the pod in the Guaranteed QoS
class: only then does the kubelet's static CPU manager give it exclusive cores,
the cluster's form of the lab's CPU pinning.

Placement comes from a deployment file's host groups (docs/lab-hosts.md): a
`nodeSelector` on nodes labelled `tailscope.io/host-group=GROUP` (a group is
the set of nodes carrying its label: `kubectl label node N
tailscope.io/host-group=logic`), and required pod anti-affinity against pods of
the other groups, so two groups never share a node — the isolation the lab
hosts give on one machine, and the container groups' cpusets on one Docker
engine (docs/deploy.md).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tailscope.lab import deployment as dep_mod
from tailscope.lab import jaeger as jaeger_mod
from tailscope.lab import topology as topo
from tailscope.lab.allow_list import check_base_url, check_cluster_cidr, split_http_url
from tailscope.lab.compose import callees
from tailscope.lab.svc_command import CONFIG_DIR, svc_args

GROUP_LABEL = "tailscope.io/host-group"
APP_LABEL = "app.kubernetes.io/name"
PART_LABEL = "app.kubernetes.io/part-of"
SERVICE_PORT = 9000  # every service container listens here; Services give each its own DNS name
FRONT_PORT = 8080
DEFAULT_IMAGE = "tailscope:dev"
DEFAULT_OTLP = "http://127.0.0.1:4318"  # without --jaeger: a collector agent in each pod's network (docs/deploy.md)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


# One parser for deployment files (deployment.py); its error is this command's bad-input error.
DeployError = dep_mod.DeploymentError


@dataclass
class Placement:
    group: str | None = None
    cpus: int = 1
    memory: str = "256Mi"


@dataclass
class Deployment:
    """The part of a deployment file manifests use: service -> host group, CPUs, memory."""

    name: str = "default"
    groups: list[str] = field(default_factory=list)
    services: dict[str, Placement] = field(default_factory=dict)


def _dns_name(text: str, where: str) -> str:
    if not _DNS_LABEL.match(text):
        raise DeployError(f"{where}: '{text}' is not a valid Kubernetes name (lower-case letters, digits, '-')")
    return text


def load_deployment(path: Path, services: list[str]) -> Deployment:
    """Host groups and CPU/memory requests of a deployment file (lab-only fields —
    lab_host, pin, links — are checked by the parser and not used here)."""
    dep = dep_mod.load(path, services)
    groups = [_dns_name(g, f"{path}: hosts") for g in dep.hosts]
    out = Deployment(name=dep.name, groups=groups)
    for name, s in dep.services.items():
        out.services[name] = Placement(group=s.host, cpus=s.cpus, memory=s.memory)
    return out


def _labels(name: str, group: str | None) -> dict:
    labels = {APP_LABEL: name, PART_LABEL: "tailscope"}
    if group:
        labels[GROUP_LABEL] = group
    return labels


def _anti_affinity(group: str, groups: list[str]) -> dict | None:
    """Required anti-affinity against the pods of the other groups: two groups never share a node."""
    others = [g for g in groups if g != group]
    if not others:
        return None
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchExpressions": [{"key": GROUP_LABEL, "operator": "In", "values": others}]},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }


def _resources(p: Placement) -> dict:
    # requests == limits, integer CPUs: Guaranteed QoS, exclusive cores under the static CPU manager.
    amounts = {"cpu": str(p.cpus), "memory": p.memory}
    return {"requests": dict(amounts), "limits": dict(amounts)}


# The cluster's ranges, as --allow-cidr declares them to every container (docs/deploy.md): the pod
# range holds at least one node's /24; kube-apiserver refuses a service range wider than /12.
POD_CIDR_PREFIX = (8, 24)
SERVICE_CIDR_PREFIX = (12, 28)
RESULTS_IN_POD = "/results"  # an emptyDir: each service writes its result document there at SIGTERM
JAEGER = "jaeger"
JAEGER_CONFIG_KEY = "jaeger.yaml"
POD_IP_ENV = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


CLUSTER_DNS_SUFFIX = ".svc.cluster.local"


def service_dns(name: str, namespace: str) -> str:
    """A Service's name as the cluster DNS answers it from any namespace."""
    return f"{name}.{namespace}{CLUSTER_DNS_SUFFIX}"


def check_cidrs(pod_cidr: str, service_cidr: str) -> tuple[str, str]:
    """The pod and service ranges of `deploy k8s`, canonical; DeployError naming the flag when a block
    is not a sensible cluster range or the two overlap."""
    try:
        pods = check_cluster_cidr(pod_cidr, "--pod-cidr", widest=POD_CIDR_PREFIX[0], narrowest=POD_CIDR_PREFIX[1])
        services = check_cluster_cidr(
            service_cidr, "--service-cidr", widest=SERVICE_CIDR_PREFIX[0], narrowest=SERVICE_CIDR_PREFIX[1]
        )
    except ValueError as e:
        raise DeployError(str(e)) from e
    if pods.overlaps(services):
        raise DeployError(f"--pod-cidr {pods} and --service-cidr {services} overlap: a cluster keeps them apart")
    return str(pods), str(services)


def check_otlp_endpoint(url: str, namespace: str) -> str:
    """--otlp-endpoint of the manifests: http://HOST:PORT (allow_list.split_http_url) with HOST
    numeric on loopback or the lab subnet (check_base_url), or a Service's cluster DNS name
    NAME.NAMESPACE.svc.cluster.local (the engine resolves it in the pod and judges the answer
    against the declared ranges)."""
    service_hint = f"(or a Service: http://NAME.{namespace}{CLUSTER_DNS_SUFFIX}:PORT)"
    try:
        host, _port = split_http_url(url, "--otlp-endpoint")
    except ValueError as e:
        raise DeployError(f"{e} {service_hint}") from e
    if host.endswith(CLUSTER_DNS_SUFFIX):
        labels = host.removesuffix(CLUSTER_DNS_SUFFIX).split(".")
        if len(labels) != 2 or not all(_DNS_LABEL.match(x) for x in labels):
            raise DeployError(f"--otlp-endpoint '{url}': a Service name is NAME.NAMESPACE{CLUSTER_DNS_SUFFIX}")
        return url.rstrip("/")
    try:
        return check_base_url(url, "--otlp-endpoint")
    except ValueError as e:
        raise DeployError(f"{e} {service_hint}") from e


def _jaeger_objects(namespace: str, image: str, config_name: str) -> list[dict]:
    """Jaeger v2 (in-memory store) as a Deployment and a Service `jaeger`: OTLP/HTTP in, the query API
    out, listening on the pod's own address. The image must hold /usr/local/bin/jaeger (the Docker
    path's image does where the bootstrap built Jaeger; docs/deploy.md)."""
    ports = jaeger_mod.CONTAINER_PORTS
    labels = _labels(JAEGER, None)
    container = {
        "name": JAEGER,
        "image": image,
        "command": [JAEGER],
        "args": ["--config", f"file:{CONFIG_DIR}/{JAEGER_CONFIG_KEY}"],
        "env": [POD_IP_ENV],
        "ports": [
            {"name": "otlp-http", "containerPort": ports["otlp"]},
            {"name": "query", "containerPort": ports["query"]},
        ],
        "resources": _resources(Placement(cpus=1, memory="1Gi")),
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}],
    }
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": JAEGER, "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {APP_LABEL: JAEGER}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [container],
                        "volumes": [{"name": "config", "configMap": {"name": config_name}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": JAEGER, "namespace": namespace, "labels": labels},
            "spec": {
                "selector": {APP_LABEL: JAEGER},
                "ports": [
                    {"name": "otlp-http", "port": ports["otlp"], "targetPort": ports["otlp"]},
                    {"name": "query", "port": ports["query"], "targetPort": ports["query"]},
                ],
            },
        },
    ]


def manifests(
    doc: dict,
    deployment: Deployment | None = None,
    *,
    pod_cidr: str,
    service_cidr: str,
    namespace: str = "tailscope",
    image: str = DEFAULT_IMAGE,
    model: str = "coroutine",
    otlp_endpoint: str | None = None,
    jaeger: bool = False,
    trace_sample: float = 0.01,
    load_rate_per_s: int = 100,
    load_duration_s: int = 60,
) -> list[dict]:
    """Every object, in the order `kubectl apply` should create them. Each service's pod runs
    svc_args (the Compose path's command line) with its callees as `--peers NAME=SERVICE-DNS:PORT`,
    `--bind $(POD_IP)` (downward API) and `--allow-cidr` the cluster's pod and service ranges; the
    load Job declares them too, so the front's Service name is accepted. `jaeger`: a Jaeger
    Deployment and Service too, and the OTLP endpoint is that Service (unless `otlp_endpoint` names
    another); without either, DEFAULT_OTLP."""
    _dns_name(namespace, "--namespace")
    pod_cidr, service_cidr = check_cidrs(pod_cidr, service_cidr)
    allow = [pod_cidr, service_cidr]
    if jaeger and otlp_endpoint:
        raise DeployError("--jaeger points the services at the manifests' Jaeger: give it or --otlp-endpoint, not both")
    if jaeger:
        otlp_endpoint = f"http://{service_dns(JAEGER, namespace)}:{jaeger_mod.CONTAINER_PORTS['otlp']}"
    otlp_endpoint = check_otlp_endpoint(otlp_endpoint or DEFAULT_OTLP, namespace)
    deployment = deployment or Deployment()
    names = topo.services(doc)
    for n in names:
        _dns_name(n, "topology service name")
    if jaeger and JAEGER in names:
        raise DeployError(f"--jaeger: the topology has a service named '{JAEGER}' already")
    front = (doc.get("front") or {}).get("service")
    ports = {n: FRONT_PORT if n == front else SERVICE_PORT for n in names}
    peers = {n: f"{service_dns(n, namespace)}:{ports[n]}" for n in names}
    by_name = {s["name"]: s for s in doc["services"]}
    config_name = "tailscope-config"
    data = {
        "topology.json": json.dumps(doc, indent=1, allow_nan=False),
        "OTLP_ENDPOINT": otlp_endpoint,
        "TRACE_SAMPLE": repr(trace_sample),
        # Every service's name=host:port (each pod's --peers names its own callees from it), and the
        # ranges its --allow-cidr declares: what a reader of the cluster sees the graph was given.
        "peers": ",".join(f"{n}={a}" for n, a in peers.items()),
        "POD_CIDR": pod_cidr,
        "SERVICE_CIDR": service_cidr,
    }
    if jaeger:
        cp = jaeger_mod.CONTAINER_PORTS
        data[JAEGER_CONFIG_KEY] = jaeger_mod.config_text(
            "${env:POD_IP}", otlp=cp["otlp"], query=cp["query"], query_grpc=cp["query_grpc"]
        )
    objs: list[dict] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {PART_LABEL: "tailscope"}}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": config_name, "namespace": namespace, "labels": {PART_LABEL: "tailscope"}},
            "data": data,
        },
    ]
    if jaeger:
        objs += _jaeger_objects(namespace, image, config_name)
    env = [POD_IP_ENV] + [
        {"name": key, "valueFrom": {"configMapKeyRef": {"name": config_name, "key": key}}}
        for key in ("OTLP_ENDPOINT", "TRACE_SAMPLE")
    ]
    for n in names:
        p = deployment.services.get(n, Placement())
        port = ports[n]
        pod_spec: dict = {
            "containers": [
                {
                    "name": "svc",
                    "image": image,
                    "command": ["tailscope-svc"],
                    "args": svc_args(
                        n,
                        model=model,
                        port=port,
                        bind="$(POD_IP)",
                        peers={c: peers[c] for c in callees(by_name[n])},
                        allow_cidrs=allow,
                        trace_sample="$(TRACE_SAMPLE)",
                        # Nothing is sampled at 0: no exporter (the engine refuses one with nothing to send).
                        otlp_endpoint="$(OTLP_ENDPOINT)" if trace_sample > 0 else None,
                        out=f"{RESULTS_IN_POD}/{n}.json",
                    ),
                    "env": env,
                    "ports": [{"name": "rpc" if n != front else "http", "containerPort": port}],
                    "resources": _resources(p),
                    "volumeMounts": [
                        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                        {"name": "results", "mountPath": RESULTS_IN_POD},
                    ],
                }
            ],
            # SIGTERM: the engine stops, writes its result document, exits 0.
            "terminationGracePeriodSeconds": 20,
            "volumes": [{"name": "config", "configMap": {"name": config_name}}, {"name": "results", "emptyDir": {}}],
        }
        if p.group:
            # The group's nodes: those labelled with it (the group's CPUs are theirs).
            pod_spec["nodeSelector"] = {GROUP_LABEL: p.group}
            anti = _anti_affinity(p.group, deployment.groups)
            if anti:
                pod_spec["affinity"] = anti
        labels = _labels(n, p.group)
        objs.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": n, "namespace": namespace, "labels": labels},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {APP_LABEL: n}},
                    "template": {"metadata": {"labels": labels}, "spec": pod_spec},
                },
            }
        )
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": n, "namespace": namespace, "labels": labels},
                "spec": {
                    "selector": {APP_LABEL: n},
                    "ports": [{"name": "http" if n == front else "rpc", "port": port, "targetPort": port}],
                },
            }
        )
    if front:
        path = (doc.get("front") or {}).get("path", "/")
        load = Placement(cpus=1, memory="256Mi")
        objs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "tailscope-load",
                    "namespace": namespace,
                    "labels": _labels("tailscope-load", None),
                },
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"labels": _labels("tailscope-load", None)},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "load",
                                    "image": image,
                                    "command": ["tailscope-load"],
                                    # The result document on stdout: `kubectl logs job/tailscope-load`.
                                    "args": [
                                        f"http://{peers[front]}{path}",
                                        "-R",
                                        str(load_rate_per_s),
                                        "-d",
                                        f"{load_duration_s}s",
                                        "-c",
                                        "16",
                                        "--allow-errors",
                                        *(a for block in allow for a in ("--allow-cidr", block)),
                                    ],
                                    "resources": _resources(load),
                                }
                            ],
                        },
                    },
                },
            }
        )
    return objs


def write(objs: list[dict], out_dir: Path) -> list[Path]:
    """One YAML file per object, numbered in apply order, written to a temp folder
    and renamed: a failure leaves no half set behind, and a folder that cannot be
    written is a DeployError naming it (never a traceback)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise DeployError(f"--out {out_dir}: exists and is not a folder (choose a new folder)")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise DeployError(f"--out {out_dir}: the folder exists and is not empty (choose a new one)")
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    try:
        tmp.mkdir(parents=True)
    except OSError as e:
        raise DeployError(f"--out {out_dir}: cannot create a folder there ({e.strerror or e})") from e
    paths = []
    try:
        for i, o in enumerate(objs):
            name = f"{i:02d}-{o['kind'].lower()}-{o['metadata']['name']}.yaml"
            (tmp / name).write_text(yaml.safe_dump(o, sort_keys=False))
            paths.append(out_dir / name)
        if out_dir.exists():
            out_dir.rmdir()
        tmp.replace(out_dir)
    except BaseException as e:
        for f in tmp.glob("*"):
            f.unlink()
        tmp.rmdir()
        if isinstance(e, OSError):
            raise DeployError(f"--out {out_dir}: cannot write the manifests ({e.strerror or e})") from e
        raise
    return paths
