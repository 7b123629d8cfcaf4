"""Finding and running the native engines, and checking what they print.

An engine is a standalone executable that prints one JSON result document
(docs/formats.md) and reports progress on stderr as JSON lines. This module is
the only place that spawns them, so timeouts, progress and validation are
handled once.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tailscope.lab import lifetime

RESULT_SCHEMA = "tailscope.result/1"
REPO_ROOT = Path(__file__).resolve().parents[3]


class EngineError(RuntimeError):
    """An engine could not be found, failed, or printed an invalid document."""


class EngineStartError(EngineError):
    """A serving engine exited (or never said it was ready) before its ready line."""

    def __init__(self, message: str, returncode: int | None, stderr: str):
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


class EngineUnavailable(EngineStartError):
    """The engine exited with UNAVAILABLE_EXIT: what was asked for (an echo model,
    io_uring) does not exist on this machine. `reason` is the engine's own word."""

    def __init__(self, message: str, returncode: int | None, stderr: str, reason: str):
        super().__init__(message, returncode, stderr)
        self.reason = reason


# An engine's exit code for "this variant is unavailable here" (docs/formats.md).
UNAVAILABLE_EXIT = 4
# Where run_engine keeps an engine's --out file; the owner PID in the name lets a
# later run remove the folders of a driver that was killed (lifetime.remove_stale).
ENGINE_TEMP_PREFIX = "tailscope-engine-"


def engine_dirs() -> list[Path]:
    """Where engines are looked up, in order: $TAILSCOPE_ENGINE_DIR, the
    release build of this checkout, then $PATH (handled by shutil.which)."""
    dirs = []
    if os.environ.get("TAILSCOPE_ENGINE_DIR"):
        dirs.append(Path(os.environ["TAILSCOPE_ENGINE_DIR"]))
    build = Path(os.environ.get("TAILSCOPE_BUILD_DIR", REPO_ROOT / "build" / "release"))
    dirs.append(build / "bin")
    return dirs


def find_engine(name: str) -> Path:
    for d in engine_dirs():
        candidate = d / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    searched = ", ".join(str(d) for d in engine_dirs())
    raise EngineError(f"engine '{name}' not found (searched {searched} and $PATH); run `make build`")


CRITPATH_SCHEMA = "tailscope.critpath/1"


def validate_document(doc: object, engine: str) -> dict:
    """Checks the fields every result document must have (docs/formats.md).

    A `tailscope.critpath/1` document is the result/1 envelope (measurements,
    unavailable) plus the critical-path sections (docs/critical-path.md)."""
    if not isinstance(doc, dict):
        raise EngineError(f"{engine}: result is not a JSON object")
    if doc.get("schema") == CRITPATH_SCHEMA:
        for key in ("summary", "operations", "services", "critical_paths", "warnings"):
            if key not in doc:
                raise EngineError(f"{engine}: critical-path document lacks '{key}'")
    elif doc.get("schema") != RESULT_SCHEMA:
        raise EngineError(f"{engine}: unsupported schema {doc.get('schema')!r} (expected {RESULT_SCHEMA})")
    for key, kind in (("engine", str), ("machine", dict), ("measurements", list), ("unavailable", list)):
        if not isinstance(doc.get(key), kind):
            raise EngineError(f"{engine}: result field '{key}' missing or not a {kind.__name__}")
    for i, m in enumerate(doc["measurements"]):
        if not isinstance(m, dict) or not isinstance(m.get("name"), str) or not isinstance(m.get("latency"), dict):
            raise EngineError(f"{engine}: measurement {i} lacks a name or a latency summary")
        if why := _interval_problem(m["latency"]):
            raise EngineError(f"{engine}: measurement {i} ({m['name']}): {why}")
    return doc


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _interval_problem(latency: dict) -> str:
    """What is wrong with a latency summary's percentile intervals (docs/formats.md), "" if nothing.
    A summary without them (an older engine, an empty histogram) is fine."""
    ci, missing = latency.get("percentile_ci", {}), latency.get("percentile_ci_unavailable", {})
    if not isinstance(ci, dict) or not isinstance(missing, dict):
        return "percentile_ci and percentile_ci_unavailable must be objects"
    for key, bounds in ci.items():
        if not (isinstance(bounds, list) and len(bounds) == 2 and all(_number(b) for b in bounds)):
            return f"percentile_ci[{key!r}] is not [lo, hi]"
        if bounds[0] > bounds[1]:
            return f"percentile_ci[{key!r}] has lo > hi"
    for key, why in missing.items():
        if not isinstance(why, str) or not why:
            return f"percentile_ci_unavailable[{key!r}] gives no reason"
        if key in ci:
            return f"percentile {key!r} has both an interval and a reason for none"
    return ""


