"""The manifests on Docker without Docker: how `tailscope cluster k8s` reads what `deploy k8s`
wrote — addresses from the ConfigMap's POD_CIDR, the Service DNS names as aliases, env and
$(VAR) resolved as the kubelet resolves them, callees started first — and what it refuses.
The run itself is tests/e2e/test_cluster.py (make cluster-e2e)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import needs_engine
from tailscope.cli import main
from tailscope.lab import cluster, k8s_docker, topology

pytestmark = needs_engine("tailscope-svc")  # topology validation runs tailscope-svc

FQDN = ".tailscope.svc.cluster.local"


def write(tmp_path: Path, *extra: str, pod_cidr: str = "198.19.132.0/24") -> Path:
    out = tmp_path / "k8s"
    r = CliRunner().invoke(
        main,
        [
            "deploy",
            "k8s",
            "--topology",
            str(topology.SOCIALNET),
            "--out",
            str(out),
            "--pod-cidr",
            pod_cidr,
            "--service-cidr",
            "198.19.133.0/24",
            "--image",
            "tailscope-k8s:test",
            *extra,
        ],
    )
    assert r.exit_code == 0, r.output
    return out


def test_expand_is_the_kubelets():
    env = {"A": "1", "POD_IP": "198.19.132.10"}
    assert k8s_docker.expand("--bind=$(POD_IP)", env) == "--bind=198.19.132.10"
    assert k8s_docker.expand("$(NOT_SET) $$(A) $(A)", env) == "$(NOT_SET) $(A) 1"


def test_pods_get_addresses_aliases_and_their_environment(tmp_path):
    ms = k8s_docker.read(write(tmp_path, "--jaeger"))
    assert ms.subnet == "198.19.132.0/24" and ms.image == "tailscope-k8s:test"
    names = [p.name for p in ms.pods]
    assert len(names) == 13 and ms.job is not None
    # Callees first: Jaeger before every service (their OTLP endpoint), a callee before its callers.
    assert names[0] == "jaeger"
    assert names.index("text-service") < names.index("compose-post-service") < names.index("nginx-web-server")
    front = next(p for p in ms.pods if p.name == "nginx-web-server")
    assert front.aliases == [
        "nginx-web-server",
        "nginx-web-server.tailscope",
        "nginx-web-server.tailscope.svc",
        "nginx-web-server" + FQDN,
    ]
    assert front.address.startswith("198.19.132.") and front.ports == [8080]
    assert len({p.address for p in [*ms.pods, ms.job]}) == 14
    env = k8s_docker.env(ms, front)
    assert env["POD_IP"] == front.address
    assert env["OTLP_ENDPOINT"] == "http://jaeger" + FQDN + ":4318"
    cmd = k8s_docker.command_line(ms, front)
    assert cmd[0] == "tailscope-svc" and cmd[cmd.index("--bind") + 1] == front.address
    assert cmd[cmd.index("--otlp-endpoint") + 1] == "http://jaeger" + FQDN + ":4318"
    assert cmd[cmd.index("--peers") + 1] == "compose-post-service=compose-post-service" + FQDN + ":9000"
    assert k8s_docker.job_duration_s(ms) == 60.0


def test_the_docker_run_line_carries_the_prefix_the_names_and_the_volumes(tmp_path):
    ms = k8s_docker.read(write(tmp_path))
    state = cluster.ClusterState(prefix="tsc000001", folder=str(tmp_path / "run"), docker_host="", daemon_pid=None)
    pod = next(p for p in ms.pods if p.name == "compose-post-service")
    args = k8s_docker._run_args(state, ms, pod)
    assert args[:3] == ["run", "-d", "--name"] and args[3] == "tsc000001-compose-post-service"
    assert f"{cluster.RUN_LABEL}=tsc000001" in args
    assert "compose-post-service" + FQDN in args and args[args.index("--ip") + 1] == pod.address
    assert args[args.index("--dns") + 1] == "127.0.0.1"
    assert args[args.index("--cpus") + 1] == "1" and args[args.index("--memory") + 1] == str(256 << 20)
    entry = args.index("--entrypoint")
    assert args[entry + 1 : entry + 3] == ["tailscope-svc", "tailscope-k8s:test"]
    # The ConfigMap projected as files (the topology the engine reads), the emptyDir for its document.
    config = tmp_path / "run" / "pods" / "compose-post-service" / "config"
    assert (config / "topology.json").is_file() and (config / "POD_CIDR").read_text() == "198.19.132.0/24"
    mounts = [args[i + 1] for i, a in enumerate(args) if a == "-v"]
    assert f"{config}:/etc/tailscope:ro" in mounts
    assert f"{tmp_path / 'run' / 'pods' / 'compose-post-service' / 'results'}:/results" in mounts


def test_a_pod_range_outside_the_lab_range_is_refused_by_the_docker_path(tmp_path):
    # A range `deploy k8s` accepts for a real cluster (the shared address space) but the Docker path must
    # not create: its private daemon has only the lab range, and nothing is started before the refusal.
    with pytest.raises(k8s_docker.ManifestError, match="inside the lab range 198.18.0.0/15"):
        k8s_docker.read(write(tmp_path, pod_cidr="100.64.0.0/16"))


def test_what_the_docker_path_cannot_run_is_named(tmp_path):
    out = write(tmp_path)
    f = next(out.glob("*-deployment-text-service.yaml"))
    o = yaml.safe_load(f.read_text())
    o["spec"]["template"]["spec"]["containers"][0]["env"].append(
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    )
    f.write_text(yaml.safe_dump(o))
    with pytest.raises(k8s_docker.ManifestError, match="fieldRef spec.nodeName"):
        k8s_docker.read(out)
    with pytest.raises(k8s_docker.ManifestError, match="no manifests here"):
        k8s_docker.read(tmp_path / "empty")
