"""W3C traceparent round trip (issue 26, item 4): tailscope-load --traceparent against tailscope-svc's
HTTP front at 100 % sampling — every trace the graph recorded has an id the load generator sent, one
per request, and `tailscope diagnose --requests` joins every request to its trace."""

from __future__ import annotations

import http.client
import json
import subprocess
from pathlib import Path

import pytest

from conftest import engine_path, needs_engine
from tailscope.diagnose.client import read_request_log
from tailscope.diagnose.diagnosis import diagnose
from tailscope.lab import topology
from tailscope.lab.engines import serve
from tailscope.lab.graph import PATH as FRONT_PATH
from tailscope.traces.spans import read_traces

pytestmark = needs_engine("tailscope-svc", "tailscope-load", "tailscope-critpath")


@pytest.fixture(scope="module")
def topo_json(tmp_path_factory) -> Path:
    return topology.to_engine_json(topology.SOCIALNET, tmp_path_factory.mktemp("topo") / "socialnet.json")


def test_traces_continue_the_ids_the_load_generator_sent_and_diagnose_joins_them(topo_json, tmp_path):
    log = tmp_path / "requests.csv"
    args = ["--topology", str(topo_json), "--all", "--model", "coroutine", "--port", "0"]
    args += ["--out", str(tmp_path / "svc.json"), "--trace-sample", "1", "--traces", str(tmp_path / "traces")]
    with serve("tailscope-svc", args, stop_timeout_s=30.0) as srv:
        load = subprocess.run(
            [
                str(engine_path("tailscope-load")),
                f"http://127.0.0.1:{srv.ready['listening']}{FRONT_PATH}",
                "-R", "40", "-d", "2s", "--warmup", "0.5s", "-c", "2",
                "--traceparent", "--request-log", str(log), "--out", str(tmp_path / "load.json"),
            ],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert load.returncode == 0, load.stderr
    load_doc = json.loads((tmp_path / "load.json").read_text())
    assert load_doc["config"]["traceparent"] is True
    rows = read_request_log(log)
    assert len(rows) == load_doc["load"]["request_log"]["rows"] == load_doc["load"]["requests_completed"] > 0
    assert load_doc["load"]["request_log"]["dropped_over_limit"] == 0
    sent = {r.trace_id for r in rows}
    assert len(sent) == len(rows), "a trace id was sent twice"

    doc = json.loads((tmp_path / "traces" / "traces.jaeger.json").read_text())
    recorded = {int(t["traceID"], 16) for t in doc["data"]}
    # Warm-up requests are traced but not logged (the log is the measured window's): every logged
    # request has its trace, and every trace is one the generator sent (none started by the front).
    assert sent <= recorded
    assert len(recorded) == load_doc["load"]["requests_sent"] + len(recorded - sent)
    roots = [s for t in doc["data"] for s in t["spans"] if not s.get("references")]
    assert len(roots) == len(recorded), "the front's span stays the root of each continued trace"

    traceset = read_traces([tmp_path / "traces" / "traces.jaeger.json"])
    client = diagnose(traceset, requests=rows).client
    assert client is not None
    assert (client.joined, client.untraced) == (len(rows), 0)
    # The root span lies inside the client's request on one machine's clock (bar a span whose end was
    # stamped after its response left, counted in negative_gaps): the median gap is positive.
    assert client.gap_p50_ns is not None and 0 < client.gap_p50_ns < client.joined_client_p50_ns
    assert client.traces_without_request == len(recorded - sent)


def test_an_invalid_traceparent_starts_a_new_trace(topo_json, tmp_path):
    valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    invalid = "00-4BF92F3577B34DA6A3CE929D0E0E4737-00f067aa0ba902b7-01"  # upper case: ignored (W3C)
    args = ["--topology", str(topo_json), "--all", "--model", "coroutine", "--port", "0"]
    args += ["--out", str(tmp_path / "svc.json"), "--trace-sample", "1", "--traces", str(tmp_path / "traces")]
    with serve("tailscope-svc", args, stop_timeout_s=30.0) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.ready["listening"], timeout=10)
        for headers in ({"traceparent": valid}, {"traceparent": invalid}, {}):
            conn.request("GET", FRONT_PATH, headers=headers)
            response = conn.getresponse()
            response.read()
            assert response.status == 200
        conn.close()
    doc = json.loads((tmp_path / "traces" / "traces.jaeger.json").read_text())
    recorded = {int(t["traceID"], 16) for t in doc["data"]}
    assert len(recorded) == 3
    assert 0x4BF92F3577B34DA6A3CE929D0E0E4736 in recorded
    assert 0x4BF92F3577B34DA6A3CE929D0E0E4737 not in recorded
