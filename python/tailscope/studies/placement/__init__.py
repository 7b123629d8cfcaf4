"""Study `placement`: interference sensitivity and a knapsack placement of services on cores.

After the NTUA thesis on DeathStarBench hotel reservation (docs/placement-study.md): the graph
(topologies/hotel.yaml, one process per service, driven through its HTTP front with the
DeathStarBench mix search 60 % / recommend 39 % / login 0.5 % / reserve 0.5 %) is run

1. **sizing**: unpinned at the study's rate; every service's CPU % sampled every 100 ms from
   /proc (procstat.read_process), peak and p95 → its need in millicores (the knapsack weight);
2. **sensitivity**: each service tested alone on the performance pool (the rest of the graph and
   the load generator on the general pool), first without interference, then with each
   `tailscope-stress` kernel at each intensity on the same core (its SMT sibling where the machine
   has SMT, else the same CPU, time-shared) and, where the pool has a second core, on another core
   (shared LLC / memory). Per point: the service's own exclusive critical-path time p50/p99 from
   the traces (tailscope-critpath), end-to-end p50/p99, its CPU time per request and, where the
   PMU counts, IPC. Score = weighted mean of the relative slowdowns (`score_weights`);
3. **placement**: a 0-1 knapsack (knapsack.solve: weight = millicores, value = score,
   capacity = the performance pool's CPUs × 1000) picks the services of the performance pool;
   compared in one run, at the same offered rate, with colocated (nothing pinned), two random
   placements of the same CPU budget (seeded, recorded) and a latency-driven placement (largest
   exclusive critical-path p99 first), by end-to-end p50/p99 and throughput.

Quick form (2 cores): general pool = CPU 0 (with the load generator), performance pool = CPU 1,
kernels on CPU 1; the two services with the largest CPU need, kernels cpu/l3/membw at 1 and 8
instances. Full form: every service, kernel and intensity, pools from sysfs (whole cores).

How this study is laid out: `run.py` holds the plan (quick / full / tiny form, score weights) and
the engine runs (the graph through tailscope.lab, tailscope-stress beside it, tailscope-critpath
over the traces), and stores the documents, its own decisions in the ANALYSIS document;
`analysis.py` turns stored documents into frozen dataclasses (scores, placements, the lowest p99,
flags, which counter figures exist) with pure functions that tests call on small dicts — the run
calls it too, to size the services, score them and choose the placements; `section.py` renders
those values as tables, figures and notes and decides nothing. run.py never imports section.py;
section.py reads only the constants of run.py that say what ran (mix, model, sample interval).
The knapsack itself is studies/placement/knapsack.py.
"""

from __future__ import annotations

from tailscope.report.blocks import Section
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.placement.run import run_placement
from tailscope.studies.placement.section import placement_section


class PlacementStudy:
    name = "placement"
    title = "Interference sensitivity and core placement (hotel reservation, knapsack)"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        return run_placement(ctx, self.name)

    def section(self, store: Store, run_id: str) -> Section:
        return placement_section(self, store, run_id)


STUDY = PlacementStudy()
