"""tailscope-svc at addresses: `--all --deployment` (each service on its host), the
connect allow-list, and the RPC transport's link-delay shim (docs/lab-hosts.md).

The graph is the passthrough topology (front → backend), split over two hosts:

* ``loopback``: two "hosts" in this namespace at 127.0.0.1 and 127.0.0.2 (``netns: null``),
  no root needed;
* ``namespaces``: two lab hosts (network namespaces on a bridge, made here with
  ``tailscope.lab.labhosts`` under their own prefix and subnet, removed afterwards even on
  failure); needs root and iproute2, skipped with the reason otherwise.

Refused addresses (192.0.2.1, RFC 5737's documentation range) are refused before any
socket exists: no test sends a packet there.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, engine_path, needs_engine
from tailscope.lab import labhosts, topology
from tailscope.lab.engines import serve

# Lab namespaces (and their global list) are shared by the whole machine: these tests run
# alone, after the parallel part of `make test-python` (docs/testing.md).
pytestmark = pytest.mark.serial


SVC = engine_path("tailscope-svc")
PASSTHROUGH = REPO / "topologies" / "passthrough.yaml"
PREFIX = "tsd"  # this file's lab: never a lab the user has up (ts) nor test_labhosts' (tst)
SUBNET = "198.19.253.0/28"
ONE_WAY_DELAY_US = 2000
# HdrHistogram keeps 3 significant digits: a recorded value may read up to 0.1 % low.
HDR_TOLERANCE = 0.999
NOT_ROOT = os.geteuid() != 0 or shutil.which("ip") is None


@pytest.fixture(scope="module")
def topo_json(tmp_path_factory) -> Path:
    return topology.to_engine_json(PASSTHROUGH, tmp_path_factory.mktemp("topo") / "passthrough.json")


@dataclass
class TwoHosts:
    front: str  # address of the host of the front
    logic: str  # address of the host of the backend
    front_netns: str | None
    logic_netns: str | None

    def run_on_front(self) -> list[str]:
        """argv prefix that runs a command on the front's host."""
        return labhosts.exec_args(self.front_netns) if self.front_netns else []


@contextmanager
def two_hosts(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TwoHosts]:
    if kind == "loopback":
        yield TwoHosts("127.0.0.1", "127.0.0.2", None, None)
        return
    if NOT_ROOT:
        pytest.skip("lab hosts need root and iproute2 (`ip`)")
    monkeypatch.setattr(labhosts, "STATE_DIR", tmp_path / "lab-state")
    config = labhosts.validate(2, SUBNET, PREFIX)
    try:
        labhosts.up(config)
        yield TwoHosts(
            str(config.host_address(1)), str(config.host_address(2)), config.namespace(1), config.namespace(2)
        )
    finally:
        labhosts.down(PREFIX, stop_processes=True)  # also what a failed `up` left


def deployment(hosts: TwoHosts, *, delay_us: int = ONE_WAY_DELAY_US) -> dict:
    return {
        "name": "passthrough-2-hosts",
        "hosts": {
            "front": {"netns": hosts.front_netns, "address": hosts.front},
            "logic": {"netns": hosts.logic_netns, "address": hosts.logic},
        },
        "links": [{"between": ["front", "logic"], "delay_us": delay_us, "jitter_us": 0}],
        "services": {"front": {"host": "front"}, "backend": {"host": "logic"}},
    }


