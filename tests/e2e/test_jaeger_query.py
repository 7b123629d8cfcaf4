"""`tailscope analyze --jaeger`: paging through Jaeger's query API (a stand-in that
implements /api/traces' start/end/limit the way Jaeger does), and every failure —
unreachable, HTTP errors, partial pages, a trace that changes between pages —
clear, with nothing stored."""

from __future__ import annotations

import json
import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from conftest import needs_engine
from tailscope.cli import main
from tailscope.traces import jaeger as jq

NOW_US = 1_700_000_000_000_000


def make_trace(i: int, start_us: int, spans: int = 3) -> dict:
    tid = f"{i:032x}"
    out = []
    for k in range(spans):
        out.append(
            {
                "traceID": tid,
                "spanID": f"{i:08x}{k:08x}",
                "operationName": "compose" if k == 0 else f"op{k}",
                "references": [] if k == 0 else [{"refType": "CHILD_OF", "traceID": tid, "spanID": f"{i:08x}{0:08x}"}],
                "startTime": start_us + k * 10,
                "duration": 1000 - k * 100,
                "tags": [{"key": "span.kind", "type": "string", "value": "server"}],
                "processID": "p1" if k == 0 else "p2",
            }
        )
    return {"traceID": tid, "spans": out, "processes": {"p1": {"serviceName": "front"}, "p2": {"serviceName": "back"}}}


