"""Study `threads`: how the processing pool's size changes throughput, tail latency, load and run queue.

Two workloads (topologies/passthrough.yaml — IO-bound; topologies/transform.yaml — the same plus a
JSON transformation, CPU-bound at saturation) each run as a graph of two processes
(`tailscope-svc --all`): a front whose model is the variant — *blocking* (`pool-blocking`: a pool
thread blocks on the backend call) or *non-blocking* (`pool-callback`: N scheduler threads, a call
parks the request) — with `--workers N`, and a backend pinned to the coroutine model. The IO
dispatcher count stays at the runtime's default (1) and is read back from the graph's document.

Per (workload, variant, N), on one graph: closed-loop points (tailscope-load -R 0, one keep-alive
connection per user, think time 0) for every users count, then open-loop points at fractions of the
best closed-loop throughput (latency from the intended send time) for the p99-vs-load curve. During
every point's measured window `tailscope.lab.procstat` samples /proc every 100 ms. Each point's
latency_intended histogram (.hlog) is read back for the tail analysis (`tailscope.measure.tail`).

The generator and the graph are pinned to different CPUs (first allowed CPU for the generator,
the others for the graph; `--cpus CLIENT,SERVER` overrides) and the pinning is recorded.
docs/threads-study.md: method, definitions, how to read the figures.

How this study is laid out: this file names the study and wires its two halves together.
`run.py` is the run — the plan (tiny / quick / full form and the options), the graphs and load
points it starts through tailscope.lab, the progress bar, and the documents it returns for the
store (each load point's `threads_point` says what it measured). `analysis.py` turns those
documents, read back from the store, into frozen dataclasses: every figure per point, the
recommended N, the rule-of-thumb verdict, the article comparison and where the shape differs, the
tail verdicts. `section.py` renders those values as the report section (figures, tables, sentences)
and decides nothing. Tests: tests/unit/test_threads_analysis.py (the values, and a few golden
wordings), tests/e2e/test_threads.py (engines, the tiny form end to end).
"""

from __future__ import annotations

from tailscope.report.blocks import Section
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.threads.run import run_sweep
from tailscope.studies.threads.section import threads_section


class ThreadsStudy:
    name = "threads"
    title = "Thread count: pool size vs throughput, tail latency, load average and run queue"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        return run_sweep(ctx, self.name)

    def section(self, store: Store, run_id: str) -> Section:
        return threads_section(self, store, run_id)


STUDY = ThreadsStudy()