def write_json(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


def get(address: str, port: int) -> int:
    """One request to the front; a hang ends in the 5 s socket timeout (an exception), not a status."""
    conn = http.client.HTTPConnection(address, port, timeout=5)
    try:
        conn.request("GET", "/passthrough")
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def ping(hosts: TwoHosts, port: int, *extra: str) -> dict:
    """`tailscope-svc --ping` from the front's host to the backend; its result document."""
    cmd = [
        *hosts.run_on_front(),
        str(SVC),
        "--ping",
        str(port),
        "--ping-host",
        hosts.logic,
        "--ping-calls",
        "30",
        "--ping-warmup",
        "3",
        *extra,
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@needs_engine("tailscope-svc")
@pytest.mark.parametrize("kind", ["loopback", "namespaces"])
def test_a_graph_across_two_hosts_calls_at_addresses_delays_its_link_and_recovers(
    kind, topo_json, tmp_path, monkeypatch
):
    out = tmp_path / "graph.json"
    with two_hosts(kind, tmp_path, monkeypatch) as hosts:
        dep = write_json(tmp_path / "deployment.json", deployment(hosts))
        args = ["--topology", str(topo_json), "--all", "--deployment", str(dep), "--model", "coroutine"]
        # A killed service's listener stays open in the supervisor, so a call to it waits (in the
        # backlog) rather than being refused: the call timeout must end it before the restart.
        args += ["--timeout-ms", "300", "--restart-ms", "1500", "--out", str(out)]
        with serve("tailscope-svc", args, stop_timeout_s=30.0) as srv:
            ready = srv.ready
            assert ready["front_address"] == hosts.front
            assert ready["addresses"] == {"front": hosts.front, "backend": hosts.logic}
            # An RPC across the two hosts: the front calls the backend at its host's address.
            assert get(hosts.front, ready["listening"]) == 200

            # The shim, measured by the ping client from the front's host: its own side holds each
            # request 2 ms, the backend holds each answer 2 ms (its link table matches the front's
            # address), so no round trip can be shorter than 4 ms.
            delayed = ping(hosts, ready["ports"]["backend"], "--link-delay", f"{hosts.logic}={ONE_WAY_DELAY_US}")
            assert delayed["ping"]["link_delay"] == {
                "address": hosts.logic,
                "one_way_delay_us": ONE_WAY_DELAY_US,
                "jitter_us": 0,
            }
            assert delayed["ping"]["ok"] == 30
            rtt = delayed["ping"]["rtt"]
            assert rtt["min"] >= 2 * ONE_WAY_DELAY_US * 1000 * HDR_TOLERANCE, rtt
            # Only the backend's side: at least one one-way delay. The difference is the RTT the
            # client's side added, which the study compares with what was configured.
            one_side = ping(hosts, ready["ports"]["backend"])
            assert one_side["ping"]["rtt"]["min"] >= ONE_WAY_DELAY_US * 1000 * HDR_TOLERANCE
            added_us = (rtt["percentiles"]["50"] - one_side["ping"]["rtt"]["percentiles"]["50"]) / 1000
            print(f"{kind}: client-side shim added {added_us:.0f} µs to the p50 RTT (configured {ONE_WAY_DELAY_US} µs)")

            # The backend's host loses its service: the front answers 5xx (its call fails: unavailable
            # on the broken connection, or a timeout), and serves again once the supervisor has
            # restarted it (--restart-ms).
            os.kill(ready["pids"]["backend"], signal.SIGKILL)
            time.sleep(0.1)
            assert get(hosts.front, ready["listening"]) >= 500
            deadline = time.monotonic() + 15
            while get(hosts.front, ready["listening"]) != 200:
                if time.monotonic() > deadline:
                    pytest.fail("the graph did not recover after the backend was restarted")
                time.sleep(0.1)
        assert srv.proc.returncode == 0, srv.stderr_text()

    doc = json.loads(out.read_text())
    backend, front = doc["services"]["backend"], doc["services"]["front"]
    assert backend["host"] == "logic" and front["host"] == "front"
    assert backend["netns"] == hosts.logic_netns and front["netns"] == hosts.front_netns
    assert backend["address"] == hosts.logic and backend["port"] == ready["ports"]["backend"]
    # The link table each end applied: the other end's address, 2 ms.
    assert backend["link_delays"] == [{"address": hosts.front, "delay_us": ONE_WAY_DELAY_US, "jitter_us": 0}]
    assert front["link_delays"] == [{"address": hosts.logic, "delay_us": ONE_WAY_DELAY_US, "jitter_us": 0}]
    assert front["channel"]["delayed_batches"] >= 1
    assert doc["deployment"]["links"][0]["between"] == ["front", "logic"]
    assert [r["service"] for r in doc["totals"]["restarts"]] == ["backend"]
    assert front["counters"]["downstream_failures"] >= 1, front["counters"]


def cached_read_topology(path: Path) -> Path:
    """passthrough with real store reads behind the backend: a Redis get of a user's key (a miss,
    then its on_miss set) and a document-store find of the user (PostgreSQL, preloaded)."""
    doc = topology.load(PASSTHROUGH)
    backend = next(s for s in doc["services"] if s["name"] == "backend")
    backend["model"] = "std-thread"  # a blocking store client (the event-loop models' are another file's)
    latency = {"kind": "constant", "us": 100}
    set_stage = {
        "store": {"span": "redis_set", "system": "redis", "op": "set", "key": "user:{user}", "latency": latency}
    }
    get_stage = {"span": "redis_get", "system": "redis", "op": "get", "key": "user:{user}", "latency": latency}
    get_stage |= {"hit_ratio": 0.5, "on_miss": [set_stage]}
    find = {"span": "users_find", "system": "mongodb", "op": "find", "collection": "users", "key": "user:{user}"}
    backend["endpoints"][0]["stages"] += [{"store": get_stage}, {"store": find | {"latency": latency}}]
    return topology.write_json(topology.validate(doc, "passthrough with a Redis read"), path)


@needs_engine("tailscope-svc")
def test_real_stores_run_on_the_deployments_stores_host(tmp_path, monkeypatch):
    """`stores: {host}`: the store servers run inside that lab host's namespace and bind its address;
    the services on the other host reach them across the bridge."""
    if shutil.which("redis-server") is None or not Path("/usr/lib/postgresql/15/bin/postgres").exists():
        pytest.skip("redis-server or PostgreSQL 15 is not installed (scripts/bootstrap installs them)")
    topo = cached_read_topology(tmp_path / "cached.json")
    out = tmp_path / "graph.json"
    with two_hosts("namespaces", tmp_path, monkeypatch) as hosts:
        doc = deployment(hosts)
        doc["stores"] = {"host": "logic"}
        dep = write_json(tmp_path / "deployment.json", doc)
        args = ["--topology", str(topo), "--all", "--deployment", str(dep), "--model", "std-thread"]
        args += ["--stores", "real", "--out", str(out)]
        with serve("tailscope-svc", args, stop_timeout_s=30.0) as srv:
            stores = srv.ready["stores"]
            assert stores["mode"] == "real" and stores["host"] == "logic", stores
            assert sorted(s["system"] for s in stores["servers"]) == ["mongodb", "redis"]
            for server in stores["servers"]:
                assert server["address"].startswith(hosts.logic + ":"), server
                # Not reachable on loopback: it listens inside the lab host only.
                port = int(server["address"].rsplit(":", 1)[1])
                with pytest.raises(OSError):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
            for _ in range(4):
                assert get(hosts.front, srv.ready["listening"]) == 200
        assert srv.proc.returncode == 0, srv.stderr_text()
    result = json.loads(out.read_text())["stores"]
    for system in ("redis", "mongodb"):
        counts = result["systems"][system]
        assert counts["ops"] >= 4 and counts["errors_unavailable"] == 0, result


@needs_engine("tailscope-svc")
def test_real_stores_on_several_hosts_need_the_stores_host_named(tmp_path):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (scripts/bootstrap installs it)")
    topo = cached_read_topology(tmp_path / "cached.json")
    dep = write_json(tmp_path / "d.json", deployment(TwoHosts("127.0.0.1", "127.0.0.2", None, None)))
    r = run_svc("--topology", str(topo), "--all", "--deployment", str(dep), "--stores", "real")
    assert r.returncode == 1 and "give `stores: HOST` in the deployment file" in r.stderr, r.stderr
    assert r.stdout == ""
    # On loopback "hosts" the named host's address is bound in this namespace: it runs.
    doc = deployment(TwoHosts("127.0.0.1", "127.0.0.2", None, None))
    doc["stores"] = {"host": "nowhere"}
    r = run_svc("--topology", str(topo), "--all", "--deployment", str(write_json(tmp_path / "e.json", doc)))
    assert r.returncode == 1 and "stores.host" in r.stderr and "unknown host 'nowhere'" in r.stderr, r.stderr


# ---- bad input: exit 1, a clear message, nothing started --------------------------------------


def run_svc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SVC), *args], capture_output=True, text=True, timeout=30)


