"""The sampling switch (issue 30): SIGUSR1 to a running graph pauses its front's root sampling, SIGUSR2
resumes it at --trace-sample, and neither stops a service — so tracing on and off can be compared on
one warmed graph (studies/socialnet/tracing.py)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
from pathlib import Path

import pytest

from conftest import needs_engine
from tailscope.lab import topology
from tailscope.lab.graph import PATH as FRONT_PATH
from tailscope.lab.graph import graph, set_trace_sampling

pytestmark = needs_engine("tailscope-svc")

# The supervisor forwards the signal and each service takes it in its wait loop, both at once; the
# pause leaves room for a loaded machine's scheduling before the next request is sent.
SWITCH_SETTLE_S = 0.3


@pytest.fixture(scope="module")
def topo_json(tmp_path_factory) -> Path:
    return topology.to_engine_json(topology.SOCIALNET, tmp_path_factory.mktemp("topo") / "socialnet.json")


def _send(port: int, trace_ids: list[int]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for t in trace_ids:
        # The front decides sampling by its own rate; the traceparent only names the trace, so each
        # request's spans can be told apart.
        conn.request("GET", FRONT_PATH, headers={"traceparent": f"00-{t:032x}-00f067aa0ba902b7-01"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200
    conn.close()


def test_paused_requests_record_no_span_and_resumed_ones_do(topo_json, tmp_path):
    before, paused, resumed = (
        [0x100 + i for i in range(3)],
        [0x200 + i for i in range(5)],
        [0x300 + i for i in range(4)],
    )
    traces, out = tmp_path / "traces", tmp_path / "svc.json"
    with graph(topo_json, "coroutine", out, trace_sample=1.0, traces=traces, stores="simulated") as (port, ready):
        _send(port, before)
        set_trace_sampling(ready, False)
        time.sleep(SWITCH_SETTLE_S)
        _send(port, paused)
        set_trace_sampling(ready, True)
        time.sleep(SWITCH_SETTLE_S)
        _send(port, resumed)
    doc = json.loads(out.read_text())
    assert doc["totals"]["restarts"] == [], "a sampling signal stopped a service"
    recorded = {int(t["traceID"], 16) for t in json.loads((traces / "traces.jaeger.json").read_text())["data"]}
    assert set(before) <= recorded
    assert not set(paused) & recorded
    assert set(resumed) <= recorded


def test_a_front_restarted_while_paused_stays_paused(topo_json, tmp_path):
    front = json.loads(topo_json.read_text())["front"]["service"]
    paused, resumed = [0x400 + i for i in range(3)], [0x500 + i for i in range(3)]
    traces, out = tmp_path / "traces", tmp_path / "svc.json"
    with graph(topo_json, "coroutine", out, trace_sample=1.0, traces=traces, stores="simulated") as (port, ready):
        set_trace_sampling(ready, False)
        time.sleep(SWITCH_SETTLE_S)
        os.kill(ready["pids"][front], signal.SIGKILL)  # the supervisor restarts it (--restart-ms, 1 s)
        _send(port, paused)  # queued on the supervisor's listener until the new front takes them
        set_trace_sampling(ready, True)
        time.sleep(SWITCH_SETTLE_S)
        _send(port, resumed)
    doc = json.loads(out.read_text())
    assert [r["service"] for r in doc["totals"]["restarts"]] == [front]
    recorded = {int(t["traceID"], 16) for t in json.loads((traces / "traces.jaeger.json").read_text())["data"]}
    assert not set(paused) & recorded
    assert set(resumed) <= recorded
