"""tailscope-load --protocol rpc end to end: one real service of the socialnet
graph (tailscope-svc --service) driven with RPC frames (docs/protocol.md) at a
fixed rate and pipelined in a closed loop (responses matched by request id);
an unknown method counted as bad_status; and an HTTP server answering RPC
frames with HTTP, counted as bad_frame with a non-zero exit, never a hang.

Skipped when the engines are not built (build/release/bin, or $TAILSCOPE_BUILD_DIR/bin)."""

from __future__ import annotations

import json
import signal
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import echo_server, engine_path, needs_engine, run_load, svc_models
from tailscope.lab import topology
from tailscope.lab.engines import serve, validate_document

SVC = engine_path("tailscope-svc")
LOAD = engine_path("tailscope-load")
ERRORS_EXIT = 3
SERVICE = "unique-id-service"  # a leaf of the graph: it calls nobody, so it runs alone
METHOD = "compose_unique_id"  # its endpoint (topologies/socialnet.yaml)


@pytest.fixture(scope="module")
def topo_json(tmp_path_factory) -> Path:
    return topology.to_engine_json(topology.SOCIALNET, tmp_path_factory.mktemp("topo") / "socialnet.json")


@contextmanager
def one_service(topo: Path, tmp: Path, model: str = "coroutine"):
    """Runs `tailscope-svc --service SERVICE` on an ephemeral port; yields (port, path of its result document).
    Its result document is written on SIGTERM, so a service that had to be killed fails the test."""
    out = tmp / "svc-result.json"
    with serve(
        "tailscope-svc",
        ["--topology", str(topo), "--service", SERVICE, "--model", model, "--port", "0", "--out", str(out)],
        stop_timeout_s=30.0,
    ) as srv:
        yield srv.port, out
    assert srv.proc.returncode != -signal.SIGKILL, "tailscope-svc did not stop within 30 s of SIGTERM"


def run_rpc_load(port: int, *args: str, method: str = METHOD, timeout_s: float = 60) -> tuple[int, dict | None, str]:
    return run_load(port, "--protocol", "rpc", "--rpc-method", method, *args, timeout=timeout_s)


@needs_engine("tailscope-svc", "tailscope-load")
def test_open_loop_against_one_service_succeeds_without_errors(topo_json, tmp_path):
    with one_service(topo_json, tmp_path) as (port, svc_out):
        rc, doc, err = run_rpc_load(port, "-R", "200", "-d", "2s", "-c", "4", "--warmup", "500ms")
    assert rc == 0, err
    validate_document(doc, "tailscope-load")
    load = doc["load"]
    assert load["errors_total"] == 0, load["errors"]
    assert load["complete"] is True
    assert load["requests_completed"] > 0 and load["achieved_per_s"] > 0
    assert doc["config"]["protocol"] == "rpc" and doc["config"]["rpc_method"] == METHOD
    assert {"bad_frame", "bad_status"} <= set(load["errors"])
    # The service saw well-formed frames only and answered every one ok.
    counters = json.loads(svc_out.read_text())["services"][SERVICE]["counters"]
    assert counters["malformed_frames"] == 0 and counters["errors"] == 0
    assert counters["ok"] == counters["requests"] >= load["requests_completed"]


@needs_engine("tailscope-svc", "tailscope-load")
def test_pipelined_closed_loop_matches_responses_by_request_id(topo_json, tmp_path):
    # Several requests in flight per connection on a multiplexing service: a
    # response matched to the wrong request would show up as "not in flight" (bad_frame).
    with one_service(topo_json, tmp_path, model="pool-callback") as (port, _):
        rc, doc, err = run_rpc_load(
            port, "-R", "0", "--pipeline", "8", "-d", "1s", "-c", "2", "--warmup", "200ms", "--payload-bytes", "300"
        )
    assert rc == 0, err
    assert doc["load"]["errors_total"] == 0, doc["load"]["errors"]
    assert doc["load"]["requests_completed"] > 0


@needs_engine("tailscope-svc", "tailscope-load")
def test_unknown_method_is_counted_as_bad_status(topo_json, tmp_path):
    with one_service(topo_json, tmp_path) as (port, _):
        rc, doc, err = run_rpc_load(
            port, "-R", "100", "-d", "1s", "-c", "2", "--warmup", "0s", method="no_such_endpoint"
        )
    assert rc == ERRORS_EXIT, err
    assert doc["load"]["errors"]["bad_status"] > 0
    assert doc["load"]["errors_total"] == doc["load"]["errors"]["bad_status"]
    assert doc["load"]["requests_completed"] == 0


