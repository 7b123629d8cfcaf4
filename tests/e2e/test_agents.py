"""Load agents (python/tailscope/agents.py): merged histograms give the percentiles of one
histogram holding every value; per-agent figures are kept; one agent failing stops the rest
and leaves no process; two tiny real runs on loopback merge to their sum; agents inside two
lab hosts drive a server in a third (root)."""

from __future__ import annotations

import random
import stat
import time
from pathlib import Path

import pytest

from conftest import echo_server, echo_server_in_lab_host, engine_path, needs_engine, needs_root
from tailscope.lab import agents, labhosts
from tailscope.measure.hlog import new_histogram, read_intervals

LAB_PREFIX = "tsa"
LAB_SUBNET = "198.19.254.32/28"


def _histogram(values):
    h = new_histogram()
    for v in values:
        h.record_value(v)
    return h


def _write_hlog(path: Path, intervals: list[list[int]], tag: str = agents.TAG) -> Path:
    """An .hlog in the form tailscope-load writes: one tagged line per interval histogram."""
    lines = [
        "#[tailscope-load interval histograms (ns)]",
        '"StartTimestamp","Interval_Length","Interval_Max","Payload"',
    ]
    for i, values in enumerate(intervals):
        h = _histogram(values)
        lines.append(f"Tag={tag},{i:.3f},1.000,{h.get_max_value() / 1e6:.3f},{h.encode().decode()}")
        # A second tag in the same log must not leak into the merge.
        other = _histogram([10**9])
        lines.append(f"Tag=latency_actual,{i:.3f},1.000,1000.000,{other.encode().decode()}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_merged_percentiles_equal_one_histogram_of_every_value(tmp_path):
    rng = random.Random(7)
    # Two agents with different distributions (a fast one and one with a heavy tail), two intervals each.
    a = [[int(rng.lognormvariate(11, 0.3)) for _ in range(3000)] for _ in range(2)]
    b = [[int(rng.paretovariate(1.5) * 80_000) for _ in range(2000)] for _ in range(2)]
    merged = agents.merge_hlogs([_write_hlog(tmp_path / "a.hlog", a), _write_hlog(tmp_path / "b.hlog", b)])
    everything = _histogram([v for iv in a + b for v in iv])
    assert merged.get_total_count() == everything.get_total_count() == 10_000
    for p in (50, 90, 99, 99.9, 99.99, 100):
        assert merged.get_value_at_percentile(p) == everything.get_value_at_percentile(p), p
    # And not those of either agent alone: the merge is not a pick.
    alone = agents.merge_hlogs([tmp_path / "a.hlog"])
    assert alone.get_value_at_percentile(99) != merged.get_value_at_percentile(99)


def _agent_doc(achieved: float, errors: int, p50: int, p99: int, count: int, bottleneck: bool = False) -> dict:
    return {
        "schema": "tailscope.result/1",
        "engine": "tailscope-load",
        "machine": {"cpu": "test"},
        "config": {"start_at_s": 1.0, "start_late_s": 0.001},
        "load": {"achieved_per_s": achieved, "errors_total": errors, "generator_bottleneck": bottleneck},
        "measurements": [
            {"name": "latency_intended", "latency": {"count": count, "percentiles": {"50": p50, "99": p99}}}
        ],
        "unavailable": [],
    }


def test_the_merged_document_sums_rates_and_errors_and_keeps_each_agent(tmp_path):
    h1 = _write_hlog(tmp_path / "1.hlog", [[1000] * 90 + [5000] * 10])
    h2 = _write_hlog(tmp_path / "2.hlog", [[2000] * 100])
    results = [
        agents.AgentResult(agents.Agent("a", "ts-h1", frozenset({0})), 3, 0, _agent_doc(900.0, 2, 1000, 5000, 100), h1),
        agents.AgentResult(agents.Agent("b", "ts-h2"), 2, 0, _agent_doc(600.0, 0, 2000, 2000, 100, True), h2),
    ]
    doc = agents.merged_document(results, host="198.18.0.4", port=8080, duration_s=1, warmup_s=0)
    assert doc["load"] == {"achieved_per_s": 1500.0, "errors_total": 2, "generator_bottleneck": True}
    assert doc["config"]["connections"] == 5
    lat = doc["measurements"][0]["latency"]
    assert lat["count"] == 200
    assert lat["percentiles"]["50"] == pytest.approx(2000, rel=1e-3)  # 90 at 1 µs, 100 at 2 µs, 10 at 5 µs
    assert agents.percentile_ns(doc, "99") == pytest.approx(5000, rel=1e-3)
    assert "99.9" in lat["low_confidence"] and "50" not in lat["low_confidence"]
    assert [(a["name"], a["cpus"], a["achieved_per_s"], a["p99_ns"], a["errors_total"]) for a in doc["agents"]] == [
        ("a", [0], 900.0, 5000, 2),
        ("b", None, 600.0, 2000, 0),
    ]


def test_connections_are_shared_as_evenly_as_whole_numbers_allow():
    assert agents.shares(10, 3) == [4, 3, 3]
    assert agents.shares(2, 2) == [1, 1]
    assert sum(agents.shares(101, 7)) == 101


def test_targets_outside_loopback_and_the_lab_subnet_are_refused(tmp_path):
    with pytest.raises(ValueError, match="192.0.2.7 is neither loopback nor in the lab subnet"):
        agents.run_agents(
            [agents.Agent("a")],
            host="192.0.2.7",
            port=80,
            connections=1,
            rate_per_s=0,
            duration_s=0.1,
            warmup_s=0,
            args=[],
            artifacts_dir=tmp_path,
        )


FAKE_LOAD = """#!/bin/sh
# A stand-in tailscope-load: the others record their pid and run long (until stopped); the agent
# whose --hlog names 'bad' fails once both are running.
for a in "$@"; do case "$a" in *bad*)
  while [ "$(ls {pids} | wc -l)" -lt 2 ]; do sleep 0.01; done
  echo "tailscope-load: error: simulated failure" >&2; exit 3;;
esac; done
echo $$ > "{pids}/$$"
exec sleep 120
"""


def test_one_agent_failing_stops_the_others_and_leaves_no_process(tmp_path, monkeypatch):
    bin_dir, pids = tmp_path / "bin", tmp_path / "pids"
    bin_dir.mkdir()
    pids.mkdir()
    fake = bin_dir / "tailscope-load"
    fake.write_text(FAKE_LOAD.replace("{pids}", str(pids)))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("TAILSCOPE_ENGINE_DIR", str(bin_dir))
    fleet = [agents.Agent("good-1"), agents.Agent("bad"), agents.Agent("good-2")]
    with pytest.raises(agents.AgentError, match="load agent bad exited with 3: tailscope-load: error: simulated"):
        agents.run_agents(
            fleet,
            host="127.0.0.1",
            port=9,
            connections=3,
            rate_per_s=0,
            duration_s=60,
            warmup_s=0,
            args=[],
            artifacts_dir=tmp_path / "hlog",
        )
    started = [int(p.name) for p in pids.iterdir()]
    assert len(started) == 2
    for pid in started:
        assert not Path(f"/proc/{pid}").exists()


@needs_engine("tailscope-load", "tailscope-echo")
def test_two_tiny_real_agents_on_loopback_merge_to_their_sum(tmp_path):
    with echo_server("epoll") as (port, _):
        results, doc = agents.run_agents(
            [agents.Agent("one"), agents.Agent("two")],
            host="127.0.0.1",
            port=port,
            connections=4,
            rate_per_s=400,
            duration_s=0.5,
            warmup_s=0.1,
            args=["--protocol", "echo", "--allow-errors"],
            artifacts_dir=tmp_path,
        )
    assert [r.connections for r in results] == [2, 2]
    assert [r.rate_per_s for r in results] == [200, 200]
    counts = [r.count for r in results]
    assert all(c > 0 for c in counts)
    assert doc["measurements"][0]["latency"]["count"] == sum(counts)
    assert doc["load"]["achieved_per_s"] == pytest.approx(sum(r.achieved_per_s for r in results))
    # The common start: both agents were told the same time.
    assert len({r.document["config"]["start_at_s"] for r in results}) == 1


@pytest.mark.serial  # makes lab namespaces: alone, so no other test sees them (docs/testing.md)
@needs_root
@needs_engine("tailscope-echo", "tailscope-load")
def test_agents_in_two_lab_hosts_drive_a_server_in_a_third(tmp_path, monkeypatch):
    echo = engine_path("tailscope-echo")
    monkeypatch.setattr(labhosts, "STATE_DIR", tmp_path / "state")
    try:
        state = labhosts.up(labhosts.validate(3, LAB_SUBNET, LAB_PREFIX))
        server_addr = state.hosts[2].address.split("/")[0]
        with echo_server_in_lab_host(echo, f"{LAB_PREFIX}-h3", server_addr) as port:
            results, doc = agents.run_agents(
                [agents.Agent("h1", f"{LAB_PREFIX}-h1"), agents.Agent("h2", f"{LAB_PREFIX}-h2")],
                host=server_addr,
                port=port,
                connections=2,
                rate_per_s=200,
                duration_s=0.5,
                warmup_s=0.1,
                args=["--protocol", "echo"],
                artifacts_dir=tmp_path / "hlog",
            )
        assert [a["netns"] for a in doc["agents"]] == [f"{LAB_PREFIX}-h1", f"{LAB_PREFIX}-h2"]
        assert len(results) == 2, results
        assert all(r.count > 0 and r.errors_total == 0 for r in results)
        assert doc["measurements"][0]["latency"]["count"] == sum(r.count for r in results)
    finally:
        labhosts.down(LAB_PREFIX, stop_processes=True)
    assert labhosts.state(LAB_PREFIX).namespaces == []


@needs_engine("tailscope-load", "tailscope-echo")
def test_load_start_at_is_range_checked_and_its_lateness_recorded(tmp_path):
    from conftest import run_load

    with echo_server("epoll") as (port, _):
        rc, doc, err = run_load(port, "-c", "1", "-d", "0.2s", "--warmup", "0", "--start-at", "5")
        assert rc == 1 and doc is None and "--start-at" in err
        at = time.time() + 0.3
        rc, doc, err = run_load(port, "-c", "1", "-d", "0.2s", "--warmup", "0", "--start-at", f"{at:.6f}")
    assert rc == 0, err
    assert doc is not None
    assert doc["config"]["start_at_s"] == pytest.approx(at, abs=1e-6)
    assert doc["config"]["start_late_s"] >= 0


@needs_engine("tailscope-load", "tailscope-echo")
def test_load_start_at_starts_the_schedule_on_the_instant_and_the_hlog_says_when(tmp_path):
    """--start-at places the schedule (connections opened before it), so the --hlog intervals begin at
    start_at + warm-up: the tracing study switches sampling on those boundaries while the run goes on.
    The hlog's StartTime is that instant on the realtime clock, not shifted by the connect phase."""
    from conftest import run_load

    hlog = tmp_path / "load.hlog"
    with echo_server("epoll") as (port, _):
        at = time.time() + 0.5
        rc, doc, err = run_load(
            port,
            "-c",
            "4",
            "-d",
            "1s",
            "--warmup",
            "0.25s",
            "--start-at",
            f"{at:.6f}",
            "--hlog",
            str(hlog),
            "--hlog-interval",
            "0.25",
        )
    assert rc == 0, err
    assert doc["config"]["start_late_s"] == 0  # connecting 4 connections on loopback takes far less than 0.5 s
    start, rows = read_intervals(hlog, "latency_intended")
    # StartTime is written to the millisecond.
    assert start == pytest.approx(at + 0.25, abs=0.0015)
    # Interval k starts k × 0.25 s after it (a response read in the loop turn that crossed the window's
    # end is counted, as in the totals, in one more interval).
    assert [off for off, _ in rows][:4] == pytest.approx([0.0, 0.25, 0.5, 0.75])
