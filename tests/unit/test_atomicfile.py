"""The atomic writer: all or nothing, and the file mode a plain open() would give."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tailscope.atomicfile import write_text_atomic


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_written_file_follows_the_umask_not_the_temp_files_0600(tmp_path: Path, umask: int, mode: int):
    old = os.umask(umask)
    try:
        out = write_text_atomic(tmp_path / "report.html", "<html></html>")
    finally:
        os.umask(old)
    assert out.read_text() == "<html></html>"
    assert out.stat().st_mode & 0o777 == mode


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path):
    target = tmp_path / "t.json"
    target.write_text("old")

    with pytest.raises(TypeError):
        write_text_atomic(target, 12345)  # type: ignore[arg-type]  # f.write(int) fails mid-write
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]
