"""tailscope-load against Go's net/http server (issue 26: 11 read errors in 133 requests at 2 requests/s
where curl saw none). A Go server whose IdleTimeout is shorter than the time between a connection's
requests closes it in between; those closes are reconnects (`load.server_closes.idle`), not read
errors, and every request is answered (docs/load-generator.md "Connections the server closes").

The server is tests/engines/go_http_server, built here with the local Go toolchain (no module
downloads: it has no dependencies); without Go the test skips, saying why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import engine_path, needs_engine, stop

pytestmark = needs_engine("tailscope-load")
SOURCE = Path(__file__).parent / "go_http_server"


def _go() -> str | None:
    return shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)


@pytest.fixture(scope="module")
def go_server(tmp_path_factory) -> Path:
    go = _go()
    if go is None:
        pytest.skip("no Go toolchain (go on PATH or /usr/local/go/bin/go): the Go net/http server cannot be built")
    out = tmp_path_factory.mktemp("gohttp") / "server"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOFLAGS": "-mod=mod"}
    r = subprocess.run(
        [go, "build", "-o", str(out), "."], cwd=SOURCE, env=env, capture_output=True, text=True, timeout=300
    )
    if r.returncode != 0:
        pytest.skip(f"go build of the test server failed: {r.stderr[-500:]}")
    return out


@pytest.mark.parametrize("idle_timeout, closes", [("60ms", True), ("0", False)])
def test_go_idle_timeout_closes_are_reconnects_not_read_errors(go_server, idle_timeout, closes, tmp_path):
    server = subprocess.Popen(
        [str(go_server), "-idle-timeout", idle_timeout], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = json.loads(server.stdout.readline())["listening"]
        # 2 connections at 20 requests/s: 100 ms between a connection's requests, longer than 60 ms.
        out = tmp_path / "load.json"
        cmd = [str(engine_path("tailscope-load")), f"http://127.0.0.1:{port}/", "-R", "20", "-c", "2"]
        r = subprocess.run(
            cmd + ["-d", "2s", "--warmup", "0.2s", "--out", str(out)], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        stop(server)
    load = json.loads(out.read_text())["load"]
    assert load["errors_total"] == 0, load["errors"]
    assert load["requests_completed"] == load["requests_sent"] > 0
    assert (load["server_closes"]["idle"] > 0) is closes
