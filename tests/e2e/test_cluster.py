"""`tailscope cluster up|run|down` for real (opt-in: `make cluster-e2e`, which sets
TAILSCOPE_CLUSTER_E2E=1): a private Docker daemon, the image built from Debian packages
and the engines, socialnet in containers whose peers are reached by name, the load from a
container — and afterwards nothing left: no daemon, no bridge, no folder, iptables as before.
Skips with the reason when the opt-in, root, or the container tools are missing."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest

from conftest import REPO, needs_engine

pytestmark = [needs_engine("tailscope-svc", "tailscope-load"), pytest.mark.serial]


_DAEMON_CHECKED: list[str | None] = []


def _daemon_start_reason() -> str | None:
    """Whether a private daemon starts on this machine at all (checked once): a kernel or cgroup
    setup dockerd cannot run on is a reason to skip, said as dockerd said it; anything that fails
    after the daemon started is a failure of tailscope."""
    if not _DAEMON_CHECKED:
        from tailscope.lab import cluster

        folder = Path(tempfile.mkdtemp(prefix="probe-", dir=cluster.default_root().parent))
        state = cluster.ClusterState(prefix="probe", folder=str(folder), docker_host="", daemon_pid=None)
        try:
            cluster.start_private_daemon(state)
            _DAEMON_CHECKED.append(None)
        except cluster.ClusterError as e:
            _DAEMON_CHECKED.append(f"Docker cannot start here: {e}")
        finally:
            cluster.stop_private_daemon(state)
            shutil.rmtree(folder, ignore_errors=True)
    return _DAEMON_CHECKED[0]


def _skip_reason() -> str | None:
    if os.environ.get("TAILSCOPE_CLUSTER_E2E") != "1":
        return "opt-in: `make cluster-e2e` (starts a Docker daemon and builds an image)"
    if os.geteuid() != 0:
        return "needs root to start a Docker daemon"
    for tool in ("dockerd", "docker-compose", "mmdebstrap", "iptables-save"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (scripts/bootstrap --docker)"
    if Path("/sys/class/net/docker0").exists():
        return "a docker0 bridge exists: another Docker daemon runs here"
    return _daemon_start_reason()


def cli(*args: str, timeout_s: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python"), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "tailscope.cli", *args], capture_output=True, text=True, env=env, timeout=timeout_s
    )


def iptables() -> str:
    return subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout


def test_socialnet_runs_in_containers_and_leaves_nothing_behind(tmp_path):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    before = iptables()
    forward_before = Path("/proc/sys/net/ipv4/ip_forward").read_text()
    up = cli(
        "cluster", "up", "--topology", str(REPO / "topologies/socialnet.yaml"), "--rate", "100", "--duration-s", "3"
    )
    found = re.search(r"up: (tsc[0-9a-f]+)", up.stdout)
    prefix = found.group(1) if found else None
    try:
        assert up.returncode == 0 and prefix, up.stdout + up.stderr
        run = cli("cluster", "run", prefix, "--results-dir", str(tmp_path))
        assert run.returncode == 0, run.stdout + run.stderr
        out = tmp_path / f"cluster-{prefix}"
        load = json.loads((out / "load.json").read_text())
        assert load["config"]["host"] == "nginx-web-server" and load["config"]["address"].startswith("198.19.128.")
        assert load["load"]["requests_completed"] > 0 and load["load"]["errors_total"] == 0
        front = json.loads((out / "nginx-web-server.json").read_text())
        resolved = front["config"]["peers_resolved"]["compose-post-service"]
        assert resolved["host"] == "compose-post-service" and resolved["rule"] == "lab subnet 198.18.0.0/15"
        assert len(list(out.glob("*.json"))) == 13  # 12 services and the load generator
    finally:
        if prefix:
            down = cli("cluster", "down", prefix)
            assert down.returncode == 0, down.stdout + down.stderr
    root = Path(os.environ.get("TAILSCOPE_CLUSTER_DIR", "/var/tmp/tailscope-cluster"))
    assert not (root / prefix).exists()
    assert not Path("/sys/class/net/docker0").exists()
    assert subprocess.run(["pgrep", "-f", str(root / prefix)], capture_output=True).returncode == 1  # no daemon
    assert iptables() == before
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text() == forward_before


def test_a_killed_container_fails_its_calls_and_the_graph_recovers_when_it_restarts(tmp_path):
    """The RPC client resolves a peer's name again on every reconnect: while the container is
    gone its name does not resolve and the calls fail (counted by the load generator); once it
    runs again the next connect finds it."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from tailscope.lab import cluster

    up = cli(
        "cluster", "up", "--topology", str(REPO / "topologies/socialnet.yaml"), "--rate", "100", "--duration-s", "3"
    )
    found = re.search(r"up: (tsc[0-9a-f]+)", up.stdout)
    prefix = found.group(1) if found else None
    try:
        assert up.returncode == 0 and prefix, up.stdout + up.stderr
        state = cluster.ClusterState.load(cluster.default_root() / prefix)
        results = state.compose_dir / "results" / "load.json"

        def load_errors() -> tuple[int, int]:
            cluster.compose(state, "--profile", "load", "run", "--rm", "--no-deps", "load")
            doc = json.loads(results.read_text())
            return doc["load"]["errors_total"], doc["load"]["requests_completed"]

        # The front's own peer: its failures reach the HTTP answers the load generator counts
        # (a deeper service's are counted by its caller's document, not as HTTP errors).
        victim = f"{prefix}_compose-post-service_1"
        cluster.docker(state, "kill", victim)
        errors, _ = load_errors()
        assert errors > 0  # counted (timeouts or error answers), and the front keeps running
        cluster.docker(state, "start", victim)
        errors, completed = load_errors()
        assert errors == 0 and completed > 0
    finally:
        if prefix:
            down = cli("cluster", "down", prefix)
            assert down.returncode == 0, down.stdout + down.stderr


