"""The Jaeger client against a hostile or broken "Jaeger": redirects to outside addresses are
refused before any connect, odd spans are clear errors (never a traceback), and a body trickled
a byte at a time ends at the answer's deadline."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from tailscope.cli import main
from tailscope.traces import jaeger as jq

NOW_US = 1_700_000_000_000_000


def _trace(spans: list) -> dict:
    return {"traceID": "ab" * 16, "spans": spans, "processes": {"p1": {"serviceName": "front"}}}


def _span(**over) -> dict:
    s = {"traceID": "ab" * 16, "spanID": "01" * 8, "operationName": "op", "references": [], "processID": "p1"}
    s.update(startTime=NOW_US - 10_000_000, duration=1000)
    s.update(over)
    return s


class Stub:
    """Answers every GET with `respond(handler)`."""

    def __init__(self, respond):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                respond(self)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub():
    made: list[Stub] = []

    def make(respond) -> Stub:
        made.append(Stub(respond))
        return made[-1]

    yield make
    for s in made:
        s.close()


def _json(handler, doc: dict, status: int = 200) -> None:
    body = json.dumps(doc).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture
def connects(monkeypatch):
    """Every address the process tries to connect to while the test runs."""
    seen: list[str] = []
    real = socket.create_connection

    def recording(address, *a, **k):
        seen.append(str(address[0]))
        return real(address, *a, **k)

    monkeypatch.setattr(socket, "create_connection", recording)
    return seen


def test_a_redirect_outside_the_allow_list_is_refused_before_any_connect(stub, connects):
    def redirect(h):
        h.send_response(302)
        h.send_header("Location", "http://192.0.2.1:16686/api/traces?service=front")
        h.send_header("Content-Length", "0")
        h.end_headers()

    s = stub(redirect)
    with pytest.raises(jq.JaegerQueryError, match="redirected .* refused target.*192.0.2.1"):
        jq.fetch(jq.JaegerQuery(s.url, "front"), now_us=NOW_US)
    assert connects, "the first request was never made"
    assert "192.0.2.1" not in connects


def test_a_redirect_inside_the_allow_list_is_followed(stub):
    def answer(h):
        if h.path.startswith("/moved"):
            _json(h, {"data": [_trace([_span()])]})
        else:
            h.send_response(301)
            h.send_header("Location", "/moved" + h.path)
            h.send_header("Content-Length", "0")
            h.end_headers()

    s = stub(answer)
    got, summary = jq.fetch(jq.JaegerQuery(s.url, "front"), now_us=NOW_US)
    assert [t["traceID"] for t in got] == ["ab" * 16] and summary["spans"] == 1


def test_the_cli_refuses_the_redirect_with_a_clear_error(stub, tmp_path, monkeypatch, connects):
    def redirect(h):
        h.send_response(302)
        h.send_header("Location", "http://192.0.2.1:16686/api/traces")
        h.send_header("Content-Length", "0")
        h.end_headers()

    s = stub(redirect)
    monkeypatch.setenv("TAILSCOPE_RESULTS", str(tmp_path / "results"))
    r = CliRunner().invoke(main, ["analyze", "--jaeger", s.url, "--service", "front"])
    assert r.exit_code == 2, r.output
    assert "refused target" in r.output and "Traceback" not in r.output
    assert "192.0.2.1" not in connects


@pytest.mark.parametrize(
    ("span", "message"),
    [
        ({k: v for k, v in _span().items() if k != "startTime"}, "has no startTime"),
        (_span(startTime="yesterday"), "startTime 'yesterday'"),
        (_span(startTime=True), "startTime True"),
        (_span(duration=-5), "duration -5"),
        (_span(spanID=7), "no spanID"),
        ("a span that is a string", "a span is a str"),
        (None, "a span is a NoneType"),
    ],
)
def test_odd_spans_are_clear_errors(stub, span, message):
    s = stub(lambda h: _json(h, {"data": [_trace([_span(spanID="ff" * 8), span])]}))
    with pytest.raises(jq.JaegerQueryError, match=message):
        jq.fetch(jq.JaegerQuery(s.url, "front"), now_us=NOW_US)


def test_a_trickled_body_ends_at_the_answers_deadline(stub, monkeypatch):
    stop = threading.Event()

    def trickle(h):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", "1000")
        h.end_headers()
        for _ in range(200):  # bounded: at most ~20 s even if the client never gave up
            if stop.is_set():
                return
            try:
                h.wfile.write(b" ")
                h.wfile.flush()
            except OSError:
                return
            time.sleep(0.1)

    monkeypatch.setattr(jq, "REQUEST_DEADLINE_S", 0.5)
    s = stub(trickle)
    try:
        with pytest.raises(jq.JaegerQueryError, match="did not arrive within"):
            jq.fetch(jq.JaegerQuery(s.url, "front"), now_us=NOW_US)
    finally:
        stop.set()
