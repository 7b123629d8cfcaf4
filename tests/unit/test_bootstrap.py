"""scripts/bootstrap: a fast no-op when set up, a clear error without apt."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from conftest import REPO

BOOTSTRAP = REPO / "scripts" / "bootstrap"


def test_second_run_is_a_silent_no_op():
    # make test has already bootstrapped this checkout: nothing left to do.
    r = subprocess.run([str(BOOTSTRAP)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", r.stderr


def test_missing_packages_without_apt_is_a_clear_error(tmp_path: Path):
    # A PATH with only the basic tools and a dpkg-query that knows no package.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "grep", "cut", "sha256sum", "id", "cat", "dirname", "printf", "env"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    fake = bin_dir / "dpkg-query"
    fake.write_text("#!/bin/bash\nexit 1\n")
    fake.chmod(0o755)
    env = {"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/root")}
    r = subprocess.run([str(bin_dir / "bash"), str(BOOTSTRAP)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1
    assert "no apt-get" in r.stderr
    assert "libboost-dev" in r.stderr  # names what is missing