@needs_engine("tailscope-svc")
@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["services"]["backend"].update(host="storage"), "services.backend.host: unknown host 'storage'"),
        (lambda d: d["services"].update(cache={"host": "logic"}), "services.cache: the topology"),
        (lambda d: d["services"].pop("backend"), "service 'backend' is not deployed"),
        (lambda d: d["links"][0].update(between=["front", "storage"]), "unknown host 'storage'"),
        (
            lambda d: (
                d["hosts"]["logic"].update(address="127.0.0.1"),
                d.pop("links"),
                d["services"]["front"].update(port=18080),
                d["services"]["backend"].update(port=18080),
            ),
            "both take 127.0.0.1:18080",
        ),
        (lambda d: d["links"][0].update(delay_us=10_000_001), "delay_us: 10000001 is outside 0 … 10000000"),
        (lambda d: d["links"][0].update(jitter_us=3000), "jitter_us: 3000 is outside 0 … 2000"),
        (lambda d: d["hosts"]["logic"].update(address="192.0.2.1"), "refused"),
    ],
    ids=["unknown-host", "unknown-service", "missing-service", "link-host", "one-port", "delay", "jitter", "addr"],
)
def test_deployment_errors_exit_1_naming_the_entry_and_start_nothing(mutate, message, topo_json, tmp_path):
    doc = deployment(TwoHosts("127.0.0.1", "127.0.0.2", None, None))
    mutate(doc)
    dep = write_json(tmp_path / "bad.json", doc)
    out = tmp_path / "never.json"
    r = run_svc("--topology", str(topo_json), "--all", "--deployment", str(dep), "--out", str(out))
    assert r.returncode == 1 and message in r.stderr, r.stderr
    assert r.stdout == ""  # no ready line: nothing was started
    assert not out.exists()


