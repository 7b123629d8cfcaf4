"""The manifests `tailscope deploy k8s` wrote, run on Docker as a kubelet would run them
(docs/deploy.md, "The manifests on a real engine").

No Kubernetes control plane is packaged for these machines, so the pod specs go through the
Docker path instead: the same image, the same command lines, the same names. For each
Deployment (one replica) its pod's container runs on the private daemon (cluster.py) with

* the image the manifests name (the run's image is tagged with that name);
* `command` as the entrypoint and `args` after it, `$(VAR)` expanded from the container's env
  as the kubelet expands it (`$$` → `$`, an undefined name left as written);
* env resolved as the kubelet resolves it: `value`, `configMapKeyRef` (the ConfigMap's data),
  and the downward API's `status.podIP` (the address the pod gets), `metadata.name`,
  `metadata.namespace`;
* volumes: a `configMap` is projected as one file per key (read-only), an `emptyDir` is a fresh
  host folder (the kubelet's are folders on the node too) — the services' result documents;
* `resources.limits` as the CFS quota (`--cpus`) and the memory limit, the kubelet's own use of
  them (there is no static CPU manager here, so no exclusive cores);
* one address on a user network whose subnet is the ConfigMap's POD_CIDR (it must be in the lab
  range: the private daemon is configured with nothing else), and as network aliases every name
  the cluster DNS gives the pod's Service (`NAME`, `NAME.NAMESPACE`, `NAME.NAMESPACE.svc`,
  `NAME.NAMESPACE.svc.cluster.local`), so Docker's embedded DNS answers the names the manifests
  use. A Service name resolves straight to its one pod's address: there is no ClusterIP (the
  kernel has no IPVS and iptables is left alone), so the service range is declared but unused.

Deployments start callees first (a pod whose args name a Service starts after that Service's
pod accepts connections on its container ports): Kubernetes would restart a pod whose peers do not
resolve yet until they do; starting in order gives the same state without the restarts. Then the
Job's container runs to completion and its stdout — the load generator's result document, what
`kubectl logs job/tailscope-load` shows — is kept; `collect` stops the pods (SIGTERM, the pod's
grace period) so each writes its document into its emptyDir, and copies them out. Everything
carries the run's prefix and cluster.RUN_LABEL, so cluster.remove takes it all away.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tailscope.lab import cluster
from tailscope.lab.allow_list import LAB_RANGE
from tailscope.lab.compose import FIRST_HOST_INDEX, DeployError, check_subnet

NETWORK_SUFFIX = "pods"
READY_TIMEOUT_S = 60.0
JOB_GRACE_S = 120.0  # beyond the Job's own run: its start, its connections, its document
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_QUANTITY = re.compile(r"^([0-9]+)(Ki|Mi|Gi)?$")
_UNIT_BYTES = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}


class ManifestError(cluster.ClusterError):
    """A manifest the Docker path cannot run as written: names the file and the field."""


@dataclass
class Pod:
    """One Deployment's (or the Job's) pod: its one container and where it runs."""

    name: str
    kind: str  # "Deployment" or "Job"
    spec: dict  # the pod template's spec
    address: str
    aliases: list[str] = field(default_factory=list)  # the Service's DNS names
    ports: list[int] = field(default_factory=list)  # containerPorts: ready when they accept

    @property
    def container(self) -> dict:
        return dict(self.spec["containers"][0])


@dataclass
class Manifests:
    namespace: str
    config_maps: dict[str, dict[str, str]]
    pods: list[Pod]  # Deployments, callees first
    job: Pod | None
    image: str
    subnet: str


def expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion of command, args and env values."""
    return _VAR.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def memory_bytes(quantity: str, where: str) -> int:
    m = _QUANTITY.match(str(quantity))
    if not m:
        raise ManifestError(f"{where}: memory '{quantity}' is not a quantity the Docker path reads (N, NKi, NMi, NGi)")
    return int(m.group(1)) * _UNIT_BYTES[m.group(2)]


def _load(folder: Path) -> list[tuple[str, dict]]:
    files = sorted(Path(folder).glob("*.yaml"))
    if not files:
        raise ManifestError(f"{folder}: no manifests here (tailscope deploy k8s --out {folder} writes them)")
    out = []
    for f in files:
        try:
            out.append((f.name, yaml.safe_load(f.read_text())))
        except (OSError, yaml.YAMLError) as e:
            raise ManifestError(f"{f}: cannot read ({e})") from e
    return out


def read(folder: Path) -> Manifests:
    """The objects of FOLDER, checked for what the Docker path supports, with each pod's address
    and DNS aliases assigned. ManifestError says what cannot be run, before anything starts."""
    try:
        return _read(folder)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        if isinstance(e, ManifestError):
            raise
        raise ManifestError(
            f"{folder}: not manifests `tailscope deploy k8s` writes ({type(e).__name__}: {e}); write them anew"
        ) from e


