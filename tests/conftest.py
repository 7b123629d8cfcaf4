"""Shared pytest fixtures: where the engines are, and a throwaway results folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("TAILSCOPE_BUILD_DIR", REPO / "build" / "release"))
SHARED = REPO.parent / "shared"


CRITPATH_FIXTURES = Path(os.environ.get("TAILSCOPE_CRITPATH_FIXTURES", SHARED / "fixtures" / "critical-path"))
FIXTURES_ABSENT = "fixtures-absent"


def fixture_files(subdir: str, pattern: str = "*.json") -> list:
    """The conformance fixtures under ../shared/fixtures/critical-path/<subdir>,
    sorted, for parametrize; [FIXTURES_ABSENT] when there are none, so the test
    still runs once and says why (see require_fixture) instead of pytest
    silently skipping an empty parameter set."""
    files = sorted((CRITPATH_FIXTURES / subdir).glob(pattern))
    return files or [FIXTURES_ABSENT]


def require_fixture(path) -> Path:
    """`path` when it exists. Otherwise: in CI (TAILSCOPE_REQUIRE_FIXTURES=1,
    set by .ci/run) the test fails loudly; elsewhere (a user's clone has no
    ../shared) it skips with the reason."""
    if path != FIXTURES_ABSENT and Path(path).exists():
        return Path(path)
    reason = f"conformance fixtures not found at {CRITPATH_FIXTURES} (a clone without ../shared)"
    if os.environ.get("TAILSCOPE_REQUIRE_FIXTURES") == "1":
        pytest.fail(reason + "; required here (TAILSCOPE_REQUIRE_FIXTURES=1)", pytrace=False)
    pytest.skip(reason)


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
