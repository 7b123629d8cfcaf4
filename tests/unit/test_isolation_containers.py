"""The isolation study's containers arm (studies/isolation_containers.py): where Docker cannot start it
records why and starts nothing, and every figure it would have given is unavailable with that reason;
on hand-built point documents, containers ÷ namespace hosts at p50, p99 and CPU per request, a missing
CPU reading null with its reason; the section's lines from what the containers really got."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from tailscope.lab import cluster, deployment, groups
from tailscope.store import RunRecord, Store
from tailscope.studies import isolation
from tailscope.studies import isolation_containers as arm

SPLIT = Path(__file__).resolve().parents[2] / "deployments" / "socialnet-3-hosts.yaml"
SERVICES = list(deployment.load(SPLIT).services)


def _plan(tmp_path: Path) -> arm.ArmPlan:
    return arm.ArmPlan(
        study="isolation",
        topo_doc={},
        topo_json=tmp_path / "t.json",
        front="nginx-web-server",
        groups=groups.plan_groups(deployment.load(SPLIT, SERVICES), SERVICES, cores=[(0,), (1,)], allowed_cpus={0, 1}),
        split_json=tmp_path / "d.json",
        front_address="198.19.252.2",
        agents=[],
        load_args=[],
        models=["coroutine"],
        counts=[8],
        duration_s=1.0,
        warmup_s=0.3,
        art=tmp_path,
    )


def _nothing_may_start(monkeypatch) -> None:
    def refuse(*_a, **_k):
        raise AssertionError("the arm started something although Docker cannot start here")

    monkeypatch.setattr(cluster, "engine_up", refuse)
    monkeypatch.setattr(cluster, "up", refuse)
    monkeypatch.setattr(arm, "graph", refuse)


def test_without_docker_the_arm_records_why_and_starts_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster, "unavailable_reason", lambda: "dockerd not installed (scripts/bootstrap --docker)")
    _nothing_may_start(monkeypatch)
    docs, record = arm.run_arm(_plan(tmp_path), {}, lambda _t: None)
    assert docs == []
    assert record["unavailable"] == "Docker cannot start here: dockerd not installed (scripts/bootstrap --docker)"
    assert record["groups"]["groups"] == {"front": [0], "logic": [1], "storage": [0]}  # what it would have used
    cmp = arm.compare(record, {}, isolation.point_flags)
    assert cmp.pairs == [] and cmp.unavailable == record["unavailable"]
    assert arm.arm_table(cmp) is None
    [line] = arm.arm_lines(cmp, record)
    assert line == (
        "Containers arm: not run (Docker cannot start here: dockerd not installed (scripts/bootstrap --docker)); "
        "containers ÷ namespace hosts p50, p99 and CPU per request: unavailable (Docker cannot start here: "
        "dockerd not installed (scripts/bootstrap --docker))."
    )


def test_the_option_turns_the_arm_off_even_where_docker_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster, "unavailable_reason", lambda: None)
    _nothing_may_start(monkeypatch)
    docs, record = arm.run_arm(_plan(tmp_path), {"isolation_containers": False}, lambda _t: None)
    assert docs == [] and record["unavailable"] == "turned off (option isolation_containers)"


def test_a_run_without_docker_stores_the_reason_and_the_section_says_it(tmp_path, monkeypatch):
    """The wiring end to end from the stored analysis document: the section's note, no table."""
    monkeypatch.setattr(cluster, "unavailable_reason", lambda: "needs root to start a Docker daemon")
    _nothing_may_start(monkeypatch)
    _docs, record = arm.run_arm(_plan(tmp_path), {}, lambda _t: None)
    analysis = {"models": ["coroutine"], "models_why": "test", "duration_s": 1.0, "warmup_s": 0.3, "containers": record}
    analysis |= {"applied": {}, "plan": {"split": {}, "load": []}, "cores": [], "links": [], "ping": None}
    now = datetime(2026, 1, 1, 12, 0, 0)
    with Store(tmp_path / "t.duckdb") as store:
        doc = isolation._analysis_document(analysis, None)
        store.save_run(RunRecord("r1", now, now, "quick", ["isolation"], {}, "test", [doc]))
        stored = next(d.document for d in store.documents("r1", "isolation") if d.point == "analysis")
        sec = isolation.STUDY.section(store, "r1")
    assert stored["containers"]["unavailable"] == "Docker cannot start here: needs root to start a Docker daemon"
    assert any(
        n.startswith("Containers arm: not run (Docker cannot start here: needs root") and "unavailable (" in n
        for n in sec.notes
    ), sec.notes
    assert "The split as container groups ÷ as namespace hosts" not in [b.title for b in sec.blocks]