def _read(folder: Path) -> Manifests:
    objs = _load(folder)
    by_kind: dict[str, list[tuple[str, dict]]] = {}
    for name, o in objs:
        by_kind.setdefault(str((o or {}).get("kind")), []).append((name, o))
    namespaces = [o["metadata"]["name"] for _, o in by_kind.get("Namespace", [])]
    if len(namespaces) != 1:
        raise ManifestError(f"{folder}: expected one Namespace, found {len(namespaces)}")
    namespace = namespaces[0]
    config_maps = {o["metadata"]["name"]: dict(o.get("data") or {}) for _, o in by_kind.get("ConfigMap", [])}
    subnet_text = next((d["POD_CIDR"] for d in config_maps.values() if "POD_CIDR" in d), None)
    if subnet_text is None:
        raise ManifestError(f"{folder}: no ConfigMap has POD_CIDR (written by `tailscope deploy k8s --pod-cidr`)")
    try:
        subnet = check_subnet(subnet_text)
    except DeployError as e:
        raise ManifestError(
            f"{folder}: the pods' network is the ConfigMap's POD_CIDR {subnet_text}, and on Docker it must be "
            f"inside the lab range {LAB_RANGE} (deploy k8s --pod-cidr): {e}"
        ) from e
    first = subnet.network_address + 1 + FIRST_HOST_INDEX  # as compose.py numbers its containers
    room = subnet.num_addresses - 2 - FIRST_HOST_INDEX
    services = {o["metadata"]["name"]: o for _, o in by_kind.get("Service", [])}
    deployments = by_kind.get("Deployment", [])
    if not deployments:
        raise ManifestError(f"{folder}: no Deployment to run")
    pods: list[Pod] = []
    images = set()
    for i, (fname, o) in enumerate([*deployments, *by_kind.get("Job", [])]):
        spec = o["spec"]["template"]["spec"]
        where = f"{fname}: spec.template.spec"
        if len(spec.get("containers") or []) != 1 or spec.get("initContainers"):
            raise ManifestError(f"{where}: the Docker path runs pods of exactly one container")
        if o["kind"] == "Deployment" and int(o["spec"].get("replicas", 1)) != 1:
            raise ManifestError(f"{fname}: spec.replicas must be 1 (one container per Deployment here)")
        if i >= room:
            raise ManifestError(f"{folder}: POD_CIDR {subnet} is too small for {len(deployments) + 1} pods")
        name = o["metadata"]["name"]
        labels = o["spec"]["template"]["metadata"].get("labels") or {}
        aliases: list[str] = []
        for sname, svc in services.items():
            selector = svc["spec"].get("selector") or {}
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                aliases += [
                    sname,
                    f"{sname}.{namespace}",
                    f"{sname}.{namespace}.svc",
                    f"{sname}.{namespace}.svc.cluster.local",
                ]
        container = spec["containers"][0]
        images.add(container["image"])
        pods.append(
            Pod(
                name=name,
                kind=o["kind"],
                spec=spec,
                address=str(first + i),
                aliases=aliases,
                ports=[int(p["containerPort"]) for p in container.get("ports") or []],
            )
        )
    if len(images) != 1:
        raise ManifestError(
            f"{folder}: the pods name {len(images)} images ({', '.join(sorted(images))}); one is built here"
        )
    job = next((p for p in pods if p.kind == "Job"), None)
    ms = Manifests(namespace, config_maps, [p for p in pods if p.kind == "Deployment"], job, images.pop(), str(subnet))
    for p in [*ms.pods, *([job] if job else [])]:
        env(ms, p)  # every reference checked before anything starts
    ms.pods = _callees_first(ms)
    return ms


def env(ms: Manifests, pod: Pod) -> dict[str, str]:
    """The container's environment as the kubelet builds it (in order; a value may use earlier ones)."""
    out: dict[str, str] = {}
    where = f"{pod.kind} {pod.name}: env"
    for item in pod.container.get("env") or []:
        key = item["name"]
        if "value" in item:
            out[key] = expand(str(item["value"]), out)
            continue
        source = item.get("valueFrom") or {}
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            data = ms.config_maps.get(ref["name"])
            if data is None or ref["key"] not in data:
                raise ManifestError(f"{where} {key}: ConfigMap {ref['name']} has no key {ref['key']}")
            out[key] = data[ref["key"]]
        elif "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            fields = {"status.podIP": pod.address, "metadata.name": pod.name, "metadata.namespace": ms.namespace}
            if path not in fields:
                raise ManifestError(f"{where} {key}: fieldRef {path} (the Docker path knows {', '.join(fields)})")
            out[key] = fields[path]
        else:
            raise ManifestError(f"{where} {key}: only value, configMapKeyRef and fieldRef are supported")
    return out


