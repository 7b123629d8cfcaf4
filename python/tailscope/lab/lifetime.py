"""Process lifetime: engines die with the driver, signals end a run cleanly, and
what a dead driver left behind is removed by the next one.

Three leaks this module closes (each found by killing a run mid-way):

- An engine started by a driver that is killed (SIGKILL, OOM) would run on
  forever, a 13-process graph still listening. Every engine is started with
  PR_SET_PDEATHSIG, so the kernel sends it SIGTERM when its parent dies (SIGTERM,
  not SIGKILL: tailscope-svc --all then stops its own service processes), and in
  a session (process group) of its own, so a stop reaches every process it forked.
- SIGTERM and SIGHUP would kill the driver without running any cleanup.
  `terminate_as_interrupt()` turns them into a KeyboardInterrupt, so every path
  that already cleans up after Ctrl-C (engines stopped, staging removed, the
  database untouched) runs for them too.
- Folders owned by a run (`.staging-*` under the results folder,
  `tailscope-engine-*` under the temp folder) carry their owner's PID in their
  name; `remove_stale()` deletes those whose owner is no longer alive.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_DEATH_SIGNAL = signal.SIGTERM
TERMINATION_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

# Resolved once at import, never in the forked child: between fork and exec only
# the already-loaded prctl function is called (no import, no symbol lookup).
_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int


def die_with_parent() -> Callable[[], None]:
    """A `preexec_fn` for subprocess.Popen: the child gets SIGTERM when this
    process dies. PR_SET_PDEATHSIG survives exec.

    The kernel tracks the *thread* that forked the child: start engines from a
    thread that outlives them (the studies run in the main thread)."""
    parent = os.getpid()

    def preexec() -> None:
        _prctl(PR_SET_PDEATHSIG, int(PARENT_DEATH_SIGNAL), 0, 0, 0)
        # The parent may have died between fork and prctl: then no signal would come.
        if os.getppid() != parent:
            os._exit(1)

    return preexec


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the driver is, like Ctrl-C's KeyboardInterrupt."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def interrupt_exit_code(e: KeyboardInterrupt) -> int:
    """128 + the signal number, as a shell reports it: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP."""
    return 128 + (e.signum if isinstance(e, Terminated) else int(signal.SIGINT))


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM and SIGHUP raise Terminated; the previous handlers
    come back afterwards. Only the first signal raises: later ones are ignored so
    they cannot cut the cleanup short (Ctrl-C still interrupts it)."""
    global _pending
    previous = {s: signal.getsignal(s) for s in TERMINATION_SIGNALS}

    def handler(signum: int, _frame: FrameType | None) -> None:
        global _pending
        for s in TERMINATION_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        _pending = signum
        raise Terminated(signum)

    _pending = None
    for s in TERMINATION_SIGNALS:
        signal.signal(s, handler)
    try:
        yield
    finally:
        _pending = None
        for s, h in previous.items():
            signal.signal(s, h)


# The signal that arrived, kept after its exception was raised: Python swallows
# an exception raised while it runs a callback whose errors it ignores (seen: the
# logging module's at-fork hook, when the signal lands while subprocess forks),
# so the places that start engines re-raise it (raise_if_terminated).
_pending: int | None = None


def raise_if_terminated() -> None:
    """Raises Terminated if SIGTERM/SIGHUP arrived inside terminate_as_interrupt()."""
    if _pending is not None:
        raise Terminated(_pending)


# ---- folders owned by a process ---------------------------------------------

_OWNER = re.compile(r"-pid(\d+)(?:-|$)")


def owned_name(prefix: str, pid: int | None = None) -> str:
    """`prefix` + the owner's PID, in the form `remove_stale` reads back."""
    return f"{prefix}pid{os.getpid() if pid is None else pid}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale(folder: Path, prefix: str, *, unowned_is_stale: bool) -> list[Path]:
    """Removes the folders `folder/prefix*` whose owner PID (see owned_name) is dead.

    A name without a PID comes from a version that did not record one: removed
    only if `unowned_is_stale` (the results folder is this project's own; the
    shared temp folder is not). Returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(Path(folder).glob(prefix + "*"))
    except OSError:
        return removed
    for entry in entries:
        if not entry.is_dir() or entry.is_symlink():
            continue
        m = _OWNER.search(entry.name)
        if m is None:
            stale = unowned_is_stale
        else:
            stale = int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1)))
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
            if not entry.exists():
                removed.append(entry)
    return removed
