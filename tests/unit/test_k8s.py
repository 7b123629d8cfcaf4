"""`tailscope deploy k8s`: manifests that pass the Kubernetes schemas (kubernetes-validate
ships them; no cluster), with whole-CPU requests equal to limits and placement from
the deployment's host groups; bad deployments refused with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import needs_engine
from tailscope.cli import main
from tailscope.lab import compose, k8s, topology

pytestmark = needs_engine("tailscope-svc")  # topology validation runs tailscope-svc

DEPLOYMENT = """
name: socialnet-3-hosts
hosts:
  front: {}
  logic: {}
  storage: {}
services:
  nginx-web-server: {host: front, cpus: 2, memory: 512Mi}
  compose-post-service: {host: logic, cpus: 1}
  post-storage-service: {host: storage, cpus: 1}
"""


# Example ranges in the shared address space (RFC 6598), the shape of a real cluster's (/16 pods, /12
# services); that a real cluster's private defaults are accepted is tests/unit/test_allow_list.py's.
CIDRS = ("--pod-cidr", "100.64.0.0/16", "--service-cidr", "100.96.0.0/12")


def deploy(tmp_path: Path, *extra: str, deployment: str | None = DEPLOYMENT, cidrs=CIDRS):
    args = ["deploy", "k8s", "--topology", str(topology.SOCIALNET), "--out", str(tmp_path / "out"), *cidrs, *extra]
    if deployment is not None:
        (tmp_path / "deployment.yaml").write_text(deployment)
        args += ["--deployment", str(tmp_path / "deployment.yaml")]
    return CliRunner().invoke(main, args)


def objects(out: Path) -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted(out.glob("*.yaml"))]


@pytest.mark.parametrize("jaeger", [False, True], ids=["plain", "with Jaeger"])
def test_manifests_validate_against_the_kubernetes_schemas(tmp_path, jaeger):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    r = deploy(tmp_path, *(["--jaeger"] if jaeger else []))
    assert r.exit_code == 0, r.output
    objs = objects(tmp_path / "out")
    kinds = [o["kind"] for o in objs]
    assert kinds[:2] == ["Namespace", "ConfigMap"] and kinds[-1] == "Job"
    assert kinds.count("Deployment") == kinds.count("Service") == 12 + jaeger
    version = kubernetes_validate.utils.latest_version()
    for o in objs:
        kubernetes_validate.validate(o, version, strict=True)


def test_every_container_asks_whole_cpus_with_requests_equal_to_limits(tmp_path):
    assert deploy(tmp_path).exit_code == 0
    for o in objects(tmp_path / "out"):
        if o["kind"] not in ("Deployment", "Job"):
            continue
        for c in o["spec"]["template"]["spec"]["containers"]:
            res = c["resources"]
            assert res["requests"] == res["limits"]  # Guaranteed QoS: the static CPU manager pins it
            assert res["requests"]["cpu"].isdigit()
    by_name = {o["metadata"]["name"]: o for o in objects(tmp_path / "out") if o["kind"] == "Deployment"}
    front = by_name["nginx-web-server"]["spec"]["template"]["spec"]
    assert front["containers"][0]["resources"]["limits"] == {"cpu": "2", "memory": "512Mi"}


def test_placement_follows_the_host_groups(tmp_path):
    """Each placed pod selects its group's nodes by label, and keeps off the other groups' nodes."""
    assert deploy(tmp_path).exit_code == 0
    deps = {o["metadata"]["name"]: o for o in objects(tmp_path / "out") if o["kind"] == "Deployment"}
    spec = deps["compose-post-service"]["spec"]["template"]["spec"]
    # A group is the nodes labelled with it: `kubectl label node N tailscope.io/host-group=logic`.
    assert spec["nodeSelector"] == {"tailscope.io/host-group": "logic"}
    assert deps["nginx-web-server"]["spec"]["template"]["spec"]["nodeSelector"] == {"tailscope.io/host-group": "front"}
    assert deps["post-storage-service"]["spec"]["template"]["spec"]["nodeSelector"] == {
        "tailscope.io/host-group": "storage"
    }
    anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["labelSelector"]["matchExpressions"][0]["values"] == ["front", "storage"]
    assert set(spec["affinity"]) == {"podAntiAffinity"}  # the node choice is the nodeSelector's alone
    text = deps["text-service"]["spec"]["template"]["spec"]  # not placed: the scheduler's choice
    assert "affinity" not in text and "nodeSelector" not in text
    args = spec["containers"][0]["args"]
    assert args[args.index("--service") + 1] == "compose-post-service"
    assert args[args.index("--otlp-endpoint") + 1] == "$(OTLP_ENDPOINT)"
    assert "--ports" not in args  # peers by Service name, not 127.0.0.1 ports
    config = next(o for o in objects(tmp_path / "out") if o["kind"] == "ConfigMap")
    assert config["data"]["OTLP_ENDPOINT"] == "http://127.0.0.1:4318"
    assert topology.services(json.loads(config["data"]["topology.json"]))[0] == "nginx-web-server"


@pytest.mark.parametrize(
    "deployment, message",
    [
        ("services:\n  no-such-service: {}\n", "no service 'no-such-service'"),
        ("hosts: {a: {}}\nservices:\n  text-service: {host: b}\n", "unknown host 'b'"),
        ("services:\n  text-service: {cpus: 1.5}\n", "whole number of CPUs"),
        ("services:\n  text-service: {cpus: 0}\n", "whole number of CPUs"),
        ("services:\n  text-service: {memory: lots}\n", "quantity like 256Mi"),
        ("hosts: [a, b]\n", "must be mappings"),
        ("{{{", "not valid YAML"),
    ],
)
def test_bad_deployments_are_refused_and_nothing_is_written(deployment, message, tmp_path):
    r = deploy(tmp_path, deployment=deployment)
    assert r.exit_code == 2
    assert message in " ".join(r.output.split()), r.output
    assert not (tmp_path / "out").exists()


def arg_values(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def test_peers_are_service_names_the_pod_binds_its_own_address_and_declares_the_cluster_ranges(tmp_path):
    assert deploy(tmp_path, "--namespace", "lab").exit_code == 0
    objs = objects(tmp_path / "out")
    deps = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Deployment"}
    container = deps["compose-post-service"]["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    peers = dict(item.split("=", 1) for item in arg_values(args, "--peers")[0].split(","))
    # Its callees, each by the Service's cluster DNS name and port (the engine resolves them in the pod).
    assert list(peers) == compose.callees(
        next(s for s in topology.load(topology.SOCIALNET)["services"] if s["name"] == "compose-post-service")
    )
    assert peers["text-service"] == "text-service.lab.svc.cluster.local:9000"
    assert arg_values(args, "--bind") == ["$(POD_IP)"]
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in container["env"]
    assert arg_values(args, "--allow-cidr") == ["100.64.0.0/16", "100.96.0.0/12"]
    assert arg_values(args, "--out") == ["/results/compose-post-service.json"]
    # A leaf calls nobody: no --peers at all.
    leaf = next(s["name"] for s in topology.load(topology.SOCIALNET)["services"] if not compose.callees(s))
    assert "--peers" not in deps[leaf]["spec"]["template"]["spec"]["containers"][0]["args"]
    job = next(o for o in objs if o["kind"] == "Job")["spec"]["template"]["spec"]["containers"][0]
    assert job["args"][0] == "http://nginx-web-server.lab.svc.cluster.local:8080/wrk2-api/post/compose"
    assert arg_values(job["args"], "--allow-cidr") == ["100.64.0.0/16", "100.96.0.0/12"]
    config = next(o for o in objs if o["kind"] == "ConfigMap")["data"]
    assert (config["POD_CIDR"], config["SERVICE_CIDR"]) == ("100.64.0.0/16", "100.96.0.0/12")


def test_jaeger_is_a_service_the_services_export_to(tmp_path):
    assert deploy(tmp_path, "--jaeger", deployment=None).exit_code == 0
    objs = objects(tmp_path / "out")
    config = next(o for o in objs if o["kind"] == "ConfigMap")["data"]
    assert config["OTLP_ENDPOINT"] == "http://jaeger.tailscope.svc.cluster.local:4318"
    assert "${env:POD_IP}:4318" in config["jaeger.yaml"] and "127.0.0.1" not in config["jaeger.yaml"]
    jaeger = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "jaeger")
    c = jaeger["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["jaeger"] and c["args"] == ["--config", "file:/etc/tailscope/jaeger.yaml"]
    service = next(o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == "jaeger")
    assert {p["port"] for p in service["spec"]["ports"]} == {4318, 16686}
    r = deploy(tmp_path / "both", "--jaeger", "--otlp-endpoint", "http://198.19.0.5:4318", deployment=None)
    assert r.exit_code == 2 and "not both" in r.output


def test_an_otlp_endpoint_may_be_a_service_name(tmp_path):
    r = deploy(tmp_path, "--otlp-endpoint", "http://otel.observability.svc.cluster.local:4318", deployment=None)
    assert r.exit_code == 0, r.output
    config = next(o for o in objects(tmp_path / "out") if o["kind"] == "ConfigMap")["data"]
    assert config["OTLP_ENDPOINT"] == "http://otel.observability.svc.cluster.local:4318"
    r = deploy(tmp_path / "x", "--otlp-endpoint", "http://a.b.c.svc.cluster.local:4318", deployment=None)
    assert r.exit_code == 2 and "NAME.NAMESPACE.svc.cluster.local" in r.output


@pytest.mark.parametrize(
    "pod, service, message",
    [
        ("100.64.0.1/16", "100.96.0.0/12", "--pod-cidr '100.64.0.1/16': not a network"),
        ("8.8.0.0/16", "100.96.0.0/12", "not a cluster's"),
        ("127.0.0.0/16", "100.96.0.0/12", "not a cluster's"),
        ("100.0.0.0/7", "100.96.0.0/12", "the prefix must be /8 … /24"),
        ("100.64.0.0/26", "100.96.0.0/12", "the prefix must be /8 … /24"),
        ("100.64.0.0/16", "100.64.0.0/10", "--service-cidr '100.64.0.0/10': the prefix must be /12 … /28"),
        ("fd00::/48", "100.96.0.0/12", "IPv4 only"),
        ("lots", "100.96.0.0/12", "not a network"),
        ("100.96.0.0/16", "100.96.0.0/12", "overlap"),
    ],
)
def test_cluster_ranges_are_checked_and_nothing_is_written(tmp_path, pod, service, message):
    r = deploy(tmp_path, deployment=None, cidrs=("--pod-cidr", pod, "--service-cidr", service))
    assert r.exit_code == 2 and message in " ".join(r.output.split()), r.output
    assert not (tmp_path / "out").exists()


def test_the_cluster_ranges_are_required(tmp_path):
    r = deploy(tmp_path, deployment=None, cidrs=())
    assert r.exit_code == 2 and "--pod-cidr" in r.output


def test_an_existing_folder_and_a_non_lab_otlp_endpoint_are_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    r = deploy(tmp_path, deployment=None)
    assert r.exit_code == 2 and "not empty" in r.output
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]
    r = deploy(tmp_path / "x", "--otlp-endpoint", "http://192.0.2.5:4318", deployment=None)
    assert r.exit_code == 2 and "--otlp-endpoint" in r.output


# ---- --out that cannot be written: a clear error, nothing half made (no engine needed) ----------

_OBJS = [{"kind": "Namespace", "metadata": {"name": "tailscope"}}]


@pytest.mark.parametrize(
    ("make_out", "message"),
    [
        (lambda tmp: (tmp / "file").write_text("x") and tmp / "file", "exists and is not a folder"),
        (lambda tmp: (tmp / "file").write_text("x") and tmp / "file" / "sub", "cannot create a folder there"),
        (lambda tmp: Path("/proc/tailscope-not-writable/out"), "cannot create a folder there"),
    ],
    ids=["a regular file", "under a regular file", "under a read-only parent"],
)
def test_an_out_folder_that_cannot_be_written_is_a_clear_error(make_out, message, tmp_path):
    out = make_out(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(k8s.DeployError, match=message):
        k8s.write(_OBJS, out)
    assert sorted(tmp_path.rglob("*")) == before  # no temp folder, no half set


def test_the_capstones_split_selects_each_groups_nodes_and_passes_the_schemas(tmp_path):
    """deployments/socialnet-3-hosts.yaml: every pod on the nodes of its group (front, logic, storage)."""
    from tailscope.lab import deployment as dep_mod

    split = Path(__file__).resolve().parents[2] / "deployments" / "socialnet-3-hosts.yaml"
    r = deploy(tmp_path, deployment=split.read_text())
    assert r.exit_code == 0, r.output
    placed = dep_mod.load(split)
    deps = [o for o in objects(tmp_path / "out") if o["kind"] == "Deployment"]
    assert len(deps) == 12
    for o in deps:
        group = placed.services[o["metadata"]["name"]].host
        assert o["spec"]["template"]["spec"]["nodeSelector"] == {"tailscope.io/host-group": group}
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    version = kubernetes_validate.utils.latest_version()
    for o in objects(tmp_path / "out"):
        kubernetes_validate.validate(o, version, strict=True)
