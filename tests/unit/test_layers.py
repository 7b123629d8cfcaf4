"""The driver's layers (docs/architecture.md) are a check, not a hope: import-linter's contract in
pyproject.toml passes on the tree as it is and fails on a copy with one upward import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree,
        env={"PYTHONPATH": str(tree / "python"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    if not LINT_IMPORTS.exists():
        pytest.skip(f"{LINT_IMPORTS} not installed (scripts/bootstrap installs import-linter)")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(REPO / "python" / "tailscope", tmp_path / "python" / "tailscope")
    return tmp_path


def test_the_tree_keeps_its_layers(tree_copy: Path):
    r = _lint(tree_copy)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 broken" in r.stdout and "BROKEN" not in r.stdout


@pytest.mark.parametrize(
    ("module", "upward"),
    [
        ("store.py", "from tailscope.studies import registry"),  # the store reaching up to the studies
        ("report/blocks.py", "from tailscope.studies import base"),  # the report importing a study
        ("lab/engines.py", "from tailscope.traces import jaeger"),  # the lab importing traces
    ],
)
def test_an_upward_import_fails_the_lint(tree_copy: Path, module: str, upward: str):
    path = tree_copy / "python" / "tailscope" / module
    text = path.read_text()
    # After the `from __future__` line, so the file still parses; inside a function it would count too.
    path.write_text(
        text.replace("from __future__ import annotations\n", f"from __future__ import annotations\n\n{upward}\n", 1)
    )
    r = _lint(tree_copy)
    assert r.returncode != 0, r.stdout
    assert "BROKEN" in r.stdout
    importer = "tailscope." + module.removesuffix(".py").replace("/", ".")
    assert importer in r.stdout, r.stdout
