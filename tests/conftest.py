"""Shared pytest fixtures: where the engines are, a throwaway results folder, and
the engine scaffolding the end-to-end tests share (an echo server, a load run, the
`tailscope` command, lab hosts)."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path

import pytest

from tailscope.lab import tools
from tailscope.store import EngineDocument, RunRecord, Store
from tailscope.studies.echo.analysis import CLOSED, EchoPoint

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("TAILSCOPE_BUILD_DIR", REPO / "build" / "release"))
SHARED = REPO.parent / "shared"


CRITPATH_FIXTURES = Path(os.environ.get("TAILSCOPE_CRITPATH_FIXTURES", SHARED / "fixtures" / "critical-path"))
FIXTURES_ABSENT = "fixtures-absent"


def fixture_files(subdir: str, pattern: str = "*.json") -> list:
    """The conformance fixtures under ../shared/fixtures/critical-path/<subdir>,
    sorted, for parametrize; [FIXTURES_ABSENT] when there are none, so the test
    still runs once and says why (see require_fixture) instead of pytest
    silently skipping an empty parameter set."""
    files = sorted((CRITPATH_FIXTURES / subdir).glob(pattern))
    return files or [FIXTURES_ABSENT]


def require_fixture(path) -> Path:
    """`path` when it exists. Otherwise: in CI (TAILSCOPE_REQUIRE_FIXTURES=1,
    set by .ci/run) the test fails loudly; elsewhere (a user's clone has no
    ../shared) it skips with the reason."""
    if path != FIXTURES_ABSENT and Path(path).exists():
        return Path(path)
    reason = f"conformance fixtures not found at {CRITPATH_FIXTURES} (a clone without ../shared)"
    if os.environ.get("TAILSCOPE_REQUIRE_FIXTURES") == "1":
        pytest.fail(reason + "; required here (TAILSCOPE_REQUIRE_FIXTURES=1)", pytrace=False)
    pytest.skip(reason)


# The `tailscope` command of the package under test, as a subprocess.
TAILSCOPE = [sys.executable, "-m", "tailscope.cli"]

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="lab hosts need root and iproute2 (`ip`)"
)


def tailscope_env(results: Path) -> dict:
    """The environment of a `tailscope` subprocess: results under `results`, engines from BUILD."""
    return {**os.environ, "TAILSCOPE_RESULTS": str(results), "TAILSCOPE_BUILD_DIR": str(BUILD)}


# Runs its arguments with SIGINT at its default first. A command started in the background by a
# non-interactive shell (`make test &`, some CI runners) inherits SIGINT *ignored*, and Python then
# keeps ignoring it: a test that sends SIGINT would wait for a run that never hears it (a helper's
# `make test` saw exactly that: the Ctrl-C test timed out while the run went on).
_WITH_DEFAULT_SIGINT = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
]


def start_tailscope(*args: str, env: dict) -> subprocess.Popen:
    """`tailscope ARGS` started in the background from the repository root, its output piped (text),
    with SIGINT handled whatever the test runner inherited."""
    return subprocess.Popen(
        [*_WITH_DEFAULT_SIGINT, *TAILSCOPE, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


def stop(proc: subprocess.Popen, timeout_s: float = 10) -> None:
    """SIGTERM, then SIGKILL if the process is not gone within `timeout_s`; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def engine_path(name: str) -> Path:
    return BUILD / "bin" / name


def needs_engine(*names: str) -> pytest.MarkDecorator:
    """The one skip for tests that run engines: skips (naming what is missing and how to build it)
    unless every engine in `names` is built. As a decorator, or `pytestmark = needs_engine(...)`."""
    missing = [n for n in names if not engine_path(n).exists()]
    return pytest.mark.skipif(
        bool(missing),
        reason=f"{', '.join(missing)} not built in {BUILD / 'bin'} (run `make build` or set TAILSCOPE_BUILD_DIR)",
    )


def go_tools_missing() -> str:
    """Why the bootstrap's Go-built Jaeger or HotROD is not here (lab/tools.py), "" when both are."""
    for name in tools.TOOLS:
        try:
            tools.tool_path(name)
        except tools.ToolUnavailable as e:
            return str(e)
    return ""


def needs_go_tools() -> pytest.MarkDecorator:
    """Skips (with the reason the bootstrap left) unless Jaeger and HotROD are built."""
    missing = go_tools_missing()
    return pytest.mark.skipif(bool(missing), reason=missing or "-")


