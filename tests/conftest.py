"""Shared pytest fixtures: where the engines are, and a throwaway results folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("TAILSCOPE_BUILD_DIR", REPO / "build" / "release"))
SHARED = REPO.parent / "shared"


def engine_path(name: str) -> Path:
    return BUILD / "bin" / name


@pytest.fixture
def engine():
    """engine('tailscope-baseline') -> path; skips with a message if not built."""

    def get(name: str) -> Path:
        p = engine_path(name)
        if not p.exists():
            pytest.skip(f"{p} not built (run `make build`)")
        return p

    return get


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    d = tmp_path / "results"
    return d
