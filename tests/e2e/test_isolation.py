"""The isolation study: CPU placement from the cores, ratios and flags from the data, the
isolation and link-accuracy lines computed from what was applied, unavailable without root;
with root, the connect audit (every TCP peer of a split graph under load is on loopback or
in 198.18.0.0/15) and the tiny study end to end with its lab removed afterwards."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import threading

import pytest

from conftest import BUILD, needs_engine, needs_root
from tailscope.lab import agents, deployment, groups, labhosts, topology
from tailscope.studies import isolation
from tailscope.studies.base import RunContext
from tailscope.studies.socialnet.analysis import BEST_CEILING_FILE


def test_two_cores_put_two_service_hosts_on_one_and_leave_the_agents_unpinned():
    plan, load = groups.plan_cpus(["front", "logic", "storage"], [(0,), (1,)])
    assert plan == {"front": (0,), "logic": (1,), "storage": (0,)}
    assert load == ()


def test_enough_cores_give_every_host_and_the_agents_their_own():
    cores = [(0, 4), (1, 5), (2, 6), (3, 7)]
    plan, load = groups.plan_cpus(["front", "logic", "storage"], cores)
    assert plan == {"front": (0, 4), "logic": (1, 5), "storage": (2, 6)}
    assert load == (3, 7)
    plan, load = groups.plan_cpus(["front", "logic", "storage"], [(c,) for c in range(8)])
    assert plan == {"front": (0, 3, 6), "logic": (1, 4), "storage": (2, 5)} and load == (7,)


def _load_doc(p50: float, p99: float, count: int, rate: float, errors: int = 0, late: float = 0.0) -> dict:
    return {
        "load": {"achieved_per_s": rate, "errors_total": errors},
        "agents": [{"name": "load@tsi-h4", "generator_limited": False, "start_late_s": late}],
        "measurements": [
            {
                "name": "latency_intended",
                "variant": "merged",
                "latency": {"count": count, "percentiles": {"50": p50, "99": p99}},
            }
        ],
    }


def _crit(p99_sched: float) -> dict:
    return {
        "measurements": [
            {"name": "rpc_scheduling", "latency": {"count": 50, "percentiles": {"50": 1e3, "99": p99_sched}}}
        ]
    }


def test_ratios_are_split_over_single_and_flagged_points_carry_their_flags():
    loads = {
        "single/std-async/c20": _load_doc(1e6, 4e6, 1000, 900),
        "split/std-async/c20": _load_doc(0.8e6, 2e6, 1000, 1000),
        "single/std-async/c60": _load_doc(2e6, 8e6, 1000, 950),
        "split/std-async/c60": _load_doc(2e6, 16e6, 1000, 800, errors=3),
    }
    crit = {"single/std-async/c20": _crit(2e4), "split/std-async/c20": _crit(1e5)}
    rows = isolation.point_rows(loads, crit)
    rs = isolation.ratios(rows)
    assert [(r["connections"], r["p99"], r["rpc_scheduling"]) for r in rs] == [(20, 0.5, 5.0), (60, 2.0, None)]
    assert rs[1]["flags"] == ["3 errors"]
    table = isolation._ratio_table(rows)
    assert table.rows[1][0] == "std-async [flagged: 3 errors]"
    # The finding uses only the unflagged pair.
    assert "over the 1 unflagged points: from 0.5× (std-async, 20 connections) to 0.5×" in table.caption
    assert "RPC scheduling p99 5× … 5×" in table.caption


def test_a_late_agent_flags_its_point():
    assert isolation.point_flags(_load_doc(1, 1, 1, 1, late=0.2)) == ["agent started late (load@tsi-h4)"]


def test_isolation_lines_come_from_what_the_processes_got():
    analysis = {
        "applied": {
            "split": {
                "a": {"pid": 1, "cpus": "0", "in_netns": True},
                "b": {"pid": 2, "cpus": "1", "in_netns": True},
                "c": {"pid": 3, "cpus": "0", "in_netns": False},
            }
        },
        "plan": {"split": {"front": [0], "logic": [1], "storage": [0]}, "load": []},
        "cores": [[0], [1]],
        "llc_groups": ["0-1"],
    }
    lines = isolation.isolation_lines(analysis)
    assert lines[0].startswith("split: network namespaces: 2 of 3 services verified inside their host's namespace")
    assert "0 (2 services); 1 (1 services)" in lines[0]
    assert "1 of 3 host pairs share CPUs (front–storage on 0): CPU only partly isolated" in lines[1]
    assert "load agents unpinned" in lines[1]
    assert "every host shares one L3" in lines[2]


def test_link_accuracy_is_added_rtt_over_the_configured_round_trip():
    ping = {
        "from_host": "front",
        "to_host": "logic",
        "plain_host": "load",
        "target": "compose-post-service",
        "delay_us": 50.0,
        "jitter_us": 5.0,
        "calls": 2000,
        "without": {"count": 2000, "mean": 60_000, "percentiles": {"50": 55_000}},
        "with": {"count": 2000, "mean": 186_000, "percentiles": {"50": 170_000}},
    }
    line = isolation.link_accuracy_line({"links": [{}], "ping": ping})
    # Expected: 2 × (50 + 5/2) = 105 µs added (the sum of two symmetric jitters: median = mean).
    assert "added 115.0 µs at p50 (126.0 µs in the mean), 1.10 × the configured 105 µs round trip" in line
    assert "unavailable" in isolation.link_accuracy_line({"links": [{}], "ping": None})


def test_without_root_the_section_says_unavailable_and_why(tmp_path, monkeypatch):
    monkeypatch.setattr(isolation.os, "geteuid", lambda: 1000)
    from tailscope.runner import run_studies

    run_id, report, failures, _database = run_studies([isolation.STUDY], form="quick", results_dir=tmp_path / "results")
    assert not failures
    text = report.read_text()
    assert "isolation study unavailable: lab hosts need root" in " ".join(text.split())


def _ss_peers(netns: str) -> list[str]:
    """Remote addresses of every TCP socket in a lab host (`ss -tnH` inside its namespace)."""
    out = subprocess.run(
        [*labhosts.exec_args(netns), "ss", "-tnH"], capture_output=True, text=True, timeout=10, check=True
    ).stdout
    peers = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 5:
            peers.append(cols[4].rsplit(":", 1)[0].strip("[]"))
    return peers


@pytest.mark.serial  # makes lab namespaces: alone, so no other test sees them (docs/testing.md)
@needs_root
@needs_engine("tailscope-svc", "tailscope-load", "tailscope-critpath")
def test_connect_audit_every_tcp_peer_is_loopback_or_lab(tmp_path, monkeypatch):
    monkeypatch.setattr(labhosts, "STATE_DIR", tmp_path / "state")
    prefix = "tsc"
    topo_json = topology.to_engine_json(topology.SOCIALNET, tmp_path / "socialnet.json")
    services = topology.services(json.loads(topo_json.read_text()))
    dep = deployment.with_lab_prefix(deployment.load(isolation.SPLIT_FILE, services), prefix)
    from tailscope.lab.graph import graph

    seen: list[tuple[str, str]] = []
    try:
        labhosts.up(labhosts.validate(dep.lab_hosts_needed(), "198.19.254.48/28", prefix))
        lab = {h.name: h.address for h in labhosts.state(prefix).hosts}
        dep_json = deployment.write_engine_json(deployment.engine_json(dep, services, lab), tmp_path / "d.json")
        addresses = deployment.host_addresses(dep, lab)
        front = addresses[str(dep.services["nginx-web-server"].host)][1]
        namespaces = sorted({ns for ns, _ in addresses.values() if ns})
        with graph(topo_json, "pool-callback", tmp_path / "g.json", extra=["--deployment", str(dep_json)]) as (port, _):
            done = threading.Event()
            error: list[BaseException] = []

            def drive() -> None:
                try:
                    agents.run_agents(
                        [agents.Agent("load", addresses["load"][0])],
                        host=front,
                        port=port,
                        connections=4,
                        rate_per_s=0,
                        duration_s=1.0,
                        warmup_s=0.1,
                        args=isolation._load_args(),
                        artifacts_dir=tmp_path / "hlog",
                    )
                except BaseException as e:  # noqa: BLE001 - re-raised in the test thread
                    error.append(e)
                finally:
                    done.set()

            t = threading.Thread(target=drive)
            t.start()
            while not done.is_set():
                for ns in namespaces:
                    seen += [(ns, peer) for peer in _ss_peers(ns)]
            t.join()
            if error:
                raise error[0]
    finally:
        labhosts.down(prefix, stop_processes=True)
    assert seen, "no TCP connection was seen in any lab host during the run"
    assert {ns for ns, _ in seen} >= {f"{prefix}-h1", f"{prefix}-h2"}  # front and logic talked
    lab_range = ipaddress.IPv4Network("198.18.0.0/15")
    outside = {
        (ns, p)
        for ns, p in seen
        if not (
            ipaddress.ip_address(p).is_loopback
            or (ipaddress.ip_address(p).version == 4 and ipaddress.ip_address(p) in lab_range)
        )
    }
    assert not outside, f"connections outside loopback and the lab subnet: {sorted(outside)}"


@pytest.mark.serial  # makes lab namespaces: alone, so no other test sees them (docs/testing.md)
@needs_root
@needs_engine("tailscope-svc", "tailscope-load", "tailscope-critpath")
def test_tiny_isolation_study_end_to_end_removes_its_lab(tmp_path, monkeypatch):
    monkeypatch.setattr(labhosts, "STATE_DIR", tmp_path / "state")
    from tailscope.runner import run_studies
    from tailscope.store import Store

    results = tmp_path / "results"
    try:
        run_id, report, failures, _database = run_studies(
            [isolation.STUDY],
            form="quick",
            results_dir=results,
            # The containers arm starts a Docker daemon: the cluster tier tests it (tests/e2e/test_cluster.py).
            options={
                "isolation_models": ["pool-callback"],
                "isolation_connections": [4],
                "scale": 0.3,
                "isolation_containers": False,
            },
        )
    finally:
        leftover = labhosts.state(isolation.LAB_PREFIX).namespaces
        if leftover:
            labhosts.down(isolation.LAB_PREFIX, stop_processes=True)
    assert leftover == []
    assert not failures, failures
    with Store(results / "tailscope.duckdb", read_only=True) as store:
        points = {d.point for d in store.documents(run_id, "isolation")}
    assert {"single/pool-callback/c4", "split/pool-callback/c4", "analysis"} <= points
    text = " ".join(report.read_text().split())
    assert "Split ÷ single, per model and connection count" in text
    assert "Link-delay accuracy" in text
    # Off: said so, and its figures unavailable with the reason (never a number it did not measure).
    assert "Containers arm: not run (turned off (option isolation_containers))" in text
    assert "p50, p99 and CPU per request: unavailable (turned off" in text


def test_the_study_refuses_bad_connection_counts(tmp_path, monkeypatch):
    if isolation.unavailable_reason():
        pytest.skip(f"the study returns before its options are read here: {isolation.unavailable_reason()}")
    ctx = RunContext("quick", tmp_path, lambda *_: None, {"isolation_connections": [0]})
    with pytest.raises(ValueError, match="isolation_connections: 0 is outside 1..10000"):
        isolation.STUDY.run(ctx)


def test_the_models_fall_back_to_pool_callback_without_a_socialnet_run(tmp_path):
    models, why = isolation.choose_models(RunContext("quick", tmp_path, lambda *_: None, {}))
    assert models == ["std-async", "pool-callback"] and "did not run in this run" in why
    (tmp_path / "socialnet").mkdir()
    (tmp_path / "socialnet" / BEST_CEILING_FILE).write_text('{"model": "coroutine", "ceiling_per_s": 3000}')
    models, why = isolation.choose_models(RunContext("quick", tmp_path, lambda *_: None, {}))
    assert models == ["std-async", "coroutine"] and "highest closed-loop ceiling" in why


@pytest.mark.serial  # makes lab namespaces: alone, so no other test sees them (docs/testing.md)
@needs_root
@needs_engine("tailscope-svc", "tailscope-load", "tailscope-critpath")
def test_sigterm_mid_study_takes_the_lab_down(tmp_path):
    import signal
    import sys
    import time

    env = dict(os.environ, TAILSCOPE_LAB_STATE_DIR=str(tmp_path / "state"), TAILSCOPE_BUILD_DIR=str(BUILD))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tailscope.cli", "bench", "isolation", "--scale", "2", "--results", str(tmp_path / "r")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        # Wait for the study's lab (the runner's timeout catches a study that never brings it up).
        while proc.poll() is None and not labhosts.state(isolation.LAB_PREFIX).namespaces:
            time.sleep(0.05)
        assert proc.poll() is None, "the study ended before its lab was up"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        leftover = labhosts.state(isolation.LAB_PREFIX)
        if leftover.namespaces:
            labhosts.down(isolation.LAB_PREFIX, stop_processes=True)
    assert leftover.namespaces == [] and leftover.links == []
    assert proc.returncode != 0  # interrupted, not a complete run
    assert not list((tmp_path / "r").glob(".staging-*"))


def test_split_check_compares_unflagged_pairs_with_the_capstone():
    from tailscope.report.blocks import DOES_NOT_HOLD, HOLDS, NOT_COMPARABLE, PARTLY, UNAVAILABLE

    analysis = {"plan": {"split": {"front": [0], "logic": [1], "storage": [2]}}}

    def pair(p99: float, flags: list[str] | None = None) -> dict:
        return {"p99": p99, "flags": flags or []}

    assert isolation.split_check([pair(0.5), pair(0.8)], analysis).verdict == HOLDS
    partly = isolation.split_check([pair(0.5), pair(1.3)], analysis)
    assert partly.verdict == PARTLY and "lowered p99 at 1 of 2" in partly.why and "3 of this machine" in partly.why
    worse = isolation.split_check([pair(1.1), pair(1.5), pair(0.2, ["saturated"])], analysis)
    assert worse.verdict == DOES_NOT_HOLD and "over 2 unflagged pairs" in worse.here  # the flagged pair is left out
    assert isolation.split_check([pair(0.2, ["saturated"])], analysis).verdict == UNAVAILABLE
    # Two service hosts on one CPU: not the capstone's separate nodes, whatever the ratios.
    shared = {"plan": {"split": {"front": [0], "logic": [1], "storage": [0]}}}
    c = isolation.split_check([pair(0.5), pair(0.8)], shared)
    assert c.verdict == NOT_COMPARABLE and "share CPU(s) 0" in c.why and "lowered p99 at 2 of 2" in c.why