def svc_models() -> list[str]:
    """tailscope-svc's models (`--list-models`, the one list) for parametrize; [] when the engine is
    not built — the tests using it carry needs_engine("tailscope-svc") and skip saying why."""
    exe = engine_path("tailscope-svc")
    if not exe.exists():
        return []
    return subprocess.run(
        [str(exe), "--list-models"], capture_output=True, text=True, timeout=30, check=True
    ).stdout.split()


def built_engine(name: str) -> Path:
    """The engine's path; skips the test (saying how to build it) when it is not built."""
    p = engine_path(name)
    if not p.exists():
        pytest.skip(f"{p} not built (run `make build` or set TAILSCOPE_BUILD_DIR)")
    return p


def front_and_locked_store(
    *, store_service: str, front_span: str, latency: dict, call_timeout_ms: int, name: str = "locked-store"
) -> dict:
    """The what-if tests' smallest twin: a front whose one endpoint calls a store service whose one
    endpoint runs a `mysql` store stage of capacity 1 (a lock) — the shape a second slot or a faster
    stage changes."""
    return {
        "name": name,
        "call_timeout_ms": call_timeout_ms,
        "front": {"service": "front", "path": "/get", "endpoint": "get"},
        "services": [
            {
                "name": "front",
                "endpoints": [
                    {
                        "name": "get",
                        "span": front_span,
                        "stages": [{"call": {"service": store_service, "endpoint": "read", "span": "read_client"}}],
                    }
                ],
            },
            {
                "name": store_service,
                "endpoints": [
                    {
                        "name": "read",
                        "span": "read",
                        "stages": [{"store": {"span": "SELECT", "system": "mysql", "latency": latency, "capacity": 1}}],
                    }
                ],
            },
        ],
    }


@contextmanager
def echo_server(
    model: str, protocol: str = "echo", extra: list[str] | None = None, threads: int = 2
) -> Iterator[tuple[int, subprocess.Popen]]:
    """Runs tailscope-echo on an ephemeral port; yields (port, proc). A model this kernel
    lacks skips the test with the engine's reason. Checks a clean SIGTERM shutdown
    (engines.serve kills it if it is not gone 10 s after SIGTERM: then the exit code is -9)."""
    from tailscope.lab.engines import EngineUnavailable, serve

    built_engine("tailscope-echo")
    args = ["--model", model, "--port", "0", "--threads", str(threads), "--protocol", protocol, *(extra or [])]
    with ExitStack() as stack:
        try:
            srv = stack.enter_context(serve("tailscope-echo", args, stop_timeout_s=10.0))
        except EngineUnavailable as e:
            pytest.skip(f"model {model} unavailable here: {e.reason}")
        yield srv.port, srv.proc
        running_at_end = srv.proc.poll() is None
    if running_at_end:
        assert srv.proc.returncode == 0, f"{model} exited {srv.proc.returncode} on SIGTERM: {srv.stderr_text()}"