def test_the_containers_study_stores_containers_beside_native_in_one_run(tmp_path):
    """`tailscope bench containers` (tiny): both forms of both quick models and the two pings in the
    DuckDB store, the section's table from them, and nothing left behind."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    before = iptables()
    r = cli("bench", "containers", "--scale", "0.2", "--results", str(tmp_path), timeout_s=1800)
    assert r.returncode == 0, r.stdout + r.stderr
    [db] = list(tmp_path.glob("*.duckdb"))
    con = duckdb.connect(str(db), read_only=True)
    points = {p for (p,) in con.execute("SELECT point FROM documents WHERE study = 'containers'").fetchall()}
    con.close()
    for model in ("std-async", "coroutine"):
        assert {
            f"{model}/native",
            f"{model}/native-graph",
            f"{model}/containers",
            f"{model}/containers-graph",
        } <= points
    assert {"ping/native", "ping/containers", "traces/containers"} <= points and "unavailable" not in points
    from tailscope.lab import tools

    con = duckdb.connect(str(db), read_only=True)
    [(traced,)] = con.execute(
        "SELECT document FROM documents WHERE study = 'containers' AND point = 'traces/containers'"
    ).fetchall()
    con.close()
    traced = json.loads(traced) if isinstance(traced, str) else traced
    try:
        tools.tool_path("jaeger")
        # The traced run's services exported to the Jaeger container by name; its traces were fetched.
        assert traced["traces"] > 0 and {"nginx-web-server", "compose-post-service"} <= set(traced["services"])
        report = re.search(r"report: (\S+report\.html)", r.stdout)
        assert report and (Path(report.group(1)).parent / traced["file"]).is_file(), r.stdout
    except tools.ToolUnavailable as e:
        assert traced["unavailable"] == str(e)
    found = re.search(r"report: (\S+report\.html)", r.stdout)
    assert found, r.stdout
    page = Path(found.group(1)).read_text()
    assert "Containers ÷ native, per model" in page and "containers ÷ native" in page
    assert "traces from a Jaeger container: unavailable" in page or "fetched from it" in page
    assert iptables() == before
    assert not Path("/sys/class/net/docker0").exists()
    root = Path(os.environ.get("TAILSCOPE_CLUSTER_DIR", "/var/tmp/tailscope-cluster"))
    assert not [p for p in root.glob("tsc*")], list(root.glob("tsc*"))


def test_the_kubernetes_manifests_run_on_docker_with_jaeger_and_leave_nothing_behind(tmp_path):
    """`deploy k8s` then `cluster k8s`: each Deployment's pod spec run as a kubelet would (same image
    name, command line, env, Service DNS names), the load Job against the front's Service name with
    0 errors, every service's document, and — where the bootstrap built Jaeger — the traces of the
    run from the Jaeger pod the services exported to by its Service name."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from tailscope.lab import tools

    try:
        tools.tool_path("jaeger")
        jaeger = True
    except tools.ToolUnavailable as e:  # the pods and the Job are still tested; the traces part says why not
        print(f"without the Jaeger pod: {e}")
        jaeger = False
    before = iptables()
    forward_before = Path("/proc/sys/net/ipv4/ip_forward").read_text()
    manifests = tmp_path / "k8s"
    w = cli(
        "deploy",
        "k8s",
        "--topology",
        str(REPO / "topologies/socialnet.yaml"),
        "--out",
        str(manifests),
        "--pod-cidr",
        "198.19.132.0/24",
        "--service-cidr",
        "198.19.133.0/24",
        "--image",
        "tailscope-k8s:e2e",
        "--rate",
        "100",
        "--duration-s",
        "3",
        "--trace-sample",
        "0.2",
        *(["--jaeger"] if jaeger else []),
    )
    assert w.returncode == 0, w.stdout + w.stderr
    r = cli("cluster", "k8s", str(manifests), "--results-dir", str(tmp_path / "results"))
    assert r.returncode == 0, r.stdout + r.stderr
    found = re.search(r"run: (tsc[0-9a-f]+)", r.stdout)
    assert found, r.stdout
    prefix = found.group(1)
    out = tmp_path / "results" / f"k8s-{prefix}"
    load = json.loads((out / "load.json").read_text())
    fqdn = ".tailscope.svc.cluster.local"
    assert load["config"]["host"] == "nginx-web-server" + fqdn and load["config"]["address"].startswith("198.19.132.")
    assert load["load"]["requests_completed"] > 0 and load["load"]["errors_total"] == 0
    front = json.loads((out / "nginx-web-server.json").read_text())
    resolved = front["config"]["peers_resolved"]["compose-post-service"]
    assert resolved["host"] == "compose-post-service" + fqdn and resolved["address"].startswith("198.19.132.")
    assert len([p for p in out.glob("*.json") if p.stem.endswith("-service") or p.stem == "nginx-web-server"]) == 12
    if jaeger:
        traces = json.loads((out / "traces.jaeger.json").read_text())["data"]
        assert traces, "no trace arrived in the Jaeger pod"
        services = {p["serviceName"] for t in traces for p in t["processes"].values()}
        assert {"nginx-web-server", "compose-post-service"} <= services
        export = front["services"]["nginx-web-server"]["otlp_export"]
        assert export["endpoint_resolved"]["host"] == "jaeger" + fqdn and export["spans_exported"] > 0
    root = Path(os.environ.get("TAILSCOPE_CLUSTER_DIR", "/var/tmp/tailscope-cluster"))
    assert not (root / prefix).exists()
    assert not Path("/sys/class/net/docker0").exists()
    assert subprocess.run(["pgrep", "-f", str(root / prefix)], capture_output=True).returncode == 1  # no daemon
    assert iptables() == before
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text() == forward_before


