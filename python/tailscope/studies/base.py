"""What a study is: how it runs (engines → documents) and how its report section is built.

A study defines a `Study` with a name, how to run it (quick or full form) and how to turn what
the store holds into a report section (studies/registry.py lists them in run order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tailscope.report.blocks import Section
from tailscope.store import EngineDocument, Store


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
