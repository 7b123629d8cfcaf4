"""Study `socialnet`: DeathStarBench's compose-post graph under five concurrency models.

The same 12-service graph (topologies/socialnet.yaml, converted to the engine's
JSON) runs under each model in turn: `tailscope-svc --all --model M` starts one
process per service on loopback, and tailscope-load drives the HTTP front
(`/wrk2-api/post/compose`, HTTP/1.1 keep-alive) open loop, latency measured
from the intended send time.

Per model (one graph process tree per model, every point of the model against it):

- a closed-loop run (-R 0) gives the model's ceiling;
- open-loop rates at fractions of that ceiling, up to and beyond saturation,
  give the latency-vs-throughput curve; for std-async and the contenders for
  best model the bracket of the p99 objective (highest rate that met it, next that missed) is
  then bisected REFINE_STEPS times, each rate on a fresh graph;
- one common rate (a fraction of the *slowest* model's ceiling) gives latency
  CDFs that compare like with like;
- the graph's result document gives CPU per request (user + sys of every
  service process ÷ front requests) and threads (sum over services of the
  per-process maximum).

After each model's closed-loop run, a short bounded ping phase (`tailscope-svc --ping`: the
built-in `__ping` method through the same multiplexed channel the services use, against one leaf
service of that graph) measures CPU per RPC of the transport alone (both ends); one short
`tailscope-baseline --only thread_create` run gives the cost of starting a thread. With the
services' `calls` and `async_threads` counters and context switches, they decompose each model's
CPU per request (analysis.decompose).

On real stores, std-async and the best model at the objective repeat the ceiling, sweep and
bisections with `--stores simulated` (the simulated-stores arm: their points are marked and named apart,
`{model}/simulated-stores/…`), so the ratio at the objective is given on real stores beside simulated
ones from one run (analysis.stores_comparison).

Then: a connections sweep (20 → 100) at the common rate for std-async and the
best model, and the tracing cost — closed-loop throughput with tracing on vs
off, ABBA pairs on one warmed graph per (model, sampling) with the sampling
switched by a signal (tracing.py), median of the pairs: the best model at 100 %
and at 1 % sampling (quick form), every model at both (full form), a row per
model and sampling (run.tracing_plan). Traces (a steady point per model) are saved under
the run's artifacts as Jaeger JSON and OTLP JSON for `tailscope analyze`.

Everything shares the machine's cores (nothing pinned: 12 service processes
and the generator on 2 cores); comparisons are side by side in one run and
stated as ratios.

How this study is laid out (engines → documents → values → report, one module a step):
run.py holds the plan (quick / full form, options) and every engine run, returning the documents the
runner stores; between phases it asks analysis.py which rates met the objective and which models to
bisect, and builds no report text. analysis.py turns stored documents into frozen dataclasses
(SocialnetSummary and its parts, Figure8Comparison): every verdict, ratio, bracket and
unavailable-with-reason is decided there, as a value; it also holds the constants the other parts (and
soak, isolation, analyze) share. section.py turns those values into the report Section (figures,
tables, notes, the Figure 8 reference check); its sentences only format the values they are given.
Tests: tests/unit/test_socialnet_analysis.py (the values, and golden sentences of the notes),
tests/unit/test_socialnet_section.py (the tracing-cost table and notes, an old stored run rendered),
tests/unit/test_socialnet_stores_arm.py (the simulated-stores arm: values, table, sentence, the run's plumbing).
"""

from __future__ import annotations

from tailscope.report.blocks import Section
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.socialnet.run import run_study
from tailscope.studies.socialnet.section import build_section


class SocialnetStudy:
    name = "socialnet"
    title = "Microservice graph: compose-post under five concurrency models"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        return run_study(ctx, self.name)

    def section(self, store: Store, run_id: str) -> Section:
        return build_section(self, store, run_id)


STUDY = SocialnetStudy()
