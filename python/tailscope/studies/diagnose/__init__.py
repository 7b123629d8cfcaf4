"""Study `diagnose`: HotROD, a real application tailscope did not build, diagnosed from its traces
alone and changed as the diagnosis says (issue 26 item 5; docs/diagnose.md "The HotROD study").

How this study is laid out:
- `hotrod_run.py` — one measured phase: Jaeger + HotROD on loopback, tailscope-load with traceparent
  and a request log, the traces fetched back (also records the committed HotROD fixture).
- `run.py` — the plan: two baseline rates, the diagnosis of each, then each fix HotROD can express
  measured at the higher rate; documents.
- `analysis.py` — documents → frozen values: the finding → HotROD flag map (the one place that names
  HotROD's spans), measured p50/p99 with intervals per phase, the prediction hook (null until the
  twin's what-ifs are wired).
- `section.py` — those values → the report section.
"""

from __future__ import annotations

from tailscope.report.blocks import Section
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.diagnose.run import STUDY as NAME
from tailscope.studies.diagnose.run import run_study
from tailscope.studies.diagnose.section import build_section


class DiagnoseStudy:
    name = NAME
    title = "Diagnose: HotROD, a real application, diagnosed from its traces and fixed as they say"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        return run_study(ctx)

    def section(self, store: Store, run_id: str) -> Section:
        return build_section(self, store, run_id)


STUDY = DiagnoseStudy()
