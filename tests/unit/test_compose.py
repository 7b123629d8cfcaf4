"""`tailscope deploy compose`: one container per service on a lab-range network, peers by
their Compose names in the order the call graph needs, CPU pinning from the deployment,
the load generator as a one-shot service; the file round-trips through docker-compose's
own validation when the tool is installed (`scripts/bootstrap --docker`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import needs_engine
from tailscope.cli import main
from tailscope.lab import compose, topology

pytestmark = needs_engine("tailscope-svc")  # topology validation runs tailscope-svc

DEPLOYMENT = """
name: socialnet-3-hosts
hosts:
  front: {cpus: "0"}
  logic: {cpus: "1"}
  storage: {}
services:
  nginx-web-server: {host: front}
  compose-post-service: {host: logic}
  post-storage-service: {host: storage, pin: "1"}
"""


def deploy(tmp_path: Path, *extra: str, deployment: str | None = None):
    args = ["deploy", "compose", "--topology", str(topology.SOCIALNET), "--out", str(tmp_path / "out"), *extra]
    if deployment is not None:
        (tmp_path / "deployment.yaml").write_text(deployment)
        args += ["--deployment", str(tmp_path / "deployment.yaml")]
    return CliRunner().invoke(main, args)


def spec(tmp_path: Path) -> dict:
    return yaml.safe_load((tmp_path / "out" / "docker-compose.yml").read_text())


def arg(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_one_container_per_service_on_a_lab_network_with_peers_by_name(tmp_path):
    r = deploy(tmp_path)
    assert r.exit_code == 0, r.output
    s = spec(tmp_path)
    names = topology.services(topology.load(topology.SOCIALNET))
    assert set(s["services"]) == {*names, "load"}
    assert s["networks"]["tailscope"]["ipam"]["config"] == [{"subnet": "198.19.128.0/24"}]
    assert (tmp_path / "out" / "topology.json").is_file() and (tmp_path / "out" / "results").is_dir()
    addresses = set()
    for n in names:
        svc = s["services"][n]
        cmd = svc["command"]
        assert svc["entrypoint"] == ["tailscope-svc"] and arg(cmd, "--service") == n
        address = svc["networks"]["tailscope"]["ipv4_address"]
        assert address.startswith("198.19.128.") and arg(cmd, "--bind") == address
        addresses.add(address)
        assert arg(cmd, "--out") == f"/results/{n}.json"
        assert svc["dns"] == ["127.0.0.1"]  # names outside the graph fail at once, never leave the machine
        # Peers by Compose service name, each started before its caller (Docker's DNS answers running containers).
        if "--peers" in cmd:
            peers = dict(item.split("=", 1) for item in arg(cmd, "--peers").split(","))
            for peer, at in peers.items():
                assert at.split(":")[0] == peer and peer in s["services"]
            assert svc["depends_on"] == list(peers)
    assert len(addresses) == len(names)
    front = s["services"]["nginx-web-server"]
    assert "--peers" in front["command"] and "compose-post-service" in front["depends_on"]
    load = s["services"]["load"]
    assert load["entrypoint"] == ["tailscope-load"] and load["profiles"] == ["load"]
    assert load["command"][0] == "http://nginx-web-server:8080/wrk2-api/post/compose"
    assert arg(load["command"], "--out") == "/results/load.json"


def test_the_command_line_is_the_one_the_kubernetes_manifests_use(tmp_path):
    from tailscope.lab import k8s, svc_command

    doc = topology.load(topology.SOCIALNET)
    objs = k8s.manifests(doc, pod_cidr="198.19.132.0/24", service_cidr="198.19.133.0/24")
    pod = next(o for o in objs if o["kind"] == "Deployment")
    args = pod["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:6] == [
        "--topology",
        svc_command.TOPOLOGY_IN_CONTAINER,
        "--service",
        pod["metadata"]["name"],
        "--model",
        "coroutine",
    ]
    s = compose.compose(doc, cpus=[0])
    name = pod["metadata"]["name"]
    assert s["services"][name]["command"][:6] == args[:6]


def test_cpusets_come_from_the_deployment(tmp_path):
    r = deploy(tmp_path, deployment=DEPLOYMENT)
    assert r.exit_code == 0, r.output
    s = spec(tmp_path)
    assert s["services"]["nginx-web-server"]["cpuset"] == "0"  # its host group's cpus
    assert s["services"]["compose-post-service"]["cpuset"] == "1"
    assert s["services"]["post-storage-service"]["cpuset"] == "1"  # its own pin


def test_cpusets_wrap_round_the_machines_cores_without_a_deployment():
    doc = topology.load(topology.SOCIALNET)
    s = compose.compose(doc, cpus=[2, 5])
    sets = [s["services"][n]["cpuset"] for n in topology.services(doc)]
    assert sets[:4] == ["2", "5", "2", "5"]


def test_otlp_export_is_passed_when_asked(tmp_path):
    r = deploy(tmp_path, "--otlp-endpoint", "http://198.19.128.5:4318", "--trace-sample", "0.5")
    assert r.exit_code == 0, r.output
    cmd = spec(tmp_path)["services"]["nginx-web-server"]["command"]
    assert arg(cmd, "--otlp-endpoint") == "http://198.19.128.5:4318" and arg(cmd, "--trace-sample") == "0.5"
    assert "--otlp-endpoint" not in spec_without_otlp(tmp_path)["services"]["nginx-web-server"]["command"]


def spec_without_otlp(tmp_path: Path) -> dict:
    out = tmp_path / "plain"
    r = CliRunner().invoke(main, ["deploy", "compose", "--topology", str(topology.SOCIALNET), "--out", str(out)])
    assert r.exit_code == 0, r.output
    return yaml.safe_load((out / "docker-compose.yml").read_text())


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--subnet", "203.0.113.0/24"], "inside the lab range"),
        (["--subnet", "198.19.128.0/30"], "too small"),
        (["--subnet", "198.19.128.1/24"], "not a network"),
        (["--otlp-endpoint", "http://192.0.2.1:4318"], "--otlp-endpoint"),
    ],
)
def test_bad_input_is_refused_with_nothing_written(tmp_path, extra, message):
    r = deploy(tmp_path, *extra)
    assert r.exit_code != 0 and message in r.output, r.output
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".out.tmp-*"))


def test_an_existing_folder_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("mine")
    r = deploy(tmp_path)
    assert r.exit_code != 0 and "not an empty folder" in r.output
    assert (tmp_path / "out" / "x").read_text() == "mine"


def test_the_file_passes_docker_compose_config(tmp_path):
    tool = shutil.which("docker-compose")
    if tool is None:
        pytest.skip("docker-compose is not installed (scripts/bootstrap --docker installs Debian's)")
    assert deploy(tmp_path, deployment=DEPLOYMENT).exit_code == 0
    out = tmp_path / "out"
    r = subprocess.run([tool, "--profile", "load", "config"], cwd=out, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    resolved = yaml.safe_load(r.stdout)
    assert set(resolved["services"]) == set(spec(tmp_path)["services"])
    assert resolved["services"]["nginx-web-server"]["cpuset"] == "0"
    assert resolved["networks"]["tailscope"]["ipam"]["config"] == [{"subnet": "198.19.128.0/24"}]
    # A broken file fails the same check: the test can fail.
    (out / "docker-compose.yml").write_text(
        (out / "docker-compose.yml").read_text().replace("cpuset:", "cpuset_typo:", 1)
    )
    assert subprocess.run([tool, "config", "-q"], cwd=out, capture_output=True, timeout=60).returncode != 0


def test_callees_are_found_in_call_stages_and_in_groups():
    doc = topology.load(topology.SOCIALNET)
    by_name = {s["name"]: s for s in doc["services"]}
    assert compose.callees(by_name["compose-post-service"]) == [
        "text-service",
        "user-service",
        "media-service",
        "unique-id-service",
        "post-storage-service",
        "user-timeline-service",
        "home-timeline-service",
    ]
    assert compose.callees(by_name["nginx-web-server"]) == ["compose-post-service"]


def test_a_jaeger_container_is_the_services_otlp_endpoint_by_name(tmp_path):
    doc = topology.load(topology.SOCIALNET)
    options = compose.ComposeOptions(jaeger=True, trace_sample=0.1)
    s = compose.compose(doc, options=options, cpus=[0])
    jaeger = s["services"]["jaeger"]
    address = jaeger["networks"]["tailscope"]["ipv4_address"]
    assert jaeger["entrypoint"] == ["jaeger"] and address.startswith("198.19.128.")
    assert address not in {
        svc["networks"]["tailscope"]["ipv4_address"] for name, svc in s["services"].items() if name != "jaeger"
    }
    for n in topology.services(doc):
        cmd = s["services"][n]["command"]
        assert arg(cmd, "--otlp-endpoint") == "http://jaeger:4318"
        assert "jaeger" in s["services"][n]["depends_on"]  # its name resolves when the service starts
    assert compose.jaeger_query_url(s) == f"http://{address}:16686"
    compose.write(doc, s, tmp_path / "out")
    config = (tmp_path / "out" / "jaeger.yaml").read_text()
    assert f"endpoint: {address}:4318" in config and f"endpoint: {address}:16686" in config
    # Tracing off: no exporter at all (the engine refuses an endpoint with nothing to send).
    off = compose.compose(doc, options=compose.ComposeOptions(jaeger=True, trace_sample=0.0), cpus=[0])
    assert "--otlp-endpoint" not in off["services"]["nginx-web-server"]["command"]
    with pytest.raises(compose.DeployError, match="not both"):
        compose.compose(doc, options=compose.ComposeOptions(jaeger=True, otlp_endpoint="http://198.19.0.5:4318"))


SPLIT = Path(__file__).resolve().parents[2] / "deployments" / "socialnet-3-hosts.yaml"


def test_the_split_places_each_service_by_its_group_for_compose_and_swarm(tmp_path):
    """deployments/socialnet-3-hosts.yaml fixes no CPUs: each group's are read from this machine (one
    plan, lab/groups.py), every container of a group gets them as its cpuset; the Swarm stack places
    each service on its group's nodes by label, DNS round robin, no cpuset (Swarm forbids it)."""
    from tailscope.lab import deployment as dep_mod
    from tailscope.lab import groups

    r = deploy(tmp_path, deployment=SPLIT.read_text())
    assert r.exit_code == 0, r.output
    plan, load = groups.plan_cpus(["front", "logic", "storage"], groups.cores_from_sysfs())
    assert "groups: front on CPU " + dep_mod.format_cpu_list(plan["front"]) in " ".join(r.output.split())
    placed = dep_mod.load(SPLIT)
    s = spec(tmp_path)
    for n, svc in placed.services.items():
        assert s["services"][n]["cpuset"] == dep_mod.format_cpu_list(plan[svc.host]), n
    assert s["services"]["load"].get("cpuset") == (dep_mod.format_cpu_list(load) if load else None)
    stack = yaml.safe_load((tmp_path / "out" / compose.STACK_FILE).read_text())
    assert stack["version"] == "3.8" and set(stack["services"]) == set(s["services"])
    assert stack["networks"]["tailscope"]["driver"] == "overlay"
    assert stack["networks"]["tailscope"]["ipam"]["config"] == [{"subnet": "198.19.128.0/24"}]
    for n, svc in placed.services.items():
        st = stack["services"][n]
        assert st["deploy"]["placement"]["constraints"] == [f"node.labels.tailscope.group == {svc.host}"]
        assert st["deploy"]["endpoint_mode"] == "dnsrr" and "cpuset" not in st
        # The same command line but the address: a Swarm task binds the one it was given.
        cmd = s["services"][n]["command"]
        i = cmd.index("--bind")
        assert st["command"] == cmd[:i] + cmd[i + 2 :]
        assert st["entrypoint"][:2] == ["/bin/sh", "-c"] and "--bind" in st["entrypoint"][2]
    load_deploy = stack["services"]["load"]["deploy"]
    assert load_deploy["placement"]["constraints"] == ["node.labels.tailscope.group == load"]
    assert load_deploy["replicas"] == 0 and load_deploy["restart_policy"] == {"condition": "none"}


