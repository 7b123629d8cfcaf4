"""tailscope-load and tailscope-echo end to end: every echo model checked by the
load generator's byte-for-byte verification and by a plain socket client, wrk
against the HTTP mode, the .hlog read by the PyPI hdrhistogram package, and the
faults a load generator must survive (server killed mid-run; garbage, abrupt disconnect,
half-close and never-reading clients; fd exhaustion)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest

from conftest import echo_server, engine_path, needs_engine, run_load, silent_listener, start_load
from tailscope.lab.engines import validate_document

MODELS = [
    "epoll",
    "thread-per-connection",
    "poll",
    "poll-pool",
    "asio",
    "asio-mt",
    "io-uring",
    "epoll-reuseport",
    "asio-coro",
]
UNAVAILABLE_EXIT = 4


def echo_roundtrip(port: int, payload: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


# ---- every model, two independent checkers ---------------------------------------
@pytest.mark.parametrize("model", MODELS)
def test_model_verified_by_load_generator_and_plain_client(model, tmp_path):
    with echo_server(model) as (port, _):
        payload = bytes(range(256)) * 300  # 76.8 kB: spans many reads and the session's output bound
        assert echo_roundtrip(port, payload) == payload
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
            "--payload-bytes",
            "64",
            "--pipeline",
            "2",
            out=tmp_path / "r.json",
        )
        assert rc == 0, err
        validate_document(doc, "tailscope-load")
        load = doc["load"]
        assert load["errors_total"] == 0 and load["complete"]
        assert load["requests_completed"] > 0
        assert load["bytes_received"] == load["bytes_sent"]
        names = {m["name"] for m in doc["measurements"]}
        assert names == {"latency_intended", "latency_actual", "send_lag"}


@pytest.mark.parametrize("model", MODELS)
def test_model_http_mode_answers_keep_alive_and_rejects_garbage(model):
    with echo_server(model, "http") as (port, _):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /bb HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while got.count(b"HTTP/1.1 200") < 2 or not got.endswith(b"/bb"):
                chunk = s.recv(4096)
                assert chunk, f"connection closed early: {got!r}"
                got += chunk
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"\x16\x03\x01\x02\x00garbage\r\n\r\n")
            reply = s.recv(4096)
            assert reply.startswith(b"HTTP/1.1 400")
            assert s.recv(4096) == b""  # and the server closed
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /a HTTP/1.1\nHost: x\n\n")  # bare LF: answered, not waited on forever
            reply = s.recv(4096)
            assert reply.startswith(b"HTTP/1.1 400")
            assert s.recv(4096) == b""


def test_open_loop_http_rate_and_status_check(tmp_path):
    with echo_server("epoll", "http") as (port, _):
        rc, doc, err = run_load(
            port,
            "--protocol",
            "http",
            "-t",
            "2",
            "-c",
            "8",
            "-d",
            "1s",
            "--warmup",
            "0.2s",
            "-R",
            "2k",
            "--arrival",
            "poisson",
            out=tmp_path / "r.json",
        )
        assert rc == 0, err
        load = doc["load"]
        assert load["mode"] == "open" and load["requested_per_s"] == 2000
        # Poisson over 1 s: the count is random, but not off by half.
        assert 1000 < load["requests_sent"] < 3000
        assert load["errors"]["bad_status"] == 0


def test_wrk_drives_the_http_mode():
    wrk = shutil.which("wrk")
    if not wrk:
        pytest.skip("wrk is not installed (apt-get install wrk)")
    with echo_server("epoll", "http") as (port, _):
        r = subprocess.run(
            [wrk, "-t1", "-c4", "-d1s", f"http://127.0.0.1:{port}/hello"], capture_output=True, text=True, timeout=30
        )
        assert r.returncode == 0, r.stderr
        assert "Non-2xx" not in r.stdout and "Socket errors" not in r.stdout, r.stdout
        rate = float(re.search(r"Requests/sec:\s+([\d.]+)", r.stdout).group(1))
        assert rate > 0


def test_hlog_is_read_by_the_hdrhistogram_package(tmp_path):
    try:
        from hdrh.histogram import HdrHistogram
        from hdrh.log import HistogramLogReader
    except ImportError as e:
        pytest.fail(f"the PyPI hdrhistogram package is required for this test: {e}")
    hlog = tmp_path / "load.hlog"
    with echo_server("epoll") as (port, _):
        rc, doc, err = run_load(
            port,
            "-c",
            "4",
            "-d",
            "1s",
            "--warmup",
            "0.1s",
            "-R",
            "2000",
            "--hlog",
            str(hlog),
            "--hlog-interval",
            "0.25",
            out=tmp_path / "r.json",
        )
    assert rc == 0, err
    reader = HistogramLogReader(str(hlog), HdrHistogram(1, 3_600_000_000_000, 3))
    totals: dict[str, int] = {}
    intervals = 0
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        intervals += 1
        totals[h.get_tag()] = totals.get(h.get_tag(), 0) + h.get_total_count()
    by_name = {m["name"]: m for m in doc["measurements"]}
    assert intervals >= 8  # 4+ intervals × 2 tags
    assert totals["latency_intended"] == by_name["latency_intended"]["latency"]["count"]
    assert totals["latency_actual"] == by_name["latency_actual"]["latency"]["count"]


def test_latency_flag_prints_a_wrk2_style_spectrum(tmp_path):
    with echo_server("epoll") as (port, _):
        rc, _, err = run_load(
            port, "-c", "2", "-d", "0.3s", "--warmup", "0.05s", "-R", "500", "--latency", out=tmp_path / "r.json"
        )
    assert rc == 0, err
    assert re.search(r"Value\s+Percentile\s+TotalCount\s+1/\(1-Percentile\)", err)
    assert "#[Mean" in err


# ---- faults ------------------------------------------------------------------------
def test_server_killed_mid_run_gives_partial_document_and_nonzero_exit(tmp_path):
    out = tmp_path / "r.json"
    with echo_server("epoll") as (port, proc):
        load = start_load(port, "-c", "8", "-d", "4s", "--warmup", "0.1s", "-R", "2000", out=out)
        time.sleep(1.0)
        proc.kill()
        proc.wait()
        _, err = load.communicate(timeout=30)
    assert load.returncode == 3, err
    assert "partial" in err or "errors" in err
    doc = json.loads(out.read_text())
    load_summary = doc["load"]
    assert load_summary["complete"] is False
    assert load_summary["errors"]["read"] + load_summary["errors"]["connect"] > 0
    assert load_summary["requests_completed"] > 0  # what was measured before the kill is kept


def test_interrupted_run_writes_partial_document(tmp_path):
    out = tmp_path / "r.json"
    with echo_server("epoll") as (port, _):
        load = start_load(port, "-c", "4", "-d", "20s", "--warmup", "0.1s", "-R", "1000", out=out)
        time.sleep(0.8)
        load.send_signal(signal.SIGINT)
        _, err = load.communicate(timeout=30)
    assert load.returncode == 130, err
    doc = json.loads(out.read_text())
    assert doc["load"]["complete"] is False and "signal" in doc["load"]["aborted_reason"]
    # The document states the duration actually measured (cut short at ~0.8 s), not the 20 s asked for.
    requested_s = 20
    assert requested_s > 4 * doc["load"]["duration_s"]


@needs_engine("tailscope-load", "tailscope-echo", "tailscope-baseline")
def test_echo_study_runs_and_renders(tmp_path):
    """The study end to end at a tiny scale with three models: documents stored, section rendered."""
    from datetime import datetime

    from tailscope.store import RunRecord, Store
    from tailscope.studies.base import RunContext
    from tailscope.studies.echo import STUDY
    from tailscope.studies.echo.analysis import read

    ctx = RunContext(
        form="quick",
        artifacts_dir=tmp_path,
        progress=lambda *_: None,
        options={"scale": 0.1, "echo_models": ["epoll", "poll", "io-uring"]},
    )
    docs = STUDY.run(ctx)
    points = {d.point for d in docs}
    assert {"baseline", "closed/epoll/8", "rate/poll/1000", "co/epoll/8"} <= points
    loads = [d.document for d in docs if d.engine == "tailscope-load" and "echo_point" in d.document]
    assert loads, "no tailscope-load document with an echo_point"
    for doc in loads:
        ep = doc["echo_point"]
        # Busy-poll pacing by default, recorded in the engine's own config; threads as planned.
        assert ep["load_pacing"] == "busy-poll" and doc["config"]["busy_poll"] is True
        assert doc["config"]["threads"] == ep["load_threads"] == len(ep["load_cpus"]) >= 1
        assert ep["server_cpu"] not in ep["load_cpus"]
        # The generator's I/O path by connection count: io_uring (auto) from 100 up, epoll below.
        assert doc["config"]["io"] == ("auto" if ep["connections"] >= 100 else "epoll"), ep
    uring = [d["echo_point"]["server_features"] for d in loads if d["echo_point"]["model"] == "io-uring"]
    if uring:  # unavailable kernels are noted instead
        assert all("multishot_recv" in f and "registered_files" in f for f in uring)
    with Store(tmp_path / "t.duckdb") as store:
        store.save_run(RunRecord("r1", datetime.now(), datetime.now(), "quick", ["echo"], {}, "test", docs))
        sec = STUDY.section(store, "r1")
    titles = [b.title for b in sec.blocks]
    assert any("throughput" in t for t in titles)
    assert any("Coordinated omission" in t for t in titles)
    assert any("Recommendation" in t for t in titles)
    assert all(getattr(b, "finding", "x") for b in sec.blocks)
    ratios = next(b for b in sec.blocks if b.title.startswith("In-run ratios"))
    assert {r[0] for r in ratios.rows} == {"8", "100", "1000"}
    assert any(b.title.startswith("Recommendation") for b in sec.blocks)
    reading = read(docs)
    assert reading.ratios is not None and [t.connections for t in reading.ratios.targets] == [100, 1000]
    assert [r.name for r in reading.ranges] == ["< 100", "100–2000", "> 2000"]
    assert reading.ranges[2].connections == ()  # the quick form has no point above 2000
    assert reading.generator is not None and [c for c, _ in reading.generator.threads_by_connections] == [8, 100, 1000]


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


@pytest.mark.parametrize("model", MODELS)
def test_bad_clients_do_not_hurt_a_good_one(model):
    with echo_server(model) as (port, proc):
        rss_before = _rss_kib(proc.pid)
        # Never reads: pushes until its own send buffer is full (the server must stop reading it).
        hog = socket.create_connection(("127.0.0.1", port))
        hog.setblocking(False)
        pushed = 0
        chunk = b"x" * 65536
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                pushed += hog.send(chunk)
            except BlockingIOError:
                time.sleep(0.02)
                try:
                    pushed += hog.send(chunk)
                except BlockingIOError:
                    break
        # Abrupt disconnect (RST) in the middle of a request.
        rst = socket.create_connection(("127.0.0.1", port))
        rst.sendall(b"half a requ")
        rst.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        rst.close()
        # Garbage bytes: for RFC 862 they are just data, echoed back verbatim.
        junk = os.urandom(3000)
        assert echo_roundtrip(port, junk) == junk
        # Half-close: what was sent is echoed, then the server closes its side.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as hc:
            hc.sendall(b"hello")
            hc.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                c = hc.recv(100)
                if not c:
                    break
                got += c
            assert got == b"hello"
        # The good client is still served while the hog is connected.
        assert echo_roundtrip(port, b"still here" * 100) == b"still here" * 100
        grown_mib = (_rss_kib(proc.pid) - rss_before) / 1024
        assert pushed > 0
        assert grown_mib < 32, f"{model} grew {grown_mib:.1f} MiB holding a never-reading client's data"
        hog.close()


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("model", MODELS)
def test_blocked_half_closed_client_costs_no_cpu(model):
    """A client that fills the server's output bound, never reads, then half-closes: the server must
    neither spin on the pending hang-up nor stop serving others."""
    with echo_server(model) as (port, proc):
        hog = socket.create_connection(("127.0.0.1", port))
        hog.setblocking(False)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                hog.send(b"y" * 65536)
            except BlockingIOError:
                time.sleep(0.05)
                try:
                    hog.send(b"y" * 65536)
                except BlockingIOError:
                    break
        hog.shutdown(socket.SHUT_WR)
        time.sleep(0.2)
        before = _cpu_seconds(proc.pid)
        time.sleep(0.8)
        used = _cpu_seconds(proc.pid) - before
        assert used < 0.4, f"{model} burned {used:.2f} CPU-s in 0.8 s with an idle blocked peer (busy loop)"
        assert echo_roundtrip(port, b"ok" * 10) == b"ok" * 10
        hog.close()


def test_fd_exhaustion_backs_off_without_spinning_or_crashing():
    with echo_server("epoll", extra=["--max-fds", "24"]) as (port, proc):
        socks = []
        for _ in range(40):  # more than the server has descriptors for
            try:
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=1))
            except OSError:
                pass
        time.sleep(0.2)

        t0 = _cpu_seconds(proc.pid)
        time.sleep(1.0)
        used = _cpu_seconds(proc.pid) - t0
        assert proc.poll() is None, "server died on fd exhaustion"
        assert used < 0.5, f"server burned {used:.2f} CPU-s in 1 s with its fds exhausted (busy loop)"
        for s in socks:
            s.close()
        time.sleep(0.2)
        assert echo_roundtrip(port, b"after exhaustion") == b"after exhaustion"


# ---- bad input to the engines ---------------------------------------------------------
@needs_engine("tailscope-load")
@pytest.mark.parametrize(
    "args, message",
    [
        (["--port", "9", "--host", "192.0.2.3"], "loopback"),
        (["--port", "9", "-R", "fast"], "not a number"),
        (["--port", "9", "-d", "3 fortnights"], "time unit"),
        (["--port", "9", "--arrival", "bursty"], "poisson"),
        (["--port", "9", "--protocol", "gopher"], "protocol"),
        ([], "port"),
    ],
)
def test_load_bad_flags_are_clear_errors(args, message):
    r = subprocess.run([str(engine_path("tailscope-load")), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert message in r.stderr + r.stdout


@needs_engine("tailscope-echo")
def test_echo_unknown_model_is_a_clear_error():
    r = subprocess.run(
        [str(engine_path("tailscope-echo")), "--model", "carrier-pigeon"], capture_output=True, text=True, timeout=30
    )
    assert r.returncode != 0 and "carrier-pigeon" in r.stderr


def test_connection_refused_counts_connect_errors(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc, doc, err = run_load(port, "-c", "2", "-d", "0.3s", "--warmup", "0s", out=tmp_path / "r.json")
    assert rc == 3, err
    assert doc["load"]["errors"]["connect"] > 0


# ---- what the document says must match what was measured ----------------------------
def test_bytes_count_the_same_requests_as_the_request_counts(tmp_path):
    """bytes_sent / bytes_received included the warm-up while requests_sent /
    requests_completed did not. Echo answers byte for byte, so with no errors
    both byte counts are exactly the payload times the requests in the window."""
    with echo_server("epoll") as (port, _):
        rc, doc, err = run_load(
            port,
            "-c",
            "2",
            "-R",
            "200",
            "-d",
            "0.5s",
            "--warmup",
            "0.5s",
            "--payload-bytes",
            "100",
            out=tmp_path / "r.json",
        )
    assert rc in (0, 3), err
    load = doc["load"]
    assert load["errors_total"] == 0, load["errors"]
    assert load["requests_sent"] > 0
    assert load["bytes_sent"] == 100 * load["requests_sent"]
    assert load["bytes_received"] == 100 * load["requests_completed"]


def test_a_server_that_never_answers_is_not_called_a_generator_bottleneck(tmp_path):
    """The listener accepts (the kernel's backlog) and never reads: the rate
    shortfall is the server's. Before: generator_bottleneck was true."""
    with silent_listener() as port:
        rc, doc, err = run_load(
            port, "-c", "2", "-R", "100", "-d", "0.5s", "--warmup", "0s", "--timeout", "0.3s", out=tmp_path / "r.json"
        )
    assert rc == 3, err
    assert "no request completed in the measured window" in err
    load = doc["load"]
    assert load["requests_completed"] == 0
    assert {u["name"] for u in doc["unavailable"]} >= {"latency_intended", "latency_actual"}
    assert load["self_check"]["rate_shortfall"] is True
    assert load["self_check"]["server_held_back"] is True
    assert load["generator_bottleneck"] is False
