"""tailscope-svc --otlp-endpoint: live OTLP/HTTP JSON export of the socialnet graph's
spans to a collector stand-in that accepts, refuses, stalls or answers 503 — the
spans it receives are exactly the spans the run wrote to its files, and a broken
endpoint costs the handlers nothing (every request still answered), its losses
counted by cause.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import engine_path, needs_engine
from tailscope.lab import topology
from tailscope.lab.engines import serve
from tailscope.lab.graph import PATH as FRONT_PATH

SVC = engine_path("tailscope-svc")
REQUESTS = 20

pytestmark = needs_engine("tailscope-svc")


class Collector:
    """A loopback OTLP/HTTP receiver: mode 'ok' (200 and keep the spans), '503', or
    'stall' (read the request, never answer until closed)."""

    def __init__(self, mode: str):
        self.mode = mode
        self.span_ids: list[str] = []
        self.posts = 0
        self.paths: set[str] = set()
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.posts += 1
                outer.paths.add(self.path)
                if outer.mode == "stall":
                    outer.release.wait(30)
                    return
                if outer.mode == "503":
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                doc = json.loads(body)
                for rs in doc["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        outer.span_ids += [s["spanId"] for s in ss["spans"]]
                reply = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Collector:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def refused_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def topo_json(tmp_path_factory) -> Path:
    return topology.to_engine_json(topology.SOCIALNET, tmp_path_factory.mktemp("topo") / "socialnet.json")


@contextmanager
def graph(topo: Path, tmp: Path, endpoint: str, *extra: str) -> Iterator[dict]:
    out = tmp / "result.json"
    args = ["--topology", str(topo), "--all", "--model", "coroutine", "--port", "0", "--out", str(out)]
    args += ["--trace-sample", "1", "--traces", str(tmp / "traces"), "--otlp-endpoint", endpoint, *extra]
    with serve("tailscope-svc", args, stop_timeout_s=30.0) as srv:
        yield srv.ready


def drive(ready: dict, n: int = REQUESTS) -> list[int]:
    """n compose-post calls, one connection; their HTTP statuses."""
    conn = http.client.HTTPConnection("127.0.0.1", ready["listening"], timeout=10)
    statuses = []
    for _ in range(n):
        conn.request("POST", FRONT_PATH, body="text=hello @alice http://example.com")
        r = conn.getresponse()
        r.read()
        statuses.append(r.status)
    conn.close()
    return statuses


def file_span_ids(tmp: Path) -> list[str]:
    doc = json.loads((tmp / "traces" / "traces.jaeger.json").read_text())
    return [s["spanID"] for t in doc["data"] for s in t["spans"]]


def test_spans_arrive_live_and_match_the_files(topo_json, tmp_path):
    with Collector("ok") as c:
        with graph(topo_json, tmp_path, f"http://127.0.0.1:{c.port}") as ready:
            assert drive(ready) == [200] * REQUESTS
    doc = json.loads((tmp_path / "result.json").read_text())
    files = file_span_ids(tmp_path)
    assert len(files) == doc["tracing"]["spans"] > 0
    assert sorted(c.span_ids) == sorted(files)  # every span once, none invented
    assert c.paths == {"/v1/traces"}
    e = doc["otlp_export"]
    assert e["spans_exported"] == e["spans_offered"] == len(files)
    assert e["spans_dropped_queue_full"] == e["spans_dropped_export_failed"] == e["spans_dropped_shutdown"] == 0
    assert e["batches_failed"] == 0 and e["http_statuses"] == {"200": e["batches_exported"]}


@pytest.mark.parametrize("mode", ["503", "stall", "refused"])
def test_a_broken_endpoint_never_delays_requests_and_losses_are_counted(mode, topo_json, tmp_path):
    with Collector("ok" if mode == "refused" else mode) as c:
        port = refused_port() if mode == "refused" else c.port
        with graph(topo_json, tmp_path, f"http://127.0.0.1:{port}") as ready:
            assert drive(ready) == [200] * REQUESTS
    doc = json.loads((tmp_path / "result.json").read_text())
    assert len(file_span_ids(tmp_path)) == doc["tracing"]["spans"] > 0  # the files are whole regardless
    e = doc["otlp_export"]
    assert e["spans_exported"] == 0
    lost = e["spans_dropped_queue_full"] + e["spans_dropped_export_failed"] + e["spans_dropped_shutdown"]
    assert lost == e["spans_offered"] == doc["tracing"]["spans"]
    assert e["last_error"]
    # Bounded retries: per service, at most 3 attempts per failed batch (+ the one cut short at shutdown).
    assert e["attempts_failed"] > 0
    assert doc["services"], "no service in the document"
    for s in doc["services"].values():
        x = s["otlp_export"]
        assert x["attempts_failed"] <= 3 * (x["batches_failed"] + 1)
    if mode == "503":
        # Every answer was a 503; an attempt cut short by the shutdown grace has no status.
        assert list(e["http_statuses"]) == ["503"]
        assert 0 < e["http_statuses"]["503"] <= e["attempts_failed"] and c.posts >= e["http_statuses"]["503"]
    if mode == "refused":
        assert c.posts == 0 and "refused" in e["last_error"].lower()


def test_a_full_queue_drops_spans_and_counts_them(topo_json, tmp_path):
    with Collector("stall") as c:
        with graph(topo_json, tmp_path, f"http://127.0.0.1:{c.port}", "--otlp-queue-spans", "16") as ready:
            assert drive(ready, 2) == [200] * 2
            # Once the first batch is due (200 ms flush interval), the exporter sits in the stalled
            # POST (1 s per attempt, 3 attempts) and nothing drains the 16-span queues.
            deadline = time.monotonic() + 30
            while c.posts == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert drive(ready) == [200] * REQUESTS
    doc = json.loads((tmp_path / "result.json").read_text())
    assert doc["otlp_export"]["spans_dropped_queue_full"] > 0
    assert {s["otlp_export"]["queue_capacity_spans"] for s in doc["services"].values()} == {16}


@pytest.mark.parametrize(
    "endpoint, extra, message",
    [
        ("http://192.0.2.3:4318", [], "loopback"),
        ("http://198.20.0.1:4318", [], "198.18.0.0/15"),
        ("https://127.0.0.1:4318", [], "expected http://"),
        ("http://127.0.0.1:70000", [], "1 … 65535"),
        ("http://127.0.0.1:4318", ["--trace-sample", "0"], "--trace-sample > 0"),
    ],
)
def test_bad_endpoints_are_refused_before_anything_starts(endpoint, extra, message, topo_json):
    args = [str(SVC), "--topology", str(topo_json), "--all", "--otlp-endpoint", endpoint]
    args += extra or ["--trace-sample", "1"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert message in r.stderr, r.stderr
    assert r.stdout == ""  # no ready line: nothing was started
