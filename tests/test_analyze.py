"""The Python side of trace analysis: DataFrames for notebooks and `tailscope analyze`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from conftest import BUILD, CRITPATH_FIXTURES, REPO, require_fixture


def _needs_engine():
    if not (BUILD / "bin" / "tailscope-critpath").exists():
        pytest.skip("tailscope-critpath not built (run `make build`)")


def _span(trace, span, parent, service_proc, op, start_us, dur_us, kind=None):
    s = {
        "traceID": trace,
        "spanID": span,
        "operationName": op,
        "startTime": start_us,
        "duration": dur_us,
        "processID": service_proc,
        "references": [],
        "tags": [],
    }
    if parent:
        s["references"] = [{"refType": "CHILD_OF", "traceID": trace, "spanID": parent}]
    if kind:
        s["tags"] = [{"key": "span.kind", "type": "string", "value": kind}]
    return s


def write_traces(path: Path, n: int = 20) -> None:
    """front:compose (0..100 µs) calls back:get as client/server pair; the
    back-end's share grows with the trace index so bottlenecks are known."""
    data = []
    for i in range(n):
        t = f"t{i:04d}"
        back = 20 + i  # µs of server time
        spans = [
            _span(t, "a", None, "p1", "compose", 1_000_000, 100 + i),
            _span(t, "b", "a", "p1", "get", 1_000_010, back + 10, kind="client"),
            _span(t, "c", "b", "p2", "get", 1_000_015, back, kind="server"),
        ]
        data.append(
            {"traceID": t, "spans": spans, "processes": {"p1": {"serviceName": "front"}, "p2": {"serviceName": "back"}}}
        )
    path.write_text(json.dumps({"data": data}))


def test_critical_paths_returns_dataframes(tmp_path, monkeypatch):
    _needs_engine()
    monkeypatch.setenv("TAILSCOPE_BUILD_DIR", str(BUILD))
    from tailscope.analyze import critical_paths

    f = tmp_path / "t.json"
    write_traces(f)
    a = critical_paths(f, what_if=["back"])
    assert len(a.traces) == 20 and a.traces["analyzed"].all()
    assert set(a.services["service"]) == {"front", "back"}
    # capstone: a trace's per-service critical-path times add up to its end-to-end latency
    per_trace = a.services.groupby("trace_id")["exclusive_ns"].sum()
    e2e = a.traces.set_index("trace_id")["end_to_end_ns"]
    assert (per_trace == e2e.loc[per_trace.index]).all()
    # sections tile each root span
    for _tid, grp in a.sections.groupby("trace_id"):
        grp = grp.sort_values("start_ns")
        assert (grp["start_ns"].iloc[1:].values == grp["end_ns"].iloc[:-1].values).all()
    assert len(a.rpc_delays) == 20
    assert (a.rpc_delays["scheduling_ns"] == 5_000).all()  # server starts 5 µs after the client
    assert list(a.what_if["scenario"]) == ["remove:back"]
    assert a.what_if["mean_ratio"].iloc[0] < 1.0
    assert not a.paths.empty and a.paths["count"].sum() == 20


def test_analyze_command_stores_and_reports(tmp_path):
    _needs_engine()
    f = tmp_path / "t.json"
    write_traces(f)
    results = tmp_path / "results"
    env = {**os.environ, "TAILSCOPE_BUILD_DIR": str(BUILD), "TAILSCOPE_RESULTS": str(results)}
    r = subprocess.run(
        [sys.executable, "-m", "tailscope.cli", "analyze", "--what-if-no-delays", str(f)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    run_id = os.readlink(results / "latest")
    html = (results / run_id / "report.html").read_text()
    assert "Critical paths of traces" in html and "Bottleneck services" in html and "What if" in html
    assert (results / run_id / "artifacts" / "analyze" / "critical_paths.ndjson").exists()
    con = duckdb.connect(str(results / "tailscope.duckdb"), read_only=True)
    n = con.execute("SELECT count(*) FROM measurements WHERE run_id = ? AND name = 'cp_time'", [run_id]).fetchone()[0]
    assert n == 2  # front and back
    # The engine's own measurements, exact: back's server time is 20..39 µs, and
    # its critical-path time per request is that (the rest of the RPC is front's).
    row = con.execute(
        "SELECT engine, samples, min_ns, p50_ns, max_ns FROM measurements "
        "WHERE run_id = ? AND name = 'cp_time' AND variant = 'back'",
        [run_id],
    ).fetchone()
    assert row == ("tailscope-critpath", 20, 20_000, 29_000, 39_000)
    # No probe tags in these traces: stored as unavailable with the engine's reason.
    reasons = dict(con.execute("SELECT name, reason FROM unavailable WHERE run_id = ?", [run_id]).fetchall())
    assert "tailscope.scheduling_delay_ns" in reasons["probe_scheduling"]
    con.close()


def test_invalid_trace_file_fails_cleanly(tmp_path):
    _needs_engine()
    f = tmp_path / "bad.json"
    f.write_text('{"data": [{"traceID": "x", "spans": [}')
    results = tmp_path / "results"
    env = {**os.environ, "TAILSCOPE_BUILD_DIR": str(BUILD), "TAILSCOPE_RESULTS": str(results)}
    r = subprocess.run(
        [sys.executable, "-m", "tailscope.cli", "analyze", str(f)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert r.returncode == 1
    assert "bad.json" in r.stderr and "offset" in r.stderr
    assert not list(results.glob(".staging-*"))


def test_crisp_fixtures_analyze_end_to_end(tmp_path, monkeypatch):
    _needs_engine()
    fixtures = require_fixture(CRITPATH_FIXTURES / "crisp")
    monkeypatch.setenv("TAILSCOPE_BUILD_DIR", str(BUILD))
    from tailscope.analyze import critical_paths

    files = sorted(fixtures.glob("[0-9]*.json"), key=lambda p: int(p.stem))
    a = critical_paths(*files, algorithm="crisp")
    assert a.document["algorithm"] == "crisp"
    assert a.traces["analyzed"].sum() == len(files)
