"""One way to write a file so that a reader never sees half of it: a temporary file in
the same folder, flushed to disk, then renamed over the target (the Python side of
native/core's AtomicFileWriter). On any failure the temporary file is removed and the
target is left as it was.

The file ends with the mode a plain open() would give it (0666 less the umask: 0644 by
default), not the 0600 of the temporary file: a report or an exported topology is meant
to be served and shared."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    """The process's umask, read without changing it (os.umask can only swap it, which would
    race with other threads creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def write_text_atomic(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path
