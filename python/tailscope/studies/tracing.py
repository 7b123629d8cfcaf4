"""Study `tracing`: the tracing-cost table alone (issue 30) — every concurrency model's closed-loop
throughput and CPU per request with tracing on at 100 % and at 1 % sampling against tracing off,
without the rest of the socialnet sweep.

The same pairs as the socialnet study's step 4, by the same function (socialnet/tracing.py
run_switched_tracing): per (model, sampling) one compose-post graph started at that sampling and ONE
closed-loop run of the load generator, the front's sampling paused and resumed by a signal on the run's
interval boundaries, off/on sides of 1 s in ABBA order. The documents have the socialnet shape, so the
same analysis (socialnet/analysis.py tracing_costs) gives the rows and the same table renders them.

Not in `tailscope run`'s default list (registry.OPT_IN): a quick run already measures the best model
at both samplings in the socialnet study, and every model here takes minutes. Run it with
`tailscope bench tracing` or `tailscope run --study tracing`. Quick form: every model at both
samplings, TRACING_PAIRS pairs (a 20 s run each; ~5 min on 5 models with the graphs' starts); full
form: FULL_TRACING_PAIRS pairs (a 60 s run each, ~13 min). `--scale` multiplies the pairs.

Options (`tailscope bench tracing --model M --sampling PCT --pairs N`, and the tests' tiny form):
`tracing_models`, `tracing_samplings` (fractions, among TRACING_SAMPLES) and `tracing_pairs`, so a row a
run left undecided can be rerun alone for longer without the other nine.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tailscope.lab import topology
from tailscope.lab.graph import LOAD, graph, svc_models
from tailscope.report.blocks import Section
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.common import StepProgress, record_stores, requested_stores, run_scale, study_section
from tailscope.studies.socialnet.analysis import CONNECTIONS, UNPINNED, tracing_costs
from tailscope.studies.socialnet.section import tracing_table
from tailscope.studies.socialnet.tracing import (
    FULL_TRACING_PAIRS,
    TRACING_PAIRS,
    TRACING_SAMPLES,
    run_switched_tracing,
    switched_load,
)

# 1 600 pairs are a 4 000 s (67 min) switched run per (model, sampling): room for the longest row a
# table has asked for on this 2-core VM (coroutine at 1 %: 675 pairs by CPU, 1 591 by throughput, run
# 20261127-191545-5cf1), still one bounded command.
MAX_PAIRS = 1600


class TracingStudy:
    name = "tracing"
    title = "Tracing cost per model (100 % and 1 % sampling vs off)"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        full = ctx.form == "full"
        known = svc_models()
        models = list(ctx.options.get("tracing_models") or known)
        unknown = sorted(set(models) - set(known))
        if unknown:
            raise ValueError(f"tracing_models: {', '.join(unknown)} is not a model ({', '.join(known)})")
        samplings = tuple(ctx.options.get("tracing_samplings") or TRACING_SAMPLES)
        if any(s not in TRACING_SAMPLES for s in samplings):
            raise ValueError(f"tracing_samplings: {samplings} must be among {TRACING_SAMPLES}")
        samplings = tuple(s for s in TRACING_SAMPLES if s in samplings)  # the table's order, once each
        given = ctx.options.get("tracing_pairs")
        if given is not None:
            pairs = int(given)
            if not 1 <= pairs <= MAX_PAIRS:
                raise ValueError(f"tracing_pairs: {pairs} is outside 1..{MAX_PAIRS}")
        else:
            # --scale multiplies the pairs (every sample count): `--full --scale 4` runs 96 per row.
            scale = run_scale(ctx.options)
            pairs = max(1, round((FULL_TRACING_PAIRS if full else TRACING_PAIRS) * scale))
            if pairs > MAX_PAIRS:
                raise ValueError(f"--scale {scale:g} asks for {pairs} tracing pairs per row, more than {MAX_PAIRS}")
        stores = requested_stores(ctx.options)
        art = Path(ctx.artifacts_dir) / self.name
        art.mkdir(parents=True, exist_ok=True)
        topo_json = topology.to_engine_json(topology.SOCIALNET, art / "socialnet.json")
        progress = StepProgress(ctx, self.name, len(models) * len(samplings) + 1)
        docs: list[EngineDocument] = []
        for model in models:
            for sample in samplings:
                pct = f"{sample * 100:g}"
                ready_of_graph: dict = {}

                def start(s: float, traces: Path, model: str = model, pct: str = pct, ready_of_graph=ready_of_graph):
                    return _started(
                        topo_json, model, art / f"graph-{model}-{pct}.json", s, traces, stores, ready_of_graph
                    )

                def record(d: dict, kind: str, point: str, model: str = model, ready_of_graph=ready_of_graph) -> None:
                    d["socialnet_point"] = {
                        "model": model,
                        "kind": kind,
                        "rate_per_s": 0,
                        "connections": CONNECTIONS,
                        "pinning": UNPINNED,
                        "work": ready_of_graph.get("work", "real"),
                    }
                    docs.append(EngineDocument(self.name, LOAD, record_stores(d, ready_of_graph), point))

                run_switched_tracing(
                    start,
                    lambda port, at_s, hlog: switched_load(port, at_s, hlog, pairs, None),
                    record,
                    model,
                    sample,
                    pairs,
                    art / "traces" / f"{model}-{pct}",
                    progress,
                )
        progress("done")
        return docs

    def section(self, store: Store, run_id: str) -> Section:
        sec = study_section(
            self,
            store,
            run_id,
            graphs=True,
            intro="What tracing costs each concurrency model: the compose-post graph's closed-loop throughput "
            "with tracing on against off, per model at 100 % and at 1 % sampling, both sides of every pair on "
            "one warmed graph whose front's sampling a signal paused and resumed (docs/tracing-study.md).",
        )
        loads = [d.document for d in store.documents(run_id, self.name) if d.engine == LOAD]
        rows = tracing_costs(loads)
        if not rows:
            sec.notes.append("no complete tracing off/on pair was stored for this run")
            return sec
        sec.blocks.append(tracing_table(rows))
        return sec


@contextmanager
def _started(
    topo_json: Path, model: str, out: Path, sample: float, traces: Path, stores: str, ready_of_graph: dict
) -> Iterator[tuple[int, dict]]:
    """graph() at `sample`, its ready line kept in `ready_of_graph` for the points' documents."""
    with graph(topo_json, model, out, sample, traces, stores=stores) as (port, ready):
        ready_of_graph.clear()
        ready_of_graph.update(ready)
        yield port, ready


STUDY = TracingStudy()