class FakeJaeger:
    """Serves `traces` like Jaeger's /api/traces: those starting in [start, end], newest first, at most limit."""

    def __init__(self, traces: list[dict], fault: str = "", fault_at: int = 2):
        self.traces = traces
        self.fault = fault
        self.fault_at = fault_at
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
                outer.requests.append(q)
                status, doc = outer.answer(url.path, q, len(outer.requests))
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, q: dict, n: int) -> tuple[int, dict]:
        if path != "/api/traces":
            return 404, {"errors": [{"code": 404, "msg": "not found"}]}
        if self.fault == "500":
            return 500, {"data": None, "errors": [{"code": 500, "msg": "storage backend unavailable"}]}
        if "service" not in q:
            return 400, {"data": None, "errors": [{"code": 400, "msg": "parameter 'service' is required"}]}
        start, end, limit = int(q["start"]), int(q["end"]), int(q["limit"])
        # Like Jaeger: a trace matches when any of its spans starts in the window; the
        # answer's order is the storage's (here: by trace id, not by time).
        hits = [t for t in self.traces if any(start <= s["startTime"] <= end for s in t["spans"])]
        hits.sort(key=lambda t: t["traceID"][::-1])
        page = hits[:limit]
        if self.fault == "partial" and n >= self.fault_at:
            return 200, {"data": page, "errors": [{"code": 500, "msg": "trace 0003 could not be loaded"}]}
        if self.fault == "grows":
            # A trace still being written: every answer holds it, with one more span each time.
            growing = make_trace(999, NOW_US - 30_000_000)
            growing["spans"] += [{**growing["spans"][-1], "spanID": f"{k:016x}"} for k in range(n)]
            page = [growing, *page[: limit - 1]]
        return 200, {"data": page, "total": len(page), "limit": 0, "offset": 0, "errors": None}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def jaeger(request):
    servers: list[FakeJaeger] = []

    def make(traces: list[dict], fault: str = "", fault_at: int = 2) -> FakeJaeger:
        servers.append(FakeJaeger(traces, fault, fault_at))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def boundary_traces(n: int = 25) -> list[dict]:
    # Two traces share each start time, so a page boundary falls between twins: paging must neither lose nor repeat them.
    return [make_trace(i, NOW_US - 60_000_000 + (i // 2) * 1000) for i in range(n)]


def test_pages_collect_every_trace_once(jaeger):
    traces = boundary_traces()
    j = jaeger(traces)
    got, summary = jq.fetch(jq.JaegerQuery(j.url, "front", limit=1000), page_size=4, now_us=NOW_US)
    assert sorted(t["traceID"] for t in got) == sorted(t["traceID"] for t in traces)
    assert summary["pages"] > 6 and summary["spans"] == 3 * len(traces)
    assert j.requests, "no request reached the fake Jaeger"
    assert all(int(r["limit"]) == 4 and r["service"] == "front" for r in j.requests)


def test_limit_keeps_the_newest_and_operation_and_lookback_are_sent(jaeger):
    j = jaeger(boundary_traces())
    got, _ = jq.fetch(
        jq.JaegerQuery(j.url, "front", operation="compose", lookback_s=120, limit=5), page_size=3, now_us=NOW_US
    )
    assert len(got) == 5
    assert {t["traceID"] for t in got} == {f"{i:032x}" for i in (24, 23, 22, 21, 20)}
    first = j.requests[0]
    assert first["operation"] == "compose" and int(first["end"]) - int(first["start"]) == 120_000_000


@pytest.mark.parametrize(
    "fault, message",
    [
        ("500", "HTTP 500"),
        ("partial", "partial page"),
        ("grows", "changed between pages"),
    ],
)
def test_faults_are_clear_errors(fault, message, jaeger):
    j = jaeger(boundary_traces(), fault)
    with pytest.raises(jq.JaegerQueryError, match=message):
        jq.fetch(jq.JaegerQuery(j.url, "front"), page_size=4, now_us=NOW_US)


def test_more_traces_in_one_microsecond_than_a_page_holds_is_an_error(jaeger):
    j = jaeger(boundary_traces())  # twins: two traces per start time
    with pytest.raises(jq.JaegerQueryError, match="within one microsecond"):
        jq.fetch(jq.JaegerQuery(j.url, "front"), page_size=2, now_us=NOW_US)


def test_unreachable_jaeger_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(jq.JaegerQueryError, match="cannot reach Jaeger"):
        jq.fetch(jq.JaegerQuery(f"http://127.0.0.1:{port}", "front"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--jaeger", "http://192.0.2.1:16686", "--service", "s"], "neither loopback"),
        (["--jaeger", "http://jaeger.example:16686", "--service", "s"], "IP address"),
        (["--jaeger", "ftp://127.0.0.1:16686", "--service", "s"], "http://HOST:PORT"),
        (["--jaeger", "http://127.0.0.1:16686"], "--service"),
        (["--jaeger", "http://127.0.0.1:16686", "--service", "s", "--lookback", "1y"], "--lookback"),
        (["--jaeger", "http://127.0.0.1:16686", "--service", "s", "--lookback", "40d"], "30d"),
        (["--jaeger", "http://127.0.0.1:16686", "--service", "s", "--limit", "0"], "--limit"),
        (["--service", "s"], "option of --jaeger"),
        ([], "give trace FILES"),
    ],
)
def test_bad_input_is_refused(args, message, tmp_path):
    r = CliRunner().invoke(main, ["analyze", *args, "--results", str(tmp_path / "results")])
    assert r.exit_code == 2
    assert message in " ".join(r.output.split()), r.output
    assert not (tmp_path / "results").exists()


@needs_engine("tailscope-critpath")
def test_analyze_from_jaeger_stores_the_run_with_the_fetched_file(jaeger, tmp_path, monkeypatch):
    traces = boundary_traces(12)
    monkeypatch.setattr(jq, "_now_us", lambda: NOW_US + 1_000_000)
    j = jaeger(traces)
    results = tmp_path / "results"
    r = CliRunner().invoke(main, ["analyze", "--jaeger", j.url, "--service", "front", "--results", str(results)])
    assert r.exit_code == 0, r.output
    (saved,) = results.glob("2*/artifacts/jaeger/traces.jaeger.json")
    assert len(json.loads(saved.read_text())["data"]) == 12
    query = json.loads((saved.parent / "query.json").read_text())
    assert query["traces"] == 12 and query["service"] == "front"


@needs_engine("tailscope-critpath")
def test_a_failed_query_stores_nothing(jaeger, tmp_path):
    j = jaeger(boundary_traces(), "partial", fault_at=1)
    results = tmp_path / "results"
    r = CliRunner().invoke(main, ["analyze", "--jaeger", j.url, "--service", "front", "--results", str(results)])
    assert r.exit_code == 2 and "partial page" in " ".join(r.output.split())
    assert not list(results.glob("2*")) and not list(results.glob(".staging-*"))
    assert not (results / "tailscope.duckdb").exists()