@needs_engine("tailscope-critpath")  # the study's namespace points analyse their traces
def test_the_isolation_split_runs_as_container_groups_on_their_cpusets_and_is_stored(tmp_path, monkeypatch):
    """The isolation study, tiny (one model, one connection count, a second of load per point): the
    split on namespace hosts and as three container groups in one run. Each container's engine runs
    on exactly its group's CPUs (read from the kernel while it ran), both arms' points and the
    containers ÷ namespace hosts ratios are in the DuckDB store and the report, and nothing is left."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from tailscope.lab import deployment, groups, labhosts
    from tailscope.runner import run_studies
    from tailscope.store import Store
    from tailscope.studies import isolation

    monkeypatch.setattr(labhosts, "STATE_DIR", tmp_path / "state")
    before = iptables()
    results = tmp_path / "results"
    try:
        run_id, report, failures, _database = run_studies(
            [isolation.STUDY],
            form="quick",
            results_dir=results,
            options={"isolation_models": ["coroutine"], "isolation_connections": [8], "scale": 0.5},
        )
    finally:
        if labhosts.state(isolation.LAB_PREFIX).namespaces:
            labhosts.down(isolation.LAB_PREFIX, stop_processes=True)
    assert not failures, failures
    with Store(results / "tailscope.duckdb", read_only=True) as store:
        docs = {d.point: d.document for d in store.documents(run_id, "isolation")}
    assert {"namespaces/coroutine/c8", "containers/coroutine/c8"} <= set(docs)
    arm = docs["analysis"]["containers"]
    assert arm["unavailable"] is None, arm["unavailable"]
    # The groups' CPUs were read from this machine (the file fixes none), one plan for both arms.
    plan = groups.plan_cpus(["front", "logic", "storage"], groups.cores_from_sysfs())[0]
    assert arm["groups"]["groups"] == {g: list(c) for g, c in plan.items()}
    applied = arm["applied"]
    assert len(applied) == 12
    for service, a in applied.items():
        want = deployment.format_cpu_list(plan[a["group"]])
        assert a["cpuset"] == want and a["cpus_allowed"] == want, (service, a)
    for point in ("namespaces/coroutine/c8", "containers/coroutine/c8"):
        assert docs[point]["load"]["achieved_per_s"] > 0 and docs[point]["window_cpu"]["cpu_s"] is not None
    text = html.unescape(" ".join(report.read_text().split()))  # the page escapes ' as &#39;
    assert "The split as container groups ÷ as namespace hosts" in text
    assert "12 of 12 containers run on exactly their group's CPUs" in text
    assert iptables() == before
    assert not Path("/sys/class/net/docker0").exists()
    root = Path(os.environ.get("TAILSCOPE_CLUSTER_DIR", "/var/tmp/tailscope-cluster"))
    assert not [p for p in root.glob("tsc*")], list(root.glob("tsc*"))