def command_line(ms: Manifests, pod: Pod) -> list[str]:
    """command + args with $(VAR) expanded: what runs in the container."""
    e = env(ms, pod)
    c = pod.container
    cmd = [expand(str(x), e) for x in c.get("command") or []] + [expand(str(x), e) for x in c.get("args") or []]
    if not cmd:
        raise ManifestError(f"{pod.kind} {pod.name}: no command (the image has no entrypoint the pod may rely on)")
    return cmd


def _callees_first(ms: Manifests) -> list[Pod]:
    """Deployments in start order: a pod whose command line or env names another pod's Service DNS
    name starts after that pod."""
    # A whole name only: user-service's name inside x-user-service's is no dependency.
    named = {
        p.name: [
            re.compile(rf"(?<![-a-z0-9.]){re.escape(a)}(?![-a-z0-9.])")
            for a in p.aliases
            if a.endswith(".svc.cluster.local")
        ]
        for p in ms.pods
    }

    def needs(p: Pod) -> set[str]:
        text = " ".join(command_line(ms, p) + list(env(ms, p).values()))
        return {q.name for q in ms.pods if q is not p and any(r.search(text) for r in named[q.name])}

    order: list[Pod] = []
    waiting = {p.name: needs(p) for p in ms.pods}
    while waiting:
        ready = [p for p in ms.pods if p.name in waiting and not waiting[p.name] - {q.name for q in order}]
        if not ready:
            raise ManifestError(f"the pods call each other in a cycle: {', '.join(sorted(waiting))}")
        for p in ready:
            order.append(p)
            del waiting[p.name]
    return order


def network_name(state: cluster.ClusterState) -> str:
    return f"{state.prefix}-{NETWORK_SUFFIX}"


def container_name(state: cluster.ClusterState, pod: Pod) -> str:
    return f"{state.prefix}-{pod.name}"


def _volumes(state: cluster.ClusterState, ms: Manifests, pod: Pod) -> list[str]:
    """-v arguments: each configMap volume projected as files, each emptyDir a fresh folder, under
    the run's folder (pods/NAME/VOLUME)."""
    root = Path(state.folder) / "pods" / pod.name
    sources: dict[str, Path] = {}
    for v in pod.spec.get("volumes") or []:
        where = f"{pod.kind} {pod.name}: volume {v['name']}"
        folder = root / v["name"]
        folder.mkdir(parents=True, exist_ok=True)
        if "configMap" in v:
            data = ms.config_maps.get(v["configMap"]["name"])
            if data is None or v["configMap"].get("items"):
                raise ManifestError(
                    f"{where}: ConfigMap {v['configMap']['name']} (whole, no items) is not in the manifests"
                )
            for key, value in data.items():
                (folder / key).write_text(value)
        elif "emptyDir" not in v:
            raise ManifestError(f"{where}: only configMap and emptyDir volumes are supported")
        sources[v["name"]] = folder
    out: list[str] = []
    for m in pod.container.get("volumeMounts") or []:
        if m["name"] not in sources:
            raise ManifestError(f"{pod.kind} {pod.name}: volumeMount {m['name']} has no volume")
        out += ["-v", f"{sources[m['name']]}:{m['mountPath']}{':ro' if m.get('readOnly') else ''}"]
    return out


def _run_args(state: cluster.ClusterState, ms: Manifests, pod: Pod) -> list[str]:
    c = pod.container
    cmd = command_line(ms, pod)
    args = ["run", "-d", "--name", container_name(state, pod), "--label", f"{cluster.RUN_LABEL}={state.prefix}"]
    args += ["--hostname", pod.name, "--network", network_name(state), "--ip", pod.address]
    for a in pod.aliases:
        args += ["--network-alias", a]
    # Names outside the graph go to 127.0.0.1 in the container, where nothing listens: they fail at once
    # and no DNS query leaves the machine (the Compose path does the same, docs/deploy.md).
    args += ["--dns", "127.0.0.1"]
    limits = (c.get("resources") or {}).get("limits") or {}
    if "cpu" in limits:
        args += ["--cpus", str(limits["cpu"])]
    if "memory" in limits:
        args += ["--memory", str(memory_bytes(limits["memory"], f"{pod.kind} {pod.name}"))]
    for k, v in env(ms, pod).items():
        args += ["-e", f"{k}={v}"]
    args += _volumes(state, ms, pod)
    grace = pod.spec.get("terminationGracePeriodSeconds")
    if grace is not None:
        args += ["--stop-timeout", str(int(grace))]
    return [*args, "--entrypoint", cmd[0], ms.image, *cmd[1:]]


