"""Studies: sweeps of engine runs, each with a report section.

A study module defines a `Study` with a name, how to run it (quick or full
form) and how to turn what the store holds into a report section. `tailscope
run` runs every study in STUDIES order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

# The report's building blocks, re-exported: every study module imports them from here.
from ..report.blocks import Figure, Section, Table
from ..store import EngineDocument, Store

__all__ = ["Figure", "RunContext", "Section", "Study", "Table", "all_studies", "registered_studies", "study_by_name"]


@dataclass
class RunContext:
    form: str  # "quick" or "full"
    artifacts_dir: Path
    progress: Callable[[str, float], None]  # (description, fraction 0..1)
    options: dict = field(default_factory=dict)


class Study(Protocol):
    name: str
    title: str

    def run(self, ctx: RunContext) -> list[EngineDocument]: ...

    def section(self, store: Store, run_id: str) -> Section: ...


def all_studies() -> list[Study]:
    from . import (
        analyze,
        asyncmodels,
        baseline,
        collapse,
        contention,
        echo,
        isolation,
        placement,
        socialnet,
        threads,
        twin,
    )

    # analyze runs last: without trace files it analyzes the traces socialnet saved in the same run.
    return [
        baseline.STUDY,
        asyncmodels.STUDY,
        echo.STUDY,
        socialnet.STUDY,
        threads.STUDY,
        collapse.STUDY,
        contention.STUDY,
        isolation.STUDY,
        placement.STUDY,
        twin.STUDY,
        analyze.STUDY,
    ]


def registered_studies() -> list[Study]:
    """Every study the report knows how to show."""
    return all_studies()


def study_by_name(name: str) -> Study:
    for s in registered_studies():
        if s.name == name:
            return s
    raise KeyError(f"unknown study '{name}' (known: {', '.join(s.name for s in registered_studies())})")