def spawn(cmd: list[str], *, cpus: set[int] | None = None, **popen_kwargs: Any) -> subprocess.Popen:
    """Starts an engine in a session (and process group) of its own that dies with
    this process (lifetime.die_with_parent). The one place engines are forked.

    `cpus` pins the engine before it execs, so every process it forks later is
    pinned too (a flag on the engine could only pin the engine itself)."""
    die = lifetime.die_with_parent()

    def child_setup() -> None:
        die()
        if cpus is not None:
            os.sched_setaffinity(0, cpus)

    lifetime.raise_if_terminated()
    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=child_setup, **popen_kwargs)
    try:
        # A SIGTERM that landed during the fork had its exception swallowed: stop here.
        lifetime.raise_if_terminated()
    except BaseException:
        kill_group(proc)
        proc.wait()
        raise
    return proc


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signals the engine's whole process group (whatever it forked, too)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def remove_stale_temp() -> list[Path]:
    """Removes engine temp folders whose driver died without cleaning up."""
    return lifetime.remove_stale(Path(tempfile.gettempdir()), ENGINE_TEMP_PREFIX, unowned_is_stale=False)


def _pump(stream: IO[str], sink: Callable[[str], None], at_end: Callable[[], None] | None = None) -> threading.Thread:
    """Reads a pipe to its end in a daemon thread, so an engine never blocks on a full pipe."""

    def run() -> None:
        for line in stream:
            sink(line.rstrip("\n"))
        if at_end:
            at_end()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@dataclass
class Server:
    """A serving engine started by `serve`: its process, its parsed ready line and port."""

    proc: subprocess.Popen
    ready: dict
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=200))

    @property
    def port(self) -> int:
        return int(self.ready["listening"])

    def stderr_text(self) -> str:
        return "\n".join(self.stderr_tail)