def run_load(port: int, *args: str, out: Path | None = None, timeout: float = 60) -> tuple[int, dict | None, str]:
    """One tailscope-load run against 127.0.0.1:port: (exit code, result document or None, stderr).
    The document comes from --out when given, else from stdout; the timeout turns a hang into a failure."""
    cmd = [str(built_engine("tailscope-load")), "--port", str(port), *args]
    if out is not None:
        cmd += ["--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out is not None:
        doc = json.loads(out.read_text()) if out.exists() else None
    else:
        doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else None
    return r.returncode, doc, r.stderr


@contextmanager
def silent_listener() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections (the kernel's backlog) and never reads or
    answers: a server that hangs. Yields the port."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


@contextmanager
def echo_server_in_lab_host(echo: Path, netns: str, address: str) -> Iterator[int]:
    """tailscope-echo (epoll) inside lab host `netns`, bound to `address`; yields its port and
    stops it at the end (stop)."""
    from tailscope.lab import labhosts

    server = subprocess.Popen(
        [*labhosts.exec_args(netns), str(echo), "--model", "epoll", "--host", address, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield json.loads(server.stdout.readline())["listening"]
    finally:
        stop(server)


def assert_refused_before_start(r: subprocess.CompletedProcess, message: str, out: Path) -> None:
    """A tailscope-svc run refused at its flags: exit 1 naming the problem, no ready line (no
    service was started) and no result document."""
    assert r.returncode == 1
    assert message in r.stderr
    assert r.stdout == ""
    assert not out.exists()


def start_load(port: int, *args: str, out: Path) -> subprocess.Popen:
    """tailscope-load started in the background (for tests that kill or interrupt something
    mid-run); its document goes to `out`. The caller bounds it with communicate(timeout=...)."""
    cmd = [str(built_engine("tailscope-load")), "--port", str(port), *args, "--out", str(out)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# Files with tests that run for minutes (test_cli.py: complete `tailscope run`s of every
# study). Collected first, so `make test-python` (pytest-xdist, --dist loadfile, which hands
# files out in collection order) starts the longest file at once instead of last, when the
# other process would sit idle waiting for it (docs/testing.md).
LONGEST_FILES_FIRST = ("test_cli.py",)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def run_study_alone(study, results: Path, options: dict) -> tuple[str, Path, list]:
    """One study end to end in its given (tiny) form, as `tailscope bench` runs it: (run id,
    report path, the stored engine documents). Fails the test when the study failed."""
    from tailscope.runner import run_studies
    from tailscope.store import Store

    run_id, report, failures, _database = run_studies([study], form="quick", results_dir=results, options=options)
    assert failures == []
    with Store(results / "tailscope.duckdb", read_only=True) as store:
        docs = store.documents(run_id, study.name)
    return run_id, report, docs


def report_section(report: Path, section_id: str) -> str:
    """The HTML of one section of a written report (from its start to the end of the page)."""
    html = report.read_text()
    start = f'<section id="{section_id}">'
    assert start in html, f"no section {section_id} in {report}"
    return html[html.index(start) :]


@pytest.fixture
def engine():
    """engine('tailscope-baseline') -> path; skips with a message if not built."""

    return built_engine


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    d = tmp_path / "results"
    return d


# ---- stored runs for store and CLI tests ----------------------------------------------------


def stored_doc(name="condvar_handoff", p50=1000.0):
    return {
        "schema": "tailscope.result/1",
        "engine": "tailscope-baseline",
        "machine": {},
        "unavailable": [],
        "measurements": [
            {
                "name": name,
                "variant": "pinned",
                "pinning": {"policy": "pinned"},
                "observed": {},
                "latency": {
                    "unit": "ns",
                    "count": 100,
                    "min": 10,
                    "mean": 1100.0,
                    "stddev": 5.0,
                    "max": 9000,
                    "percentiles": {"50": p50, "90": 2000, "99": 5000, "99.9": 9000, "99.99": 9000},
                    "low_confidence": ["99.9", "99.99"],
                },
                "cdf": [[10, 0.0], [p50, 50.0], [9000, 100.0]],
            }
        ],
    }


def stored_run(run_id: str, docs, failures=()):
    now = datetime(2026, 1, 1, 12, 0, 0)
    return RunRecord(
        run_id,
        now,
        now,
        "quick",
        ["baseline"],
        {"kernel": "x"},
        "test",
        [EngineDocument("baseline", "tailscope-baseline", d) for d in docs],
        list(failures),
    )


def big_store(path):
    """A database of several blocks (DuckDB allocates 256 KiB blocks), like a real results file."""
    doc = stored_doc()
    doc["padding"] = random.Random(0).randbytes(200_000).hex()  # 400 kB, incompressible: the file spans blocks
    with Store(path) as s:
        for k in range(3):
            s.save_run(stored_run(f"r{k}", [doc]))
    return path


# ---- echo study points ------------------------------------------------------------------------


def echo_point(
    model: str,
    c: int,
    tput: float,
    p99: float,
    cpu: float | None = 99.0,
    mode: str = CLOSED,
    gen_busy: float | None = 0.5,
    **kw,
) -> EchoPoint:
    """One echo sweep point with plausible figures around `tput` and `p99` (tests of the echo study)."""
    fields = dict(
        model=model,
        connections=c,
        mode=mode,
        throughput_per_s=tput,
        mean_ns=p99 / 2,
        p50_ns=p99 / 3,
        p90_ns=p99 / 2,
        p99_ns=p99,
        p999_ns=p99 * 2,
        samples=1000,
        cpu_pct=cpu,
        generator_busy_share=gen_busy,
        load_cpus=(0,),
    )
    return EchoPoint(**(fields | kw))
