"""Every study tailscope runs, in `tailscope run` order."""

from __future__ import annotations

from tailscope.studies import (
    analyze,
    asyncmodels,
    baseline,
    collapse,
    containers,
    contention,
    diagnose,
    echo,
    isolation,
    placement,
    socialnet,
    threads,
    tracing,
    twin,
)
from tailscope.studies.base import Study


def all_studies() -> list[Study]:
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
        containers.STUDY,
        placement.STUDY,
        twin.STUDY,
        diagnose.STUDY,
        tracing.STUDY,
        analyze.STUDY,
    ]


# Studies `tailscope run` (and `make run`) skips unless named (--study, `tailscope bench NAME`):
# tracing repeats, for every model, the tracing pairs a quick socialnet run already measures for
# the best model, and takes minutes.
OPT_IN = frozenset({"tracing"})


def default_studies() -> list[Study]:
    """The studies a run without --study runs: all_studies() less OPT_IN, in the same order."""
    return [s for s in all_studies() if s.name not in OPT_IN]


def study_by_name(name: str) -> Study:
    for s in all_studies():
        if s.name == name:
            return s
    raise KeyError(f"unknown study '{name}' (known: {', '.join(s.name for s in all_studies())})")
