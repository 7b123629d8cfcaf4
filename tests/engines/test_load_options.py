"""tailscope-load's options: every number a user can type is
validated before anything connects — ranges, integers that are integers,
durations bounded by a documented maximum — with a message naming the option
and the value, exit code 1 as docs/load-generator.md says, and no document.

Before: `-d 9300000000s` overflowed int64 nanoseconds and "completed" at once,
`-R 0.001` measured nothing and exited 0, `-R 1e400` said only "error: stod",
`-c 1.5` ran with 1 connection, and CLI11's option errors exited 105/109."""

from __future__ import annotations

import subprocess

import pytest

from conftest import echo_server, engine_path, needs_engine, run_load

BAD_FLAGS_EXIT = 1  # docs/load-generator.md, "Exit codes"

pytestmark = needs_engine("tailscope-load")


def _load(*args: str) -> subprocess.CompletedProcess:
    # Port 9 (discard) is never contacted: every case fails validation first.
    port = [] if any(a == "--port" or a.startswith("tcp://") for a in args) else ["--port", "9"]
    return subprocess.run(
        [str(engine_path("tailscope-load")), *port, *args], capture_output=True, text=True, timeout=30
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["-d", "9300000000s"], "-d: '9300000000s' is out of range (0.001 s … 86400 s)"),
        (["-d", "25h"], "-d: '25h' is out of range"),
        (["-d", "0"], "-d: '0' is out of range"),
        (["--warmup", "1e12"], "--warmup: '1e12' is out of range (0 s … 86400 s)"),
        (["--timeout", "2h"], "--timeout: '2h' is out of range (0.001 s … 3600 s)"),
        (["-R", "0.001"], "-R 0.001 with -d 10s intends 0.01 requests in the measured window"),
        (["-R", "1e400"], "-R: '1e400' is out of range"),
        (["-R", "200M"], "-R: '200M' is out of range"),
        (["-R", "-5"], "-R: '-5' is negative; must be ≥ 0"),
        (["-c", "0x10"], "-c: '0x10' is not a decimal number"),
        (["-c", "1.5"], "-c: '1.5' is not an integer (1 … 1000000)"),
        (["-c", "0"], "-c: '0' is out of range (1 … 1000000)"),
        (["-c", "2M"], "-c: '2M' is out of range"),
        (["-t", "1.5"], "-t: '1.5' is not an integer (1 … 256)"),
        (["-t", "0"], "-t: '0' is out of range (1 … 256)"),
        (["--pipeline", "2000"], "--pipeline: '2000' is out of range (1 … 1024)"),
        (["--payload-bytes", "0"], "--payload-bytes: '0' is out of range (1 … 1048576)"),
        (["--port", "70000"], "--port: '70000' is out of range (1 … 65535)"),
        (["--spin-us", "nan"], "--spin-us: 'nan' is not a number"),
        (["--spin-us", "1e9"], "--spin-us: '1e9' is out of range (0 … 10000)"),
        (["--hlog-interval", "0"], "--hlog-interval: '0' is out of range (0.01 … 3600)"),
        (["--seed", "x"], "--seed: 'x' is not a number"),
        (["--server-pid", "-3"], "--server-pid: '-3' is negative; must be ≥ 0"),
        (["tcp://127.0.0.1:http"], "target port: 'http' is not a number"),
        (["--traceparent"], "--traceparent applies only to --protocol http"),
        (["--protocol", "http", "--request-log", "x.csv"], "--request-log needs --traceparent"),
        (
            ["--protocol", "http", "--traceparent", "--request-log-max-rows", "0"],
            "--request-log-max-rows: '0' is out of range (1 … 100000000)",
        ),
        (["--no-such-flag"], "--no-such-flag"),
        (["-t"], "-t"),
    ],
)
def test_bad_numbers_are_refused_with_the_option_and_value_and_exit_1(args, message):
    r = _load(*args)
    assert r.returncode == BAD_FLAGS_EXIT, (r.returncode, r.stderr)
    assert r.stderr.startswith("tailscope-load: error: "), r.stderr
    assert message in r.stderr, r.stderr
    assert r.stdout.strip() == ""  # nothing half-written


def test_help_still_exits_0():
    r = _load("--help")
    assert r.returncode == 0 and "--duration" in r.stdout


def test_more_threads_than_cpus_is_noted_and_recorded(tmp_path):
    """Threads are pinned round robin to --cpus: -t 3 on one CPU puts three threads on one core
    (what the echo study used to do with -t N). Allowed, but said on stderr and recorded."""
    with echo_server("epoll", threads=1) as (port, _):
        rc, doc, err = run_load(
            port, "-t", "3", "-c", "6", "--cpus", "0", "-d", "0.2s", "--warmup", "0s", out=tmp_path / "r.json"
        )
        assert rc == 0, err
        assert "3 load threads on 1 CPU(s) (--cpus): 3 threads share a core" in err
        assert doc is not None and doc["config"]["threads_per_cpu"] == 3
        rc, doc, err = run_load(port, "-t", "2", "-c", "4", "-d", "0.2s", "--warmup", "0s", out=tmp_path / "u.json")
        assert rc == 0, err
        assert "share a core" not in err
        assert doc is not None and doc["config"]["threads_per_cpu"] is None  # unpinned: nothing to share
