"""Study `echo`: which echo-server model wins at 8 … 10 000 connections.

Redoes a bachelor thesis (five C++ TCP echo servers under Fortio) correctly:
latency from the *intended* send time (tailscope-load, open loop), every
model side by side in one run, server and load generator pinned to different
cores, and the measurement floor (tailscope-baseline's loopback ping-pong)
measured in the same run.

Per sweep point (model × connections × mode) one tailscope-load document is
stored; its `point` is "<mode>/<model>/<connections>" with mode `closed`
(as fast as possible, -R 0) or `rate` (a common fixed rate: a quarter
of the slowest model's closed-loop maximum at that connection count, so every
model can sustain it). Server CPU %, RSS, threads and fds come from tailscope-load's
`--server-pid` sampler (/proc every 100 ms during the measured window), so the
sampling window is exactly the measured window.

How this study is laid out:
- `run.py` — engines → documents: the plan (quick or full form, options, the load
  generator's CPUs and I/O path), the sweep, the measurement floor and the
  coordinated-omission demo, and what each stored document carries.
- `analysis.py` — documents → frozen dataclasses (`read` gives one `EchoReading`): every
  point's limit, the in-run ratios and the issue's target, the recommendation per range,
  the thesis check's verdict, the floor and the coordinated-omission figures. Pure; the
  run asks it only for what it adapts to (the common rate, the fastest model).
- `section.py` — those values → the report section (figures, tables, notes, reference
  row); its sentences format values and decide nothing.
"""

from __future__ import annotations

from tailscope.report.blocks import Section
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.echo.run import run_study
from tailscope.studies.echo.section import build_section


class EchoStudy:
    name = "echo"
    title = "Echo servers: which concurrency model at which connection count"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        return run_study(ctx, self.name)

    def section(self, store: Store, run_id: str) -> Section:
        return build_section(self, store, run_id)


STUDY = EchoStudy()