@contextmanager
def serve(
    name: str,
    args: list[str],
    *,
    ready_timeout_s: float = 30.0,
    stop_timeout_s: float = 10.0,
    cpus: set[int] | None = None,
) -> Iterator[Server]:
    """Starts a serving engine, waits for its ready line, yields a Server, stops it.

    Serving engines print one JSON line with "listening" (the port) on stdout
    once they accept connections. An exit before that raises EngineStartError
    with the exit code and stderr (EngineUnavailable for UNAVAILABLE_EXIT); no
    ready line within ready_timeout_s kills the engine and raises too. On leaving
    the block the engine gets SIGTERM (a clean shutdown writes its --out
    document), and its whole process group SIGKILL if it is not gone within
    stop_timeout_s, or if anything it forked outlived it.
    """
    exe = find_engine(name)
    cmd = [str(exe), *args]
    proc = spawn(cmd, cpus=cpus, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    stderr_tail: deque[str] = deque(maxlen=200)
    lines: queue.Queue[str | None] = queue.Queue()
    err_reader = _pump(proc.stderr, stderr_tail.append)
    out_reader = _pump(proc.stdout, lines.put, at_end=lambda: lines.put(None))
    try:
        ready = _wait_ready(name, proc, lines, ready_timeout_s)
        if ready is None:
            try:
                rc = proc.wait(timeout=stop_timeout_s)
            except subprocess.TimeoutExpired:
                raise EngineStartError(
                    f"{name} closed its stdout without a ready line", None, "\n".join(stderr_tail)
                ) from None
            err_reader.join(timeout=5)
            raise _start_error(name, cmd, rc, "\n".join(stderr_tail).strip())
        yield Server(proc, ready, stderr_tail)
    finally:
        stop(proc, stop_timeout_s)
        err_reader.join(timeout=5)
        out_reader.join(timeout=5)


def _wait_ready(name: str, proc: subprocess.Popen, lines: queue.Queue[str | None], timeout_s: float) -> dict | None:
    """The parsed ready line, or None if the engine closed stdout (exited) first."""
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            kill_group(proc)
            proc.wait()
            raise EngineStartError(f"{name} printed no ready line within {timeout_s:g} s and was killed", None, "")
        try:
            line = lines.get(timeout=min(remaining, 0.5))
        except queue.Empty:
            continue
        if line is None:
            return None
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and "listening" in doc:
            return doc


def _start_error(name: str, cmd: list[str], rc: int, stderr: str) -> EngineStartError:
    what = " ".join([name, *cmd[1:5]])
    if rc == UNAVAILABLE_EXIT:
        reason = stderr.split("unavailable:", 1)[-1].strip() or "unavailable"
        return EngineUnavailable(f"{what}: unavailable: {reason}", rc, stderr, reason)
    return EngineStartError(f"{what} exited with {rc} before it was ready: {stderr or 'no message'}", rc, stderr)


def stop(proc: subprocess.Popen, timeout_s: float) -> None:
    """Stops a process started by `spawn`, by its PID: SIGTERM (a clean shutdown), then its whole
    process group SIGKILL if it is not gone within `timeout_s`, or if anything it forked outlived it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.wait()
    kill_group(proc)  # anything the engine forked and left behind


@dataclass
class EngineRun:
    document: dict
    stderr_lines: list[str]
    wall_time_s: float


def run_engine(
    name: str,
    args: list[str],
    *,
    timeout_s: float,
    on_progress: Callable[[dict], None] | None = None,
    wrapper: list[str] | None = None,
) -> EngineRun:
    """Runs an engine to completion and returns its validated document.

    The document is written by the engine to a temp file (--out), never parsed
    from a half-flushed pipe. On timeout the engine's process group is killed.
    `wrapper` is an argv prefix that execs the engine, e.g. `ip netns exec NS` to
    run it inside a lab host (labhosts.exec_args).
    """
    exe = find_engine(name)
    with tempfile.TemporaryDirectory(prefix=lifetime.owned_name(ENGINE_TEMP_PREFIX) + "-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [*(wrapper or []), str(exe), *args, "--out", str(out)]
        started = time.monotonic()
        proc = spawn(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []

        def on_line(line: str) -> None:
            lines.append(line)
            if on_progress and line.startswith("{"):
                try:
                    on_progress(json.loads(line))
                except Exception:  # progress is best effort
                    pass

        assert proc.stderr is not None
        reader = _pump(proc.stderr, on_line)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.wait()
            raise EngineError(f"{name} exceeded its {timeout_s:.0f} s time limit and was killed") from None
        except BaseException:  # Ctrl-C, SIGTERM: never leave an engine running
            kill_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                proc.wait()
            raise
        reader.join(timeout=5)
        wall = time.monotonic() - started
        if rc != 0:
            errors = [ln for ln in lines if not ln.startswith("{")][-5:]
            raise EngineError(f"{name} exited with {rc}: " + (" | ".join(errors) or "no message"))
        try:
            doc = json.loads(out.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise EngineError(f"{name} printed no valid result document: {e}") from e
        return EngineRun(validate_document(doc, name), lines, wall)