def _accepts(address: str, port: int) -> bool:
    # The pod's address is in the lab range (read() checked the subnet): inside the allow-list.
    try:
        with socket.create_connection((address, port), timeout=1.0):
            return True
    except OSError:
        return False


def _logs_tail(state: cluster.ClusterState, name: str) -> str:
    r = cluster.docker(state, "logs", "--tail", "5", name, check=False)
    return " | ".join((r.stdout + r.stderr).strip().splitlines()[-5:])


def _wait_ready(state: cluster.ClusterState, pod: Pod) -> None:
    name = container_name(state, pod)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not all(_accepts(pod.address, p) for p in pod.ports):
        running = cluster.docker(state, "inspect", "-f", "{{.State.Running}}", name, check=False).stdout.strip()
        if running != "true":
            raise cluster.ClusterError(f"pod {pod.name} exited at start: {_logs_tail(state, name)}")
        if time.monotonic() > deadline:
            raise cluster.ClusterError(f"pod {pod.name} did not accept on {pod.ports} within {READY_TIMEOUT_S:g} s")
        time.sleep(0.2)


def up(state: cluster.ClusterState, ms: Manifests, progress=print) -> None:
    """The pods' network and every Deployment's pod, callees first, each accepting on its ports.
    The image the manifests name is the run's image under that name."""
    if ms.image != state.image:
        if cluster.docker(state, "image", "inspect", ms.image, check=False).returncode == 0:
            raise cluster.ClusterError(
                f"the manifests' image {ms.image} exists on this daemon already: write the manifests with "
                "another --image (the run tags its own image with that name)"
            )
        cluster.docker(state, "tag", state.image, ms.image)
        state.tags.append(ms.image)
        state.save()
    net = ipaddress.ip_network(ms.subnet)
    gateway = str(next(net.hosts()))
    cluster.docker(
        state,
        "network",
        "create",
        "--driver",
        "bridge",
        "--subnet",
        ms.subnet,
        "--gateway",
        gateway,
        "--label",
        f"{cluster.RUN_LABEL}={state.prefix}",
        network_name(state),
    )
    for pod in ms.pods:
        progress(f"pod {pod.name} at {pod.address}")
        cluster.docker(state, *_run_args(state, ms, pod))
        _wait_ready(state, pod)


def job_duration_s(ms: Manifests) -> float:
    """The load Job's `-d Ns` (tailscope-load's duration), 0 when it names none."""
    if ms.job is None:
        return 0.0
    cmd = command_line(ms, ms.job)
    for flag in ("-d", "--duration"):
        if flag in cmd[:-1]:
            m = re.fullmatch(r"([0-9.]+)s?", cmd[cmd.index(flag) + 1])
            if m:
                return float(m.group(1))
    return 0.0


def run_job(state: cluster.ClusterState, ms: Manifests) -> tuple[str, str, int]:
    """Runs the Job's container to completion: (its stdout, its stderr, its exit code)."""
    if ms.job is None:
        raise ManifestError("the manifests have no Job")
    name = container_name(state, ms.job)
    cluster.docker(state, *_run_args(state, ms, ms.job))
    r = cluster.docker(state, "wait", name, timeout_s=job_duration_s(ms) + JOB_GRACE_S)
    code = int(r.stdout.strip() or -1)
    out = cluster.docker(state, "logs", name, timeout_s=60)
    return out.stdout, out.stderr, code


def stop(state: cluster.ClusterState, ms: Manifests, keep: tuple[str, ...] = ()) -> None:
    """Stops the pods (callers first; SIGTERM, then the pod's grace period), except those named in
    KEEP: each service writes its result document into its emptyDir and flushes its spans."""
    for pod in reversed(ms.pods):
        if pod.name not in keep:
            cluster.docker(state, "stop", container_name(state, pod), timeout_s=120)


def collect(state: cluster.ClusterState, ms: Manifests, results: Path) -> Path:
    """Stops every pod still running, and copies the documents the pods wrote into their emptyDirs
    to RESULTS/k8s-PREFIX."""
    stop(state, ms)
    out = Path(results) / f"k8s-{state.prefix}"
    out.mkdir(parents=True, exist_ok=True)
    for pod in ms.pods:
        for v in pod.spec.get("volumes") or []:
            if "emptyDir" in v:
                shutil.copytree(Path(state.folder) / "pods" / pod.name / v["name"], out, dirs_exist_ok=True)
    return out


def pod_address(ms: Manifests, name: str) -> str:
    """The address of the Deployment NAME's pod (e.g. Jaeger's, to query it from the host)."""
    for p in ms.pods:
        if p.name == name:
            return p.address
    raise ManifestError(f"no Deployment named {name}")
