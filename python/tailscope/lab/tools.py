"""Third-party servers built by the bootstrap from the Go module proxy (Jaeger, HotROD): where the
binaries are, why one is missing, and starting one in the lab's process discipline.

scripts/bootstrap builds them, when Go >= 1.23 is present, into one cache folder that survives
clean builds (`~/.cache/tailscope/jaeger-v2.13.0/{jaeger,hotrod}`; $TAILSCOPE_CACHE or
$XDG_CACHE_HOME move it). A tool it could not build has a stamp beside it saying why ("skipped: no
go", "failed: build"); `tool_path` turns that into the reason a test or a study skips with.

`start` is the one way such a server is run: forked by `engines.spawn` (a process group of its own,
PDEATHSIG, so it dies with the driver), its output into a log file, ready when `probe` says so,
stopped by its PID (`engines.stop`). These servers print no ready line as the engines do, so
readiness is probed; an exit before that (a port taken, a bad flag) raises ToolStartError with the
log's error line.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tailscope.lab import engines

# scripts/bootstrap's JAEGER_VERSION: the folder both tools are cached in.
JAEGER_VERSION = "v2.13.0"
TOOLS = ("jaeger", "hotrod")
# How long a server may take to answer its probe (Jaeger's first start reads its config and opens
# its stores; on a loaded 2-core machine a few seconds).
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
LOG_TAIL_CHARS = 3000
LOG_LINE_CHARS = 400


class ToolUnavailable(RuntimeError):
    """The tool is not built here; the message is the reason (what to do about it)."""


class ToolStartError(RuntimeError):
    """The tool was there but did not start (exited, or never answered its probe)."""


def cache_dir() -> Path:
    """The bootstrap's cache folder (scripts/bootstrap's JAEGER_DIR without the version)."""
    if os.environ.get("TAILSCOPE_CACHE"):
        return Path(os.environ["TAILSCOPE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tailscope"


def tool_dir() -> Path:
    return cache_dir() / f"jaeger-{JAEGER_VERSION}"


def tool_path(name: str) -> Path:
    """The built binary of `name` (one of TOOLS), or ToolUnavailable with the reason it is missing."""
    if name not in TOOLS:
        raise ValueError(f"unknown tool {name!r} (one of {', '.join(TOOLS)})")
    exe = tool_dir() / name
    if exe.is_file() and os.access(exe, os.X_OK):
        return exe
    try:
        stamp = (tool_dir() / f".tailscope-{name}").read_text().strip()
    except OSError:
        stamp = ""
    if stamp.startswith("skipped: no go"):
        why = "no Go >= 1.23 was found to build it (install Go, then run scripts/bootstrap)"
    elif stamp.startswith("failed"):
        why = f"its build {stamp} (see {tool_dir() / (name + '.build.log')}; delete the stamp to retry)"
    else:
        why = "not built yet (scripts/bootstrap builds it when Go >= 1.23 is present)"
    raise ToolUnavailable(f"{name} (Jaeger {JAEGER_VERSION}'s module) is not at {exe}: {why}")


def free_port() -> int:
    """A loopback port free right now. Another process may take it before the tool binds it: the
    tool then exits ("address already in use") and `start` says so with the log."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def accepts(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:port (a probe, not a request)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def log_reason(log: Path) -> str:
    """Why a tool stopped, from its log: the last line that reports an error (Go programs print a
    usage text after it), else the log's last line; and where the whole log is."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace")[-LOG_TAIL_CHARS * 10 :].splitlines()]
    except OSError:
        return "no log"
    lines = [ln for ln in lines if ln]
    errors = [ln for ln in lines if re.search(r"\b(error|fatal|panic)\b", ln, re.IGNORECASE)]
    last = (errors or lines or ["no output"])[-1]
    return f"{last[:LOG_LINE_CHARS]} (log: {log})"


@contextmanager
def start(
    what: str,
    cmd: list[str],
    log: Path,
    probe: Callable[[], bool],
    *,
    env: dict[str, str] | None = None,
    cpus: set[int] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> Iterator[subprocess.Popen]:
    """Runs `cmd` until the block ends; yields once `probe()` is true. Raises ToolStartError when
    the process exits first or the probe never passes (then the process is stopped)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        proc = engines.spawn(
            cmd,
            cpus=cpus,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
    try:
        deadline = time.monotonic() + ready_timeout_s
        while not probe():
            if proc.poll() is not None:
                raise ToolStartError(f"{what} exited with {proc.returncode} before it was ready: {log_reason(log)}")
            if time.monotonic() > deadline:
                raise ToolStartError(f"{what} was not ready within {ready_timeout_s:g} s: {log_reason(log)}")
            time.sleep(0.1)
        yield proc
    finally:
        engines.stop(proc, STOP_TIMEOUT_S)
