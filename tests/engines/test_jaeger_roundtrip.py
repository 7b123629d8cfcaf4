"""The real-Jaeger round trip: the socialnet graph exports its spans live over OTLP/HTTP
to a Jaeger v2 built from source (scripts/bootstrap --jaeger), and Jaeger's query API
gives back every sampled trace with every span — the same traces and spans as the
files the run wrote. Then `tailscope analyze --jaeger` reads them back through the
query API's pages.

Needs Go >= 1.23 to build Jaeger once (cached in ~/.cache/tailscope); skipped with
the reason when there is none.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import REPO, needs_engine
from tailscope.cli import main
from tailscope.lab import tools, topology
from tailscope.lab.engines import serve
from tailscope.lab.graph import PATH as FRONT_PATH
from tailscope.lab.jaeger import jaeger as lab_jaeger
from tailscope.traces import jaeger as jq

REQUESTS = 30
SAMPLE = 0.5

pytestmark = needs_engine("tailscope-svc")


@pytest.fixture(scope="session")
def jaeger_binary() -> Path:
    try:
        return tools.tool_path("jaeger")
    except tools.ToolUnavailable:
        pass
    # Built here (minutes) when Go is present and an earlier bootstrap did not; the step says why it skips otherwise.
    r = subprocess.run([str(REPO / "scripts" / "bootstrap"), "--jaeger"], capture_output=True, text=True, timeout=3600)
    if r.returncode == 3:
        pytest.skip(r.stderr.strip().splitlines()[-1])
    assert r.returncode == 0, f"building Jaeger failed:\n{r.stderr[-3000:]}"
    return tools.tool_path("jaeger")


@pytest.fixture
def jaeger(jaeger_binary: Path, tmp_path: Path) -> Iterator[dict]:
    with lab_jaeger(tmp_path) as j:
        yield {"query": j.query, "otlp": j.otlp, "query_url": j.query_url}


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def ids_of(trace: dict) -> set[int]:
    return {int(s["spanID"], 16) for s in trace["spans"]}


def test_socialnet_exports_live_to_jaeger_and_every_span_comes_back(jaeger, tmp_path):
    topo = topology.to_engine_json(topology.SOCIALNET, tmp_path / "socialnet.json")
    out = tmp_path / "result.json"
    args = ["--topology", str(topo), "--all", "--model", "coroutine", "--port", "0", "--out", str(out)]
    args += ["--trace-sample", str(SAMPLE), "--traces", str(tmp_path / "traces")]
    args += ["--otlp-endpoint", f"http://127.0.0.1:{jaeger['otlp']}"]
    with serve("tailscope-svc", args, stop_timeout_s=30.0) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.ready["listening"], timeout=10)
        for _ in range(REQUESTS):
            conn.request("POST", FRONT_PATH, body="text=hello @alice http://example.com")
            r = conn.getresponse()
            r.read()
            assert r.status == 200
        conn.close()
    doc = json.loads(out.read_text())
    e = doc["otlp_export"]
    assert e["spans_exported"] == e["spans_offered"] == doc["tracing"]["spans"], e
    files = {
        int(t["traceID"], 16): t for t in json.loads((tmp_path / "traces" / "traces.jaeger.json").read_text())["data"]
    }
    if not files:
        pytest.skip(f"no request of {REQUESTS} was sampled at {SAMPLE}")

    # Jaeger stores asynchronously (its batch processor): wait until it holds every span of every trace.
    deadline = time.monotonic() + 30
    got: dict[int, dict] = {}
    while time.monotonic() < deadline:
        for tid, t in files.items():
            if tid in got and len(got[tid]["spans"]) == len(t["spans"]):
                continue
            try:
                data = get_json(f"{jaeger['query_url']}/api/traces/{tid:032x}")["data"]
                got[tid] = data[0]
            except OSError:
                pass  # 404 until the trace is stored
        if len(got) == len(files) and all(len(got[t]["spans"]) == len(files[t]["spans"]) for t in files):
            break
        time.sleep(0.25)
    assert set(got) == set(files)
    for tid, t in files.items():
        assert ids_of(got[tid]) == ids_of(t), f"trace {tid:032x}"
    assert sum(len(t["spans"]) for t in got.values()) == doc["tracing"]["spans"]

    # The search API finds exactly the sampled traces, through several pages.
    found, summary = jq.fetch(jq.JaegerQuery(jaeger["query_url"], "nginx-web-server", limit=10_000), page_size=4)
    assert {int(t["traceID"], 16) for t in found} == set(files)
    assert summary["pages"] >= 2 or len(files) < 4

    # And `tailscope analyze --jaeger` analyses them as a stored run.
    results = tmp_path / "results"
    r = CliRunner().invoke(
        main, ["analyze", "--jaeger", jaeger["query_url"], "--service", "nginx-web-server", "--results", str(results)]
    )
    assert r.exit_code == 0, r.output
    (saved,) = results.glob("2*/artifacts/jaeger/traces.jaeger.json")
    assert len(json.loads(saved.read_text())["data"]) == len(files)


def test_jaeger_step_skips_with_the_reason_without_go(tmp_path):
    """scripts/bootstrap --jaeger with no Go anywhere: exit 3 and the reason (not a failure)."""
    if Path("/usr/local/go/bin/go").exists():
        pytest.skip("/usr/local/go/bin/go exists; the no-Go path cannot be shown on this machine")
    env = {**os.environ, "PATH": "/usr/bin:/bin", "TAILSCOPE_CACHE": str(tmp_path)}
    if shutil.which("go", path=env["PATH"]):
        pytest.skip("a Go is on /usr/bin:/bin")
    r = subprocess.run(
        [str(REPO / "scripts" / "bootstrap"), "--jaeger"], capture_output=True, text=True, env=env, timeout=600
    )
    assert r.returncode == 3 and "no Go >= 1.23" in r.stderr
