"""tailscope-load's two I/O paths (--io uring / --io epoll) end to end:
the same verification, counts and fault handling on both, the document saying which path
ran, and the uring path's batching visible in the generator's own system-call count."""

from __future__ import annotations

import functools
import json
import socket
import subprocess
import time

import pytest

from conftest import echo_server, engine_path, needs_engine, run_load, silent_listener, start_load
from tailscope.lab.engines import validate_document

LOAD = engine_path("tailscope-load")
IO_PATHS = ["uring", "epoll"]

pytestmark = needs_engine("tailscope-load")


@functools.cache
def _uring_unavailable_reason() -> str | None:
    """None when --io uring runs here, else the engine's reason (then the uring cases skip).
    Probed once, against a listener that accepts (the kernel's backlog) and never answers."""
    with silent_listener() as port:
        r = subprocess.run(
            [
                str(LOAD),
                "--port",
                str(port),
                *("-c", "1", "-d", "1ms", "--warmup", "0s", "--timeout", "50ms", "--io", "uring"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    return r.stderr if r.returncode == 1 and "--io uring: unavailable" in r.stderr else None


def _skip_if_unavailable(io: str) -> None:
    if io == "uring":
        reason = _uring_unavailable_reason()
        if reason:
            pytest.skip(f"--io uring unavailable here: {reason}")


@pytest.mark.parametrize("io", IO_PATHS)
def test_each_io_path_verifies_every_echo_and_counts_the_same_requests(io, tmp_path):
    _skip_if_unavailable(io)
    with echo_server("epoll") as (port, _):
        rc, doc, err = run_load(
            port,
            "-c",
            "16",
            "-d",
            "0.4s",
            "--warmup",
            "0.1s",
            "-R",
            "0",
            "--pipeline",
            "2",
            "--payload-bytes",
            "100",
            "--io",
            io,
            out=tmp_path / "r.json",
        )
    assert rc == 0, err
    validate_document(doc, "tailscope-load")
    load = doc["load"]
    assert load["io"]["requested"] == io and load["io"]["used"] == io
    assert doc["config"]["io"] == io
    assert load["errors_total"] == 0 and load["complete"]
    assert load["requests_completed"] > 0
    assert load["bytes_sent"] == 100 * load["requests_sent"]
    assert load["bytes_received"] == 100 * load["requests_completed"]
    busy = load["generator_busy_share"]
    assert len(busy["per_thread"]) == 1 and 0.0 <= busy["max"] <= 1.0
    assert load["generator_syscalls_per_request"] > 0


@pytest.mark.parametrize("io", IO_PATHS)
def test_each_io_path_is_open_loop_at_the_requested_rate(io, tmp_path):
    """Open loop, fixed rate: every intended request is sent and answered; the stamps of the
    batched path leave the schedule (intended times) alone, so the rate is the requested one."""
    _skip_if_unavailable(io)
    with echo_server("epoll") as (port, _):
        rc, doc, err = run_load(
            port, "-c", "4", "-R", "400", "-d", "0.5s", "--warmup", "0.2s", "--io", io, out=tmp_path / "r.json"
        )
    assert rc == 0, err
    load = doc["load"]
    assert load["requests_sent"] == 200  # 400/s × 0.5 s, by intended time
    assert load["requests_completed"] == load["requests_sent"]
    assert load["self_check"]["unsent_in_window"] == 0


def test_uring_path_batches_system_calls_below_the_epoll_path(tmp_path):
    """Behaviour, not speed: the epoll path makes a send and a recv per request (>= 2 system calls);
    the uring path hands a whole loop turn's sends and receives to one io_uring_enter."""
    _skip_if_unavailable("uring")
    per_request = {}
    with echo_server("epoll") as (port, _):
        for io in IO_PATHS:
            rc, doc, err = run_load(
                port, "-c", "32", "-d", "0.4s", "--warmup", "0.1s", "-R", "0", "--io", io, out=tmp_path / f"{io}.json"
            )
            assert rc == 0, err
            per_request[io] = doc["load"]["generator_syscalls_per_request"]
    assert per_request["epoll"] >= 2.0, per_request
    assert per_request["uring"] < per_request["epoll"], per_request


def test_uring_path_counts_timeouts_and_ends_on_time(tmp_path):
    """A server that accepts (the kernel's backlog) and never answers: every request is a
    timeout, nothing is called completed, and the run still ends (bounded by the drain)."""
    _skip_if_unavailable("uring")
    with silent_listener() as port:
        rc, doc, err = run_load(
            port,
            *("-c", "2", "-R", "100", "-d", "0.5s", "--warmup", "0s", "--timeout", "0.2s", "--io", "uring"),
            out=tmp_path / "r.json",
            timeout=30,
        )
    assert rc == 3, err
    load = doc["load"]
    assert load["requests_completed"] == 0
    assert load["errors"]["timeout"] > 0
    assert load["generator_bottleneck"] is False


def test_uring_path_counts_refused_connections(tmp_path):
    _skip_if_unavailable("uring")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc, doc, err = run_load(port, "-c", "2", "-d", "0.3s", "--warmup", "0s", "--io", "uring", out=tmp_path / "r.json")
    assert rc == 3, err
    assert doc["load"]["errors"]["connect"] > 0


def test_uring_path_survives_the_server_being_killed(tmp_path):
    _skip_if_unavailable("uring")
    out = tmp_path / "r.json"
    with echo_server("epoll") as (port, proc):
        load = start_load(port, "-c", "8", "-d", "4s", "--warmup", "0.1s", "-R", "2000", "--io", "uring", out=out)
        time.sleep(1.0)
        proc.kill()
        proc.wait()
        _, err = load.communicate(timeout=30)
    assert load.returncode == 3, err
    doc = json.loads(out.read_text())
    assert doc["load"]["complete"] is False
    assert doc["load"]["errors"]["read"] + doc["load"]["errors"]["connect"] > 0
    assert doc["load"]["requests_completed"] > 0


def test_bad_io_value_is_a_clear_error():
    r = subprocess.run(
        [str(LOAD), "--port", "9", "--io", "io_uring"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1
    assert "--io: 'io_uring' is none of auto, uring, epoll" in r.stderr
