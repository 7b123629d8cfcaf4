"""A twin that queues, end to end (docs/twin.md "Capacities"): a tiny graph with a capacity-1 store run
by tailscope-svc at a rate where it queues, traced; `topology from-traces` finds the capacity in the
traces and writes it on that store, fitted to the store's service time; the twin validates at the
recorded rate and at a second recorded rate. Structure and presence, never timing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import needs_engine
from tailscope.cli import main
from tailscope.lab import topology
from tailscope.lab.engines import run_engine
from tailscope.lab.graph import LOAD, graph
from tailscope.lab.load import http_load_args
from tailscope.twin.commands import queueing_lines
from tailscope.twin.validate import validate

pytestmark = [pytest.mark.serial, needs_engine("tailscope-critpath", "tailscope-svc", "tailscope-load")]

SERVICE_MEDIAN_US = 4000.0
TINY = {
    "name": "tiny-lock",
    "description": "a front whose every request takes a lock (a capacity-1 store) and calls a backend",
    "call_timeout_ms": 10000,
    "front": {"service": "api", "path": "/get", "endpoint": "get"},
    "services": [
        {
            "name": "api",
            "endpoints": [
                {
                    "name": "get",
                    "span": "get_server",
                    "stages": [
                        {
                            "store": {
                                "span": "db_query",
                                "system": "mysql",
                                "latency": {"kind": "lognormal", "median_us": SERVICE_MEDIAN_US, "sigma": 0.3},
                                "capacity": 1,
                            }
                        },
                        {"call": {"service": "backend", "endpoint": "respond", "span": "backend_client"}},
                    ],
                }
            ],
        },
        {
            "name": "backend",
            "endpoints": [
                {
                    "name": "respond",
                    "span": "respond_server",
                    "stages": [
                        {"store": {"span": "cache_get", "system": "redis", "latency": {"kind": "constant", "us": 300}}}
                    ],
                }
            ],
        },
    ],
}


def engine_queues() -> str | None:
    """Why the engine cannot run capacities (None when it can): the topology field is H1's (issue 26)."""
    try:
        topology.validate(TINY, "tiny-lock")
    except topology.TopologyError as e:
        return str(e)
    return None


def traced_run(d: Path, rate_per_s: float, duration_s: float) -> Path:
    d.mkdir(parents=True)
    topo = topology.write_json(topology.validate(TINY, "tiny-lock"), d / "tiny.json")
    with graph(topo, "std-async", d / "graph.json", 1.0, d / "traces") as (port, _):
        run_engine(LOAD, http_load_args(port, "/get", 16, rate_per_s, duration_s, 0.3, timeout="5s"), timeout_s=120)
    return d / "traces" / "traces.otlp.json"


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    why = engine_queues()
    if why is not None:
        pytest.skip(f"tailscope-svc does not run capacities yet: {why}")
    d = tmp_path_factory.mktemp("tiny-lock")
    # service 4 ms behind a lock of 1: ~70 % busy at 175/s, ~35 % at 90/s
    return traced_run(d / "fast", 175.0, 3.0), traced_run(d / "slow", 90.0, 2.0)


def test_from_traces_writes_the_locks_capacity_and_its_service_time(recordings, tmp_path):
    fast, _ = recordings
    out = tmp_path / "twin.yaml"
    r = CliRunner().invoke(main, ["topology", "from-traces", str(fast), "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = yaml.safe_load(out.read_text())
    api = next(s for s in doc["services"] if s["name"] == "api")
    (db,) = [st["store"] for st in api["endpoints"][0]["stages"] if "store" in st and st["store"]["span"] == "db_query"]
    assert db["capacity"] == 1
    report = yaml.safe_load((tmp_path / "twin.yaml.inference.json").read_text())
    fit = next(f for e in report["endpoints"] for f in e["fits"] if f["stage"] == "api.get.db_query")
    assert fit["median_us"] == pytest.approx(SERVICE_MEDIAN_US, rel=0.3)  # the service time, not the queued span
    r = CliRunner().invoke(
        main, ["topology", "from-traces", str(fast), "-o", str(tmp_path / "n.yaml"), "--no-capacities"]
    )
    assert r.exit_code == 0, r.output
    assert "capacity" not in (tmp_path / "n.yaml").read_text().split("services:")[1]


def test_the_twin_validates_at_the_recorded_rate_and_at_a_second_one(recordings, tmp_path):
    fast, slow = recordings
    out = tmp_path / "twin.yaml"
    assert CliRunner().invoke(main, ["topology", "from-traces", str(fast), "-o", str(out)]).exit_code == 0
    doc = validate(out, [fast], "std-async", duration_s=2.0, warmup_s=0.5, second_traces=[slow])
    assert doc["end_to_end"]["ratios"]["p50"] is not None and doc["contract"] is not None
    second = doc["second_rate"]
    assert second is not None and second["end_to_end"]["ratios"]["p99"] is not None
    assert second["rate_ratio_to_first"] < 0.8  # the second recording's own (lower) rate
    # the engine's counters say the twin queued at its lock
    (lock,) = [q for q in doc["twin"]["queueing"] if q["name"] == "db_query"]
    assert lock["service"] == "api" and lock["capacity"] == 1 and lock["acquisitions"] > 0
    assert any("api:db_query capacity 1" in line for line in queueing_lines(doc))
