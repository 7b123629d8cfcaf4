"""The Python side of trace analysis: DataFrames for notebooks and `tailscope analyze`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from conftest import BUILD, CRITPATH_FIXTURES, REPO, needs_engine, require_fixture


@pytest.fixture
def critpath_from_build(monkeypatch):
    """For tailscope.traces.critpath called in this process: the tailscope-critpath of BUILD
    (the tests that use it are marked needs_engine("tailscope-critpath"))."""
    monkeypatch.setenv("TAILSCOPE_BUILD_DIR", str(BUILD))


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


@needs_engine("tailscope-critpath")
def test_critical_paths_returns_dataframes(tmp_path, critpath_from_build):
    from tailscope.traces.critpath import critical_paths

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
    assert not a.sections.empty, "no sections"
    for _tid, grp in a.sections.groupby("trace_id"):
        grp = grp.sort_values("start_ns")
        assert (grp["start_ns"].iloc[1:].values == grp["end_ns"].iloc[:-1].values).all()
    assert len(a.rpc_delays) == 20
    assert (a.rpc_delays["scheduling_ns"] == 5_000).all()  # server starts 5 µs after the client
    assert list(a.what_if["scenario"]) == ["remove:back"]
    assert a.what_if["mean_ratio"].iloc[0] < 1.0
    assert not a.paths.empty and a.paths["count"].sum() == 20


@needs_engine("tailscope-critpath")
def test_analyze_command_stores_and_reports(tmp_path):
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
    # The run folder keeps the trace index by default, not every trace's whole result.
    assert (results / run_id / "artifacts" / "analyze" / "trace_index.ndjson").exists()
    assert not (results / run_id / "artifacts" / "analyze" / "critical_paths.ndjson").exists()
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


@needs_engine("tailscope-critpath")
def test_analyze_passes_jobs_and_per_trace_and_records_them(tmp_path):
    f = tmp_path / "t.json"
    write_traces(f)
    results = tmp_path / "results"
    env = {**os.environ, "TAILSCOPE_BUILD_DIR": str(BUILD), "TAILSCOPE_RESULTS": str(results)}
    allowed = len(os.sched_getaffinity(0))
    for jobs, per_trace in (("1", "index"), (str(allowed + 1), "full")):
        r = subprocess.run(
            [sys.executable, "-m", "tailscope.cli", "analyze", "--jobs", jobs, "--per-trace", per_trace, str(f)],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
        run_id = os.readlink(results / "latest")
        con = duckdb.connect(str(results / "tailscope.duckdb"), read_only=True)
        (doc,) = con.execute(
            "SELECT document FROM documents WHERE run_id = ? AND study = 'analyze'", [run_id]
        ).fetchone()
        con.close()
        doc = json.loads(doc)
        # The engine's count after its cap to the allowed CPUs.
        assert doc["jobs"] == doc["config"]["jobs"] == min(int(jobs), allowed)
        assert doc["config"]["per_trace"] == per_trace
        art = results / run_id / "artifacts" / "analyze"
        assert (art / "critical_paths.ndjson").exists() == (per_trace == "full")
        assert len((art / "trace_index.ndjson").read_text().splitlines()) == doc["summary"]["traces"]
    for flag, bad in (("--jobs", "0"), ("--per-trace", "some")):
        r = subprocess.run(
            [sys.executable, "-m", "tailscope.cli", "analyze", flag, bad, str(f)],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=60,
        )
        assert r.returncode == 2 and flag in r.stderr, (flag, r.stderr)


@needs_engine("tailscope-critpath")
def test_invalid_trace_file_fails_cleanly(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{"data": [{"traceID": "x", "spans": [}')
    results = tmp_path / "results"
    # Wide lines: the error names the file, and a narrow terminal would wrap a long tmp path
    # (pytest-xdist adds popen-gwN/ to it) in the middle of "bad.json".
    env = {**os.environ, "TAILSCOPE_BUILD_DIR": str(BUILD), "TAILSCOPE_RESULTS": str(results), "COLUMNS": "1000"}
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


@needs_engine("tailscope-critpath")
def test_crisp_fixtures_analyze_end_to_end(tmp_path, critpath_from_build):
    fixtures = require_fixture(CRITPATH_FIXTURES / "crisp")
    from tailscope.traces.critpath import critical_paths

    files = sorted(fixtures.glob("[0-9]*.json"), key=lambda p: int(p.stem))
    a = critical_paths(*files, algorithm="crisp")
    assert a.document["algorithm"] == "crisp"
    assert a.traces["analyzed"].sum() == len(files)


def write_dsb_traces(path: Path, n: int = 3) -> None:
    """DeathStarBench-shaped traces as its Jaeger export has them: no span.kind,
    <call>_client spans in the caller, <call>_server spans in the callee.

    nginx   /compose              0..1000 µs
    nginx    compose_post_client 10..990
    compose   compose_post_server 20..980    pair: sched 10, join 10 µs
    compose    compose_text_client 30..330   ┐ one launch: stagger 7 µs
    compose    compose_uid_client  37..100   ┘
    text        compose_text_server 40..300  pair: sched 10, join 30 µs
    uid         compose_uid_server  39..95   pair: sched 2, join 5 µs
    uid         compose_uid_server  60..90   retry: counted, not paired
    """
    data = []
    for i in range(n):
        t = f"d{i:04d}"
        base = 1_000_000 + i * 10_000
        spans = [
            _span(t, "root", None, "ng", "/compose", base, 1000),
            _span(t, "cpc", "root", "ng", "compose_post_client", base + 10, 980),
            _span(t, "cps", "cpc", "cp", "compose_post_server", base + 20, 960),
            _span(t, "ctc", "cps", "cp", "compose_text_client", base + 30, 300),
            _span(t, "cuc", "cps", "cp", "compose_uid_client", base + 37, 63),
            _span(t, "cts", "ctc", "tx", "compose_text_server", base + 40, 260),
            _span(t, "cus", "cuc", "ui", "compose_uid_server", base + 39, 56),
            _span(t, "cus2", "cuc", "ui", "compose_uid_server", base + 60, 30),
        ]
        processes = {
            "ng": {"serviceName": "nginx-web-server"},
            "cp": {"serviceName": "compose-post-service"},
            "tx": {"serviceName": "text-service"},
            "ui": {"serviceName": "unique-id-service"},
        }
        data.append({"traceID": t, "spans": spans, "processes": processes})
    path.write_text(json.dumps({"data": data}))


@needs_engine("tailscope-critpath")
def test_pairs_inferred_from_deathstarbench_traces_without_tags(tmp_path, critpath_from_build):
    from tailscope.traces.critpath import critical_paths

    f = tmp_path / "dsb.json"
    write_dsb_traces(f)
    a = critical_paths(f)
    pairs = {
        (r.client_operation, r.server_operation): (r.scheduling_ns, r.join_ns, r.rule)
        for r in a.rpc_delays[a.rpc_delays["trace_id"] == "d0000"].itertuples()
    }
    assert pairs == {
        ("compose_post_client", "compose_post_server"): (10_000, 10_000, "cross_process_parent"),
        ("compose_text_client", "compose_text_server"): (10_000, 30_000, "cross_process_parent"),
        ("compose_uid_client", "compose_uid_server"): (2_000, 5_000, "cross_process_parent"),
    }
    p = a.document["delays"]["pairing"]
    assert p["pairs"] == 9 and p["by_rule"]["cross_process_parent"] == 9 and p["by_rule"]["span_kind_tag"] == 0
    assert p["name_confirmed_cross_process"] == 9 and p["retried_server_children"] == 3
    stagger = a.document["delays"]["launch_stagger_ns"]
    assert stagger["count"] == 3 and stagger["min"] == 7_000 and stagger["max"] == 7_000


def write_untraceable(path: Path) -> None:
    """One service, no tags, no _client/_server names: no RPC pair can be inferred."""
    spans = [_span("m1", "a", None, "p", "handle", 1_000_000, 100), _span("m1", "b", "a", "p", "work", 1_000_010, 50)]
    path.write_text(
        json.dumps({"data": [{"traceID": "m1", "spans": spans, "processes": {"p": {"serviceName": "mono"}}}]})
    )


def _cli(args: list[str], results: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TAILSCOPE_BUILD_DIR": str(BUILD), "TAILSCOPE_RESULTS": str(results)}
    return subprocess.run(
        [sys.executable, "-m", "tailscope.cli", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )


@needs_engine("tailscope-critpath")
def test_no_pairs_is_unavailable_end_to_end(tmp_path):
    f = tmp_path / "mono.json"
    write_untraceable(f)
    results = tmp_path / "results"
    r = _cli(["analyze", str(f)], results)
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())  # rich wraps long lines
    assert "RPC scheduling delay: unavailable: no RPC pair found" in out
    assert "delay on the critical path: unavailable: no RPC pair found" in out
    assert "delay share of end-to-end time: unavailable" in out
    assert "n=0" not in out and "p99 0" not in out
    run_id = os.readlink(results / "latest")
    html = (results / run_id / "report.html").read_text()
    assert "unavailable: no RPC pair found" in html
    con = duckdb.connect(str(results / "tailscope.duckdb"), read_only=True)
    names = {n for (n,) in con.execute("SELECT name FROM unavailable WHERE run_id = ?", [run_id]).fetchall()}
    stored = {n for (n,) in con.execute("SELECT name FROM measurements WHERE run_id = ?", [run_id]).fetchall()}
    con.close()
    assert {"rpc_scheduling", "rpc_join", "launch_stagger", "delay_on_path"} <= names
    assert not ({"rpc_scheduling", "rpc_join", "launch_stagger", "delay_on_path"} & stored)


@needs_engine("tailscope-critpath")
def test_timeline_svg_has_one_bar_per_span_and_marks_the_critical_path(tmp_path):
    f = tmp_path / "dsb.json"
    write_dsb_traces(f)
    results = tmp_path / "results"
    r = _cli(["analyze", "--timeline", "--trace", "d0001", str(f)], results)
    assert r.returncode == 0, r.stderr
    svgs = list((results / os.readlink(results / "latest")).glob("artifacts/analyze/timelines/*.svg"))
    assert [p.name for p in svgs] == ["timeline-d0001.svg"]
    svg = svgs[0].read_text()
    bars = re.findall(r'<rect class="span( critical)?" data-span-id="([^"]+)"', svg)
    # 8 spans, one bar each; capstone path: root → post client → post server → text client → text server
    assert sorted(b[1] for b in bars) == sorted(["root", "cpc", "cps", "ctc", "cuc", "cts", "cus", "cus2"])
    assert {b[1] for b in bars if b[0]} == {"root", "cpc", "cps", "ctc", "cts"}
    assert svg.count('class="launch"') == 3 and svg.count('class="join"') == 3
    assert "<script" not in svg


def _index(path: Path, traces: list[dict]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in traces))
    return path


def test_timeline_picks_the_median_and_p99_trace(tmp_path):
    from tailscope.traces.timeline import choose_traces

    # As the engine writes trace_index.ndjson: span_count and start_ns too; no times when not analyzed.
    traces = [
        {"trace_id": f"t{i}", "analyzed": True, "span_count": 3, "start_ns": 5, "end_to_end_ns": 1000 + i}
        for i in range(200)
    ]
    traces.append({"trace_id": "bad", "analyzed": False, "span_count": 2})
    traces.insert(7, {"trace_id": "nul", "analyzed": True, "span_count": 1, "end_to_end_ns": None})
    index = _index(tmp_path / "i.ndjson", traces[::-1])  # not in duration order
    assert choose_traces(index, []) == [("t99", "median"), ("t197", "p99")]
    assert choose_traces(index, ["x"]) == [("x", "--trace")]
    assert choose_traces(_index(tmp_path / "empty.ndjson", []), []) == []
    assert choose_traces(tmp_path / "absent.ndjson", []) == []
    assert choose_traces(_index(tmp_path / "none.ndjson", traces[-1:]), []) == []  # none analyzed
    # Nearest rank of one trace: both labels; equal durations: by trace id, as Python orders the pairs.
    assert choose_traces(_index(tmp_path / "one.ndjson", traces[:1]), []) == [("t0", "median and p99")]
    ties = [{"trace_id": tid, "analyzed": True, "end_to_end_ns": 7} for tid in ("b", "é", "a", "c")]
    expected = sorted((7, t["trace_id"]) for t in ties)
    assert choose_traces(_index(tmp_path / "ties.ndjson", ties), []) == [
        (expected[1][1], "median"),
        (expected[3][1], "p99"),
    ]