@needs_engine("tailscope-svc")
def test_a_missing_lab_host_namespace_is_named(topo_json, tmp_path):
    doc = deployment(TwoHosts("198.19.253.2", "198.19.253.3", "tsd-nope1", "tsd-nope2"))
    dep = write_json(tmp_path / "d.json", doc)
    r = run_svc("--topology", str(topo_json), "--all", "--deployment", str(dep))
    assert r.returncode == 1 and "/run/netns/tsd-nope" in r.stderr and "tailscope hosts up" in r.stderr, r.stderr


@needs_engine("tailscope-svc")
@pytest.mark.parametrize(
    "args, message",
    [
        (["--service", "front", "--peers", "backend=192.0.2.1:9000"], "--peers backend 192.0.2.1: refused"),
        (["--service", "front", "--bind", "192.0.2.1"], "--bind 192.0.2.1: refused"),
        (["--service", "front", "--bind", "0.0.0.0"], "--bind 0.0.0.0: refused"),
        # Digits and dots that are no address: a typo, refused without a DNS lookup.
        (["--service", "front", "--peers", "backend=198.18.0.256:9000"], "not a host name or a numeric address"),
        # A declared block extends the policy, and only by itself: 203.0.113.3 is outside 198.51.100.0/24.
        (
            ["--service", "front", "--allow-cidr", "198.51.100.0/24", "--peers", "backend=203.0.113.3:9000"],
            "--peers backend 203.0.113.3: refused",
        ),
        (["--service", "front", "--allow-cidr", "0.0.0.0/0"], "--allow-cidr '0.0.0.0/0': refused: broader than /8"),
        (["--service", "front", "--allow-cidr", "198.0.0.0/7"], "broader than /8"),
        (["--service", "front", "--allow-cidr", "203.0.113.3/24"], "host bits are set"),
        (["--all", "--allow-cidr", "198.51.100.0/24"], "--allow-cidr is for one service"),
        (["--service", "front", "--link-delay", "192.0.2.1=100"], "refused"),
        (["--service", "front", "--link-delay", "127.0.0.2=100:200"], "jitter 200 µs is outside 0 … the delay"),
        (["--ping", "9", "--ping-host", "192.0.2.1"], "--ping-host 192.0.2.1: refused"),
        (["--all", "--bind", "127.0.0.2"], "--bind is for one service"),
        (["--service", "front", "--deployment", "d.json"], "--deployment needs --all"),
    ],
)
def test_svc_refuses_addresses_outside_the_allow_list(args, message, topo_json):
    r = run_svc("--topology", str(topo_json), *args)
    assert r.returncode == 1 and message in r.stderr, r.stderr
    assert "198.18.0.0/15" in r.stderr or "refused" not in message or "broader" in message, r.stderr
    if "198.51.100.0/24" in args and "refused" in message:
        assert "declared 198.51.100.0/24" in r.stderr, r.stderr  # the refusal names the whole policy


@needs_engine("tailscope-load")
@pytest.mark.parametrize(
    "extra, message",
    [
        (["--host", "203.0.113.3", "--allow-cidr", "198.51.100.0/24"], "--host 203.0.113.3: refused"),
        (["--host", "203.0.113.3", "--allow-cidr", "0.0.0.0/0"], "broader than /8"),
        (["--host", "198.18.0.256"], "not a host name or a numeric address"),
    ],
)
def test_load_follows_the_declared_policy(extra, message):
    # Refused while the arguments are read: the load generator never opens a socket.
    r = subprocess.run(
        [str(engine_path("tailscope-load")), "--port", "9", "-d", "1s", "-R", "10", *extra],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1 and message in r.stderr, r.stderr
    assert "connections" not in r.stdout  # no result document: no run


@needs_engine("tailscope-load")
def test_load_refuses_a_host_outside_the_allow_list():
    r = subprocess.run(
        [str(engine_path("tailscope-load")), "--host", "192.0.2.1", "--port", "9", "-d", "1s", "-R", "10"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1
    assert "192.0.2.1: refused" in r.stderr and "the lab subnet 198.18.0.0/15" in r.stderr, r.stderr
