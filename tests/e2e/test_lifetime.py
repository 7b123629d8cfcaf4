"""Engine lifetime: engines.serve's start errors and stop, engines
dying with their driver (PR_SET_PDEATHSIG), SIGTERM/SIGHUP handled like Ctrl-C by
`tailscope run`, and stale staging / engine temp folders removed by the next run.

The fake engines are shell scripts in $TAILSCOPE_ENGINE_DIR; the end-to-end tests
drive the real socialnet study and are skipped when tailscope-svc is not built."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO, needs_engine, start_tailscope, tailscope_env
from tailscope import runner
from tailscope.lab import engines, lifetime


def _fake_engine(folder: Path, name: str, body: str) -> str:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return name


@pytest.fixture
def fake_engines(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "engines"
    folder.mkdir()
    monkeypatch.setenv("TAILSCOPE_ENGINE_DIR", str(folder))
    return folder


def _identity(pid: int) -> tuple[str, str] | None:
    """(comm, start time) of a live, non-zombie process; None if gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return comm, fields[19]


def _descendants(pid: int) -> dict[int, tuple[str, str]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(text[text.rindex(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out: dict[int, tuple[str, str]] = {}
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        ident = _identity(p)
        if ident:
            out[p] = ident
        todo += children.get(p, [])
    return out


def _still_running(procs: dict[int, tuple[str, str]]) -> list[int]:
    return [p for p, ident in procs.items() if _identity(p) == ident]


def _wait_until_gone(procs: dict[int, tuple[str, str]], limit_s: float) -> list[int]:
    """Waits (bounded) for the processes to exit; returns those still running. Signals
    are delivered asynchronously, so "gone" is a state reached, not an instant."""
    deadline = time.monotonic() + limit_s
    while _still_running(procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _still_running(procs)


def _kill_all(procs: dict[int, tuple[str, str]]) -> None:
    for p in _still_running(procs):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


# ---- engines.serve -----------------------------------------------------------------


def test_serve_yields_ready_line_and_port_then_stops_the_whole_group(fake_engines):
    # The engine forks a helper into its own process group and ignores nothing: SIGTERM ends it,
    # and the group kill ends the helper it left behind.
    name = _fake_engine(
        fake_engines, "fake-server", 'sleep 300 &\necho "{\\"listening\\": 4242, \\"pid\\": $$}"\nexec sleep 300'
    )
    with engines.serve(name, []) as srv:
        assert srv.port == 4242 and srv.ready["pid"] == srv.proc.pid
        group = _descendants(srv.proc.pid) | {srv.proc.pid: _identity(srv.proc.pid)}
        assert len(group) == 2
    assert srv.proc.returncode == -signal.SIGTERM
    assert _wait_until_gone(group, 10) == []


def test_serve_pins_the_engine_and_what_it_forks(fake_engines):
    # How `tailscope run --cpus` pins the socialnet graph: affinity set before exec is inherited.
    before = os.sched_getaffinity(0)
    cpu = max(before)
    name = _fake_engine(fake_engines, "fake-forker", "sleep 300 &\necho '{\"listening\": 1}'\nexec sleep 300")
    with engines.serve(name, [], cpus={cpu}) as srv:
        group = [srv.proc.pid, *_descendants(srv.proc.pid)]
        assert len(group) == 2
        assert all(os.sched_getaffinity(p) == {cpu} for p in group)
    assert os.sched_getaffinity(0) == before  # only the engine was pinned, never the driver


def test_serve_kills_an_engine_that_ignores_sigterm(fake_engines):
    name = _fake_engine(
        fake_engines, "fake-stubborn", "trap '' TERM\necho '{\"listening\": 1}'\nwhile :; do sleep 1; done"
    )
    with engines.serve(name, [], stop_timeout_s=0.5) as srv:
        pass
    assert srv.proc.returncode == -signal.SIGKILL


def test_exit_before_ready_is_a_start_error_with_code_and_stderr(fake_engines):
    name = _fake_engine(fake_engines, "fake-crash", "echo 'bad --port value' >&2\nexit 3")
    with pytest.raises(engines.EngineStartError) as info:
        with engines.serve(name, ["--port", "x"]):
            pytest.fail("the block must not run")
    assert info.value.returncode == 3 and "bad --port value" in info.value.stderr
    assert "exited with 3" in str(info.value) and "bad --port value" in str(info.value)
    assert not isinstance(info.value, engines.EngineUnavailable)


def test_exit_code_4_is_engine_unavailable_with_the_reason(fake_engines):
    name = _fake_engine(fake_engines, "fake-uring", "echo 'fake-uring: unavailable: io_uring is disabled' >&2\nexit 4")
    with pytest.raises(engines.EngineUnavailable) as info:
        with engines.serve(name, []):
            pass
    assert info.value.reason == "io_uring is disabled" and info.value.returncode == 4


def test_no_ready_line_in_time_kills_the_engine(fake_engines):
    name = _fake_engine(fake_engines, "fake-silent", "echo 'not json'\nexec sleep 300")
    with pytest.raises(engines.EngineStartError, match="no ready line"):
        with engines.serve(name, [], ready_timeout_s=0.5):
            pass
    leftovers = [p for p, ident in _descendants(os.getpid()).items() if ident[0] == "sleep"]
    assert leftovers == []


# ---- engines die with their parent -------------------------------------------------


def test_engine_gets_sigterm_when_its_driver_is_killed(tmp_path):
    # A driver that spawns an engine and is then SIGKILLed: no cleanup code of the driver runs,
    # only PR_SET_PDEATHSIG can end the engine.
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom tailscope.lab.engines import spawn\n"
            "p = spawn(['sleep', '300'])\nprint(p.pid, flush=True)\ntime.sleep(300)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        engine_pid = int(driver.stdout.readline())
        engine = {engine_pid: _identity(engine_pid)}
        assert engine[engine_pid] is not None
        driver.kill()
        driver.wait()
        assert _wait_until_gone(engine, 10) == [], "the engine outlived its killed driver"
    finally:
        driver.kill()
        driver.wait()
        _kill_all(engine if "engine" in locals() else {})


# ---- stale folders -----------------------------------------------------------------


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_next_run_removes_staging_and_engine_temp_of_dead_runs_only(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    dead = _dead_pid()
    stale = results / lifetime.owned_name(f"{runner.STAGING_PREFIX}20240101-000000-abcd-", dead)
    legacy = results / f"{runner.STAGING_PREFIX}20240101-000000-ef01"  # before owners were recorded
    live = results / lifetime.owned_name(f"{runner.STAGING_PREFIX}20240101-000000-beef-")
    for d in (stale, legacy, live):
        (d / "artifacts").mkdir(parents=True)
    tmp = Path(tempfile.gettempdir())
    stale_tmp = Path(tempfile.mkdtemp(prefix=lifetime.owned_name(engines.ENGINE_TEMP_PREFIX, dead) + "-"))
    live_tmp = Path(tempfile.mkdtemp(prefix=lifetime.owned_name(engines.ENGINE_TEMP_PREFIX) + "-"))
    unowned_tmp = Path(tempfile.mkdtemp(prefix=engines.ENGINE_TEMP_PREFIX, dir=tmp))
    try:
        runner.remove_stale_leftovers(results)
        assert not stale.exists() and not legacy.exists() and live.exists()
        assert not stale_tmp.exists() and live_tmp.exists()
        assert unowned_tmp.exists()  # the temp folder is shared: without an owner, never guess
    finally:
        for d in (stale_tmp, live_tmp, unowned_tmp):
            subprocess.run(["rm", "-rf", str(d)], check=False)


# ---- tailscope run under SIGTERM, SIGHUP and SIGKILL (real socialnet graph) --------------


def _start_socialnet_run(results: Path) -> tuple[subprocess.Popen, dict[int, tuple[str, str]]]:
    """`tailscope run --study socialnet`, once its 13-process graph is up: (cli, its engine processes)."""
    cli = start_tailscope("run", "--study", "socialnet", "--scale", "0.05", env=tailscope_env(results))
    deadline = time.monotonic() + 120
    procs: dict[int, tuple[str, str]] = {}
    while time.monotonic() < deadline and cli.poll() is None:
        procs = _descendants(cli.pid)
        if sum(1 for comm, _ in procs.values() if comm.startswith("tailscope-svc")) >= 13:
            return cli, procs
        time.sleep(0.05)
    cli.kill()
    _kill_all(procs)
    pytest.fail(f"the socialnet graph did not come up: {cli.communicate(timeout=30)[1][-2000:]}")


@needs_engine("tailscope-svc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_stops_the_run_like_ctrl_c(sig, tmp_path):
    results = tmp_path / "results"
    cli, procs = _start_socialnet_run(results)
    try:
        cli.send_signal(sig)
        _out, err = cli.communicate(timeout=120)
        assert cli.returncode == 128 + sig, err[-2000:]
        assert "nothing was stored" in err
        assert _wait_until_gone(procs, 10) == [], "engines outlived the run"
        assert not list(results.glob(".staging-*"))
        assert not list(
            Path(tempfile.gettempdir()).glob(f"{lifetime.owned_name(engines.ENGINE_TEMP_PREFIX, cli.pid)}*")
        )
        assert not (results / runner.DB_NAME).exists()  # nothing stored
    finally:
        cli.kill()
        cli.communicate()
        _kill_all(procs)


@needs_engine("tailscope-svc")
def test_killed_run_leaves_no_engine_and_its_folders_go_at_the_next_run(tmp_path):
    results = tmp_path / "results"
    cli, procs = _start_socialnet_run(results)
    try:
        cli.kill()  # SIGKILL: no handler runs, the staging folder stays
        cli.communicate(timeout=30)
        assert _wait_until_gone(procs, 30) == [], "engines outlived their killed driver"
        assert list(results.glob(".staging-*"))
        runner.remove_stale_leftovers(results)
        assert not list(results.glob(".staging-*"))
        assert not list(
            Path(tempfile.gettempdir()).glob(f"{lifetime.owned_name(engines.ENGINE_TEMP_PREFIX, cli.pid)}*")
        )
    finally:
        _kill_all(procs)
