"""Study `async`: what launching and joining an async call really costs.

Runs `tailscope-baseline` (condvar hand-off, spin hand-off, thread start;
pinned) and `tailscope-asyncbench` in the same run, so every figure is stated
as a ratio to this machine's physical references measured minutes apart.
The probe, the deferred definitions and the procedure are in
docs/async-study.md.

How this study is laid out: three parts, each a step of engines → documents →
values → report. `run.py` is the plan (quick or full form, the run's options)
and the two engine runs; it returns the documents the runner stores.
`analysis.py` reads those documents back (plain dicts) and computes every
value the report shows as a frozen dataclass — the references, each figure's
and table's numbers, which point is lowest, whether a target is met, where a
point's scheduling delay comes from, whether the capstone's Figures 12 and
13/14 hold — pure functions, tested without engines. `section.py` renders
those values as the report section (figures, tables, sentences, reference
checks) and decides nothing. This module only names the study and wires them.
"""

from __future__ import annotations

from tailscope.report.blocks import Section
from tailscope.store import EngineDocument, Store
from tailscope.studies.asyncmodels.run import run_engines
from tailscope.studies.asyncmodels.section import build_section
from tailscope.studies.base import RunContext


class AsyncModelsStudy:
    name = "async"
    title = "Async models: scheduling and join delay"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        return run_engines(ctx, self.name)

    def section(self, store: Store, run_id: str) -> Section:
        return build_section(self, store, run_id)


STUDY = AsyncModelsStudy()
