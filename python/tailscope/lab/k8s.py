"""Kubernetes manifests for a topology: `tailscope deploy k8s` (docs/deploy.md).

One Namespace; a ConfigMap with the topology (the engine's normalised JSON), the
OTLP endpoint and each service's peers; per service a Deployment and a Service;
a Job for the load generator. Every container asks for whole CPUs with
requests == limits (CPU and memory), which puts the pod in the Guaranteed QoS
class: only then does the kubelet's static CPU manager give it exclusive cores,
the cluster's form of the lab's CPU pinning.

Placement comes from a deployment file's host groups (docs/lab-hosts.md):
required node affinity to nodes labelled `tailscope.io/host-group=GROUP`, and
required pod anti-affinity against pods of the other groups, so two groups
never share a node — the isolation the lab hosts give on one machine.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tailscope.lab import deployment as dep_mod
from tailscope.lab import topology as topo
from tailscope.lab.svc_command import CONFIG_DIR, svc_args

GROUP_LABEL = "tailscope.io/host-group"
APP_LABEL = "app.kubernetes.io/name"
PART_LABEL = "app.kubernetes.io/part-of"
SERVICE_PORT = 9000  # every service container listens here; Services give each its own DNS name
FRONT_PORT = 8080
DEFAULT_IMAGE = "tailscope:dev"
DEFAULT_OTLP = "http://127.0.0.1:4318"  # an OpenTelemetry collector agent beside each pod (docs/deploy.md)
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


def _affinity(group: str, groups: list[str]) -> dict:
    affinity: dict = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": GROUP_LABEL, "operator": "In", "values": [group]}]}]
            }
        }
    }
    others = [g for g in groups if g != group]
    if others:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchExpressions": [{"key": GROUP_LABEL, "operator": "In", "values": others}]},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    return affinity


def _resources(p: Placement) -> dict:
    # requests == limits, integer CPUs: Guaranteed QoS, exclusive cores under the static CPU manager.
    amounts = {"cpu": str(p.cpus), "memory": p.memory}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def manifests(
    doc: dict,
    deployment: Deployment | None = None,
    *,
    namespace: str = "tailscope",
    image: str = DEFAULT_IMAGE,
    model: str = "coroutine",
    otlp_endpoint: str = DEFAULT_OTLP,
    trace_sample: float = 0.01,
    load_rate_per_s: int = 100,
    load_duration_s: int = 60,
) -> list[dict]:
    """Every object, in the order `kubectl apply` should create them."""
    _dns_name(namespace, "--namespace")
    deployment = deployment or Deployment()
    names = topo.services(doc)
    for n in names:
        _dns_name(n, "topology service name")
    front = (doc.get("front") or {}).get("service")
    peers = {n: f"{n}.{namespace}.svc.cluster.local:{SERVICE_PORT}" for n in names}
    config_name = "tailscope-config"
    objs: list[dict] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {PART_LABEL: "tailscope"}}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": config_name, "namespace": namespace, "labels": {PART_LABEL: "tailscope"}},
            "data": {
                "topology.json": json.dumps(doc, indent=1, allow_nan=False),
                "OTLP_ENDPOINT": otlp_endpoint,
                "TRACE_SAMPLE": repr(trace_sample),
                # name=host:port of every service: what the RPC transport dials once it
                # takes host names; today it takes numeric loopback or lab addresses only.
                "peers": ",".join(f"{n}={a}" for n, a in peers.items()),
            },
        },
    ]
    env = [
        {"name": key, "valueFrom": {"configMapKeyRef": {"name": config_name, "key": key}}}
        for key in ("OTLP_ENDPOINT", "TRACE_SAMPLE")
    ]
    ports = {n: FRONT_PORT if n == front else SERVICE_PORT for n in names}
    for n in names:
        p = deployment.services.get(n, Placement())
        port = FRONT_PORT if n == front else SERVICE_PORT
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
                        ports=ports,
                        trace_sample="$(TRACE_SAMPLE)",
                        otlp_endpoint="$(OTLP_ENDPOINT)",
                    ),
                    "env": env,
                    "ports": [{"name": "rpc" if n != front else "http", "containerPort": port}],
                    "resources": _resources(p),
                    "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}],
                }
            ],
            "volumes": [{"name": "config", "configMap": {"name": config_name}}],
        }
        if p.group:
            pod_spec["affinity"] = _affinity(p.group, deployment.groups)
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
                                    "args": [
                                        f"http://{front}.{namespace}.svc.cluster.local:{FRONT_PORT}{path}",
                                        "-R",
                                        str(load_rate_per_s),
                                        "-d",
                                        f"{load_duration_s}s",
                                        "-c",
                                        "16",
                                        "--allow-errors",
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