def _point(p50_ms: float, p99_ms: float, cpu_s: float | None, front_requests: int | None = 1000, **extra) -> dict:
    window = (
        {"cpu_s": cpu_s, "processes": 12}
        if cpu_s is not None
        else {"cpu_s": None, "unavailable": "/proc unreadable for text-service"}
    )
    return {
        "load": {"achieved_per_s": 900.0, "errors_total": 0},
        "agents": [],
        "measurements": [
            {
                "name": "latency_intended",
                "variant": "merged",
                "latency": {"count": 1000, "percentiles": {"50": p50_ms * 1e6, "99": p99_ms * 1e6}},
            }
        ],
        "window_cpu": window,
        "front_requests": front_requests,
        "stores": {"mode": "simulated", "reason": "requested"},
        **extra,
    }


def test_ratios_are_containers_over_namespace_hosts_and_a_missing_cpu_reading_says_why():
    loads = {
        "namespaces/coroutine/c8": _point(2.0, 8.0, 1.0),
        "containers/coroutine/c8": _point(2.2, 6.0, 1.2),
        "namespaces/coroutine/c20": _point(3.0, 9.0, 1.0),
        "containers/coroutine/c20": _point(3.0, 9.0, None),
        "containers/coroutine/c40": _point(3.0, 9.0, 1.0),  # its pair never ran: no ratio invented
    }
    cmp = arm.compare({"unavailable": None}, loads, isolation.point_flags)
    assert [(p.connections, p.p50_ratio, p.p99_ratio, p.cpu_ratio) for p in cmp.pairs] == [
        (8, pytest.approx(1.1), pytest.approx(0.75), pytest.approx(1.2)),
        (20, 1.0, 1.0, None),
    ]
    assert cmp.pairs[0].namespaces.cpu_per_request_ns == pytest.approx(1e6)  # 1 s ÷ 1000 requests
    assert cmp.pairs[1].unavailable == "CPU per request: /proc unreadable for text-service"
    table = arm.arm_table(cmp)
    assert table is not None
    ratio_rows = [r for r in table.rows if r[0].endswith("containers ÷ namespace hosts")]
    assert ratio_rows[0][1:] == ["8", "", "1.1×", "0.75×", "", "1.2×"]
    assert ratio_rows[1][-1] == "unavailable (CPU per request: /proc unreadable for text-service)"
    no_front = arm.compare(
        {"unavailable": None},
        {
            "namespaces/coroutine/c8": _point(2, 8, 1.0),
            "containers/coroutine/c8": _point(2, 8, 1.0, front_requests=None),
        },
        isolation.point_flags,
    )
    assert (
        no_front.pairs[0].cpu_ratio is None
        and no_front.pairs[0].containers.cpu_unavailable == "the front wrote no document"
    )


def test_the_lines_say_which_groups_share_a_cpu_and_what_the_containers_got():
    plan = groups.plan_groups(deployment.load(SPLIT, SERVICES), SERVICES, cores=[(0,), (1,)], allowed_cpus={0, 1})
    applied = {
        "nginx-web-server": {"group": "front", "group_cpus": "0", "cpuset": "0", "cpus_allowed": "0"},
        "text-service": {"group": "logic", "group_cpus": "1", "cpuset": "1", "cpus_allowed": "0-1"},
    }
    record = {"unavailable": None, "groups": plan.record(), "applied": applied}
    loads = {"namespaces/coroutine/c8": _point(2, 8, 1.0), "containers/coroutine/c8": _point(2, 8, 1.0)}
    lines = arm.arm_lines(arm.compare(record, loads, isolation.point_flags), record)
    assert lines[0] == (
        "Container groups (cpuset = the group's CPUs, the same CPUs as its lab host): front on CPU 0, logic on "
        "CPU 1, storage on CPU 0 (2 core(s) here; front and storage share CPU 0: not isolated from each other); "
        "load agents unpinned."
    )
    assert lines[1] == (
        "cpusets seen (/proc/PID/status of each container's engine): 1 of 2 containers run on exactly their "
        "group's CPUs (not: text-service)."
    )
    assert lines[2] == "stores (namespace hosts): simulated (requested)."
