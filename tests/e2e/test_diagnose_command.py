"""`tailscope diagnose` end to end (docs/diagnose.md): Jaeger JSON through the engine's reader
(tailscope-critpath --span-dump) into the inference, the printed lines and the JSON document."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner
from test_twin import jaeger, rpc, write

from conftest import needs_engine
from tailscope.cli import main

pytestmark = needs_engine("tailscope-critpath")


def locked_requests(n: int, seed: int) -> list[list[tuple]]:
    """n requests to front /api, each calling db `query` behind one lock (FCFS, one server): a call's
    span holds its wait for the lock and its 1 ms (median) of work. Times in µs, as Jaeger's."""
    rng = np.random.default_rng(seed)
    arrivals_us = np.cumsum(rng.exponential(1500.0, n)).astype(int) + 1000  # ~0.75 of the lock's capacity
    work_us = rng.lognormal(np.log(1000.0), 0.5, n).astype(int) + 3
    traces, free_us = [], 0
    for i in range(n):
        begin = max(int(arrivals_us[i]), free_us)
        free_us = begin + int(work_us[i])
        t0 = int(arrivals_us[i]) - 20
        call = rpc(f"q{i}", "r", "front", "db", "query", int(arrivals_us[i]), free_us - int(arrivals_us[i]))
        traces.append([("r", None, "front", "/api", t0, free_us + 20 - t0, "server"), *call])
    return traces


def test_diagnose_finds_a_lock_in_jaeger_traces_and_writes_the_document(tmp_path):
    path = write(tmp_path, jaeger(locked_requests(400, seed=1)))
    out = tmp_path / "diagnosis.json"
    r = CliRunner().invoke(main, ["diagnose", str(path), "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "db:query_server: capacity 1 — a queue in front of 1 server" in r.output
    doc = json.loads(out.read_text())
    assert doc["schema"] == "tailscope.diagnosis/1" and doc["traces"] == 400
    pops = {(p["service"], p["operation"]): p for p in doc["populations"]}
    server = pops[("db", "query_server")]["capacity"]
    assert server["verdict"] == "limit" and server["servers"] == 1
    assert 900_000 <= server["service_p50_ns"] <= 1_100_000  # the work's median, 1 ms, within 10 %
    assert len(server["waits"]["rows"]) == 400


def test_diagnose_of_one_request_at_a_time_asks_for_a_higher_rate(tmp_path):
    traces = []
    for i in range(40):
        t0 = 1000 + i * 50_000
        traces.append(
            [("r", None, "front", "/api", t0, 3000, "server"), *rpc(f"q{i}", "r", "front", "db", "q", t0 + 10, 2000)]
        )
    r = CliRunner().invoke(main, ["diagnose", str(write(tmp_path, jaeger(traces)))])
    assert r.exit_code == 0, r.output
    assert "capacity not identifiable: the traces never queued" in r.output
    assert "record at a higher rate" in r.output


def test_diagnose_without_traces_is_a_usage_error():
    r = CliRunner().invoke(main, ["diagnose"])
    assert r.exit_code == 2 and "give trace FILES or --jaeger URL" in r.output


def request_log(tmp_path, rows: list[tuple[int, int]]):
    """rows: (trace number, client latency ns) → a tailscope-load request log."""
    path = tmp_path / "requests.csv"
    lines = ["# tailscope.request-log/1", "trace_id,intended_unix_ns,latency_ns,ok"]
    lines += [f"{n:032x},{1_700_000_000_000_000_000 + n},{lat},1" for n, lat in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_diagnose_joins_a_request_log_to_the_traces_by_trace_id(tmp_path):
    traces = locked_requests(400, seed=2)
    path = write(tmp_path, jaeger(traces))  # trace ids 1 … 400, 16 hex digits as Jaeger trims them
    # Each request took its root span plus 100 µs no span covers; 10 more were never traced.
    rows = [(n + 1, spans[0][5] * 1000 + 100_000) for n, spans in enumerate(traces)]
    rows += [(10_000 + i, 5_000_000) for i in range(10)]
    out = tmp_path / "diagnosis.json"
    r = CliRunner().invoke(
        main, ["diagnose", str(path), "--requests", str(request_log(tmp_path, rows)), "--json", str(out)]
    )
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())  # the console wraps long lines
    assert "client latency joined to traces: 400 of 410 answered requests have a trace; 10 have none" in text
    client = json.loads(out.read_text())["client"]
    assert (client["joined"], client["untraced"]) == (400, 10)
    assert client["gap_p50_ns"] == client["gap_p99_ns"] == 100_000
    assert "10 of 410 requests have no trace" in client["unavailable"]["untraced"]


def test_diagnose_refuses_a_file_that_is_not_a_request_log(tmp_path):
    path = write(tmp_path, jaeger(locked_requests(40, seed=3)))
    bad = tmp_path / "bad.csv"
    bad.write_text("trace_id,latency\n")
    r = CliRunner().invoke(main, ["diagnose", str(path), "--requests", str(bad)])
    assert r.exit_code == 1
    assert "not a request log" in " ".join(r.output.split())
