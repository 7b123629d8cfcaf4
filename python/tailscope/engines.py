"""Finding and running the native engines, and checking what they print.

An engine is a standalone executable that prints one JSON result document
(docs/formats.md) and reports progress on stderr as JSON lines. This module is
the only place that spawns them, so timeouts, progress and validation are
handled once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

RESULT_SCHEMA = "tailscope.result/1"
REPO_ROOT = Path(__file__).resolve().parents[2]


class EngineError(RuntimeError):
    """An engine could not be found, failed, or printed an invalid document."""


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
    return doc


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
) -> EngineRun:
    """Runs an engine to completion and returns its validated document.

    The document is written by the engine to a temp file (--out), never parsed
    from a half-flushed pipe. On timeout the engine's process group is killed.
    """
    import time

    exe = find_engine(name)
    with tempfile.TemporaryDirectory(prefix="tailscope-engine-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [str(exe), *args, "--out", str(out)]
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        lines: list[str] = []

        def pump() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                line = line.rstrip("\n")
                lines.append(line)
                if on_progress and line.startswith("{"):
                    try:
                        on_progress(json.loads(line))
                    except (json.JSONDecodeError, Exception):  # progress is best effort
                        pass

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise EngineError(f"{name} exceeded its {timeout_s:.0f} s time limit and was killed")
        except BaseException:  # Ctrl-C: never leave an engine running
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=5)
            except Exception:
                os.killpg(proc.pid, signal.SIGKILL)
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