def test_without_groups_no_stack_file_is_written(tmp_path):
    assert deploy(tmp_path).exit_code == 0
    assert not (tmp_path / "out" / compose.STACK_FILE).exists()


def _stack_config_tool() -> str | None:
    """A docker client with `docker stack config` (Docker 23+), which validates a stack file without a
    daemon or a Swarm: Debian's 20.10 client lacks it."""
    for candidate in ("/usr/local/bin/docker", shutil.which("docker")):
        if candidate and Path(candidate).exists():
            r = subprocess.run([candidate, "stack", "config", "--help"], capture_output=True, text=True, timeout=30)
            if r.returncode == 0 and "--compose-file" in r.stdout:
                return candidate
    return None


def test_the_stack_file_passes_docker_stack_config_and_the_compose_file_docker_compose_config(tmp_path):
    tool = _stack_config_tool()
    if tool is None:
        pytest.skip("no docker client with `docker stack config` (Docker 23 or later) is installed")
    assert deploy(tmp_path, deployment=SPLIT.read_text()).exit_code == 0
    out = tmp_path / "out"
    env = {"PATH": "/usr/bin:/bin", "DOCKER_HOST": f"unix://{tmp_path / 'no-daemon.sock'}"}  # never a daemon
    r = subprocess.run(
        [tool, "stack", "config", "-c", compose.STACK_FILE],
        cwd=out,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    resolved = yaml.safe_load(r.stdout)
    front = resolved["services"]["nginx-web-server"]
    assert front["deploy"]["placement"]["constraints"] == ["node.labels.tailscope.group == front"]
    assert front["deploy"]["endpoint_mode"] == "dnsrr"
    assert '"$@"' in front["entrypoint"][2]  # $$ is Compose's escape: the shell sees $@
    # The Compose file (with cpusets) is no stack file: the same check refuses it — the test can fail.
    bad = subprocess.run(
        [tool, "stack", "config", "-c", "docker-compose.yml"],
        cwd=out,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bad.returncode != 0
    compose_tool = shutil.which("docker-compose")
    if compose_tool:
        c = subprocess.run(
            [compose_tool, "--profile", "load", "config", "-q"], cwd=out, capture_output=True, timeout=60
        )
        assert c.returncode == 0, c.stderr
