"""HotROD, a real application, in the lab (issue 26 item 5): the W3C traceparent round trip through it
(tailscope-load → HotROD's four services → OTLP → a real Jaeger → the query API), every port on
loopback, and a port taken or a bad start said clearly with nothing left running.

Needs the bootstrap's Jaeger and HotROD (Go >= 1.23); skipped with the reason when they are absent."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import needs_engine, needs_go_tools
from tailscope.lab import hotrod as lab_hotrod
from tailscope.lab import tools
from tailscope.lab.hotrod import CUSTOMERS, HotrodFlags, hotrod
from tailscope.lab.jaeger import jaeger
from tailscope.studies.diagnose.hotrod_run import FRONT_SERVICE, measure_phase

needs_tools = needs_go_tools()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (reaped by its parent shortly).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


@needs_tools
@needs_engine("tailscope-load", "tailscope-critpath")
def test_every_logged_request_is_a_trace_in_jaeger(tmp_path):
    """Low rate, a few seconds, all four customers: each id tailscope-load sent and logged comes back
    from Jaeger as a trace rooted in HotROD's frontend that reaches its other services."""
    phase = measure_phase(tmp_path, HotrodFlags(), 3.0, 3.0, 0.5, load_cpus=[], server_cpus=[], pacing="sleep")
    load = phase.load["load"]
    assert phase.load["config"]["traceparent"] is True
    assert len(phase.rows) == load["request_log"]["rows"] == load["requests_completed"] > 0
    assert all(r.ok for r in phase.rows)
    sent = {r.trace_id for r in phase.rows}
    assert len(sent) == len(phase.rows)
    traces = json.loads(phase.traces_file.read_text())["data"]
    found = {int(t["traceID"], 16): t for t in traces}
    assert sent <= set(found), f"{len(sent - set(found))} logged requests have no trace"
    assert phase.missing_trace_ids == 0
    for tid in sent:
        t = found[tid]
        services = {t["processes"][s["processID"]]["serviceName"] for s in t["spans"]}
        assert {FRONT_SERVICE, "customer", "driver", "route", "mysql"} <= services
        # The root continues the generator's trace: its parent is the traceparent's span id, which no
        # span of the trace has (the generator records none).
        ids = {sp["spanID"] for sp in t["spans"]}
        roots = [sp for sp in t["spans"] if not any(r["spanID"] in ids for r in sp.get("references", []))]
        assert [(t["processes"][r["processID"]]["serviceName"], r["operationName"]) for r in roots] == [
            (FRONT_SERVICE, "/dispatch")
        ]
        assert roots[0]["references"], "the root span did not continue the traceparent"
    # The mix reached every customer (one query per request, tagged by the customer id).
    paths = {m["path"] for m in phase.load["config"]["mix"]}
    assert paths == {f"/dispatch?customer={c}" for c in CUSTOMERS}


def _listening(pids: set[int]) -> list[str]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if any(f"pid={p}," in line for p in pids)]


@needs_tools
def test_hotrod_and_jaeger_listen_on_loopback_only_and_stop_by_pid(tmp_path):
    with jaeger(tmp_path) as j, hotrod(tmp_path, j.otlp_url) as h:
        lines = _listening({j.pid, h.pid})
        pids = (j.pid, h.pid)
    addresses = [line.split()[3] for line in lines]
    assert addresses, "neither process was seen listening"
    assert all(a.startswith("127.0.0.1:") for a in addresses), addresses
    ports = {int(a.rsplit(":", 1)[1]) for a in addresses}
    assert ports == {*j.ports, *h.ports.values()}, "a port nobody chose"
    assert not any(_alive(p) for p in pids)


@needs_tools
def test_a_port_taken_is_a_clear_error_and_nothing_keeps_running(tmp_path, monkeypatch):
    """HotROD's frontend port is taken by another listener: HotROD exits, `hotrod()` raises
    ToolStartError with its log's reason, and its process is gone."""
    spawned: list[int] = []
    real_spawn, real_free_port = tools.engines.spawn, tools.free_port

    def spawn(*args, **kwargs):
        proc = real_spawn(*args, **kwargs)
        spawned.append(proc.pid)
        return proc

    monkeypatch.setattr(tools.engines, "spawn", spawn)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1]])
        monkeypatch.setattr(lab_hotrod.tools, "free_port", lambda: next(ports, None) or real_free_port())
        with pytest.raises(tools.ToolStartError, match="hotrod exited .*address already in use"):
            with hotrod(tmp_path, "http://127.0.0.1:9"):
                pytest.fail("HotROD came up on a taken port")
    assert len(spawned) == 1 and not _alive(spawned[0])