def test_rpc_against_an_http_server_counts_bad_frames_and_exits_nonzero(tmp_path):
    with echo_server("epoll", "http", threads=1) as (port, _):
        rc, doc, err = run_rpc_load(port, "-R", "200", "-d", "2s", "-c", "4", "--timeout", "1s", "--warmup", "200ms")
    assert rc == ERRORS_EXIT, err
    assert doc is not None, err
    load = doc["load"]
    assert load["errors_total"] > 0
    assert load["requests_completed"] == 0
    # The server answers the frame it cannot parse with HTTP: "HTTP" read as a frame length is oversized.
    assert load["errors"]["bad_frame"] > 0, load["errors"]
    assert load["first_violation"].startswith("rpc: malformed response frame"), load["first_violation"]


@needs_engine("tailscope-load")
@pytest.mark.parametrize(
    "args, message",
    [
        ([], "--rpc-method"),
        (["--rpc-method", "m" * 256], "longer than 255"),
        (["--rpc-method", "m", "--payload-bytes", "1048576"], "maximum frame size"),
    ],
)
def test_bad_rpc_flags_are_refused_before_connecting(args, message):
    r = subprocess.run(
        [str(LOAD), "--protocol", "rpc", "--port", "1", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1
    assert message in r.stderr, r.stderr
    assert r.stdout.strip() == ""


@needs_engine("tailscope-load")
def test_rpc_flags_are_refused_with_another_protocol():
    r = subprocess.run(
        [str(LOAD), "--protocol", "echo", "--rpc-method", "x", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1 and "only to --protocol rpc" in r.stderr, r.stderr


# ---- a long stage must not hold a service past its stop ------------------------------
SLOW_TOPOLOGY = {
    "name": "slow",
    "services": [
        {
            "name": "slow",
            "endpoints": [
                {"name": "burn", "stages": [{"cpu": 50_000_000}]},  # 50 s busy loop
                {
                    "name": "wait",
                    "stages": [{"store": {"span": "s", "latency": {"kind": "constant", "us": 50_000_000}}}],
                },
            ],
        }
    ],
}
MODELS = svc_models()


@needs_engine("tailscope-svc", "tailscope-load")
@pytest.mark.parametrize("method", ["burn", "wait"])
@pytest.mark.parametrize("model", MODELS)
def test_a_50_s_stage_does_not_outlive_duration(model, method, tmp_path):
    """Before the fix `cpu: 1e9` made tailscope-svc ignore --duration and SIGTERM
    (the model joined a thread busy for 1000 s). The stage here lasts 50 s; the
    service must stop at its 1.5 s --duration, long before the stage would end:
    the 25 s wait turns a stage that is waited out into a failure."""
    topo = tmp_path / "slow.json"
    topo.write_text(json.dumps(topology.validate(SLOW_TOPOLOGY, "slow")))
    out = tmp_path / "svc.json"
    svc = subprocess.Popen(
        [
            str(SVC),
            "--topology",
            str(topo),
            "--service",
            "slow",
            "--model",
            model,
            "--port",
            "0",
            "--duration",
            "1.5",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    load = None
    try:
        line = svc.stdout.readline()
        assert line, svc.stderr.read()
        port = json.loads(line)["listening"]
        load = subprocess.Popen(
            [
                str(LOAD),
                "--protocol",
                "rpc",
                "--rpc-method",
                method,
                "--port",
                str(port),
                "-c",
                "1",
                "-R",
                "0",
                "-d",
                "1s",
                "--warmup",
                "0s",
                "--timeout",
                "60s",
                "--allow-errors",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            rc = svc.wait(timeout=25)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{model}: tailscope-svc waited out a 50 s '{method}' stage past --duration 1.5")
        assert rc == 0, svc.stderr.read()
    finally:
        for p in (svc, load):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    # The stage really was running when the service stopped (not a vacuous pass).
    counters = json.loads(out.read_text())["services"]["slow"]["counters"]
    assert counters["requests"] >= 1, counters


@needs_engine("tailscope-svc")
@pytest.mark.parametrize(
    "args, message",
    [
        (["--ports", "a=abc"], "--ports: 'a=abc': the port must be an integer in 1 … 65535"),  # was "stoi"
        (["--ports", "a=99999"], "--ports: 'a=99999': the port must be an integer in 1 … 65535"),
        (["--duration", "nan"], "--duration: not a finite number"),  # CLI11's Range let NaN through: ran forever
    ],
)
def test_svc_bad_numbers_are_clear_errors(args, message, topo_json):
    r = subprocess.run(
        [str(SVC), "--topology", str(topo_json), "--service", SERVICE, *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1 and message in r.stderr, r.stderr
