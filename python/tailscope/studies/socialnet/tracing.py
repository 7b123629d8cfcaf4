"""Tracing cost pairs (issue 30): closed-loop throughput with the front's sampling paused and resumed
on ONE warmed graph. The one mechanism the socialnet study's step 4 and the tracing study both run.

Why one graph: on a 2-core machine fresh real-store graphs differed 16–41 % from each other in
closed-loop throughput (run 20261127-092113-3cc6), so pairs of points on fresh graphs measured the
graphs' spread, not tracing. Here the graph starts at the sampling under test, one discarded point
warms it (connections, pools, store tables, caches), and each pair's two points differ only by the
sampling switch (lab/graph.py set_trace_sampling: SIGUSR1 pauses, SIGUSR2 resumes). The pairs run in
ABBA order (off→on, on→off, …) so a linear drift over the graph's life (tables growing) cancels."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from tailscope.lab import procstat
from tailscope.lab.graph import set_trace_sampling
from tailscope.studies.socialnet.analysis import TRACE_SAMPLE

# Pairs per (model, sampling) (issue 30 asks for >= 4). Not restarting a graph per point, the socialnet
# quick form affords the best model at 100 % and at TRACE_SAMPLE with TRACING_PAIRS each (2 × (1 + 8)
# points of 2.5 s plus two graph starts); the full forms run every model at each of TRACING_SAMPLES
# with FULL_TRACING_PAIRS: an interval of the median needs 6 (analysis.MIN_PAIRS_FOR_INTERVAL).
TRACING_PAIRS = 4
FULL_TRACING_PAIRS = 6
TRACING_SAMPLES = (1.0, TRACE_SAMPLE)

# How a pair's two sides were set apart, recorded on both (socialnet_point.tracing_switch): here, one
# graph whose sampling a signal paused and resumed; documents without the field are fresh-graph pairs.
SWITCH_SIGNAL = "signal on one graph"


def tracing_order(pairs: int) -> list[tuple[int, bool]]:
    """The points of `pairs` pairs in run order as (pair, tracing on): ABBA, pair 0 off→on, pair 1
    on→off, …, so a drift linear in time adds as much to the "on" sides as to the "off" sides."""
    return [(i, on) for i in range(pairs) for on in ((False, True) if i % 2 == 0 else (True, False))]


def run_tracing_pairs(
    start: Callable[[float, Path], AbstractContextManager[tuple[int, dict]]],
    load: Callable[[int], dict],
    record: Callable[[dict, str, str], None],
    model: str,
    sample: float,
    pairs: int,
    traces: Path,
    progress: Callable[[str], None],
) -> None:
    """`pairs` tracing-off / tracing-on pairs of `model` at `sample` on one graph.

    `start(sample, traces)` starts the graph at --trace-sample `sample` with its spans under `traces` and
    yields (front port, ready line); `load(port)` runs one closed-loop point → its document; `record(doc,
    kind, point)` stores a point ("tracing-off" / "tracing-on", "{model}/tracing/{pct}/{side}/{i}"),
    which the analysis (socialnet/analysis.py tracing_costs) groups by model, trace_sample and kind. One
    discarded point first, at the graph's sampling. The on side's spans are not kept (a closed-loop
    run's are large and no analysis reads them): `traces` is removed once the graph has stopped."""
    pct = f"{sample * 100:g}"
    try:
        with start(sample, traces) as (port, ready):
            pids = {str(k): int(v) for k, v in (ready.get("pids") or {}).items()}
            progress(f"{model} tracing at {pct} %: warm-up (discarded)")
            load(port)
            for i, on in tracing_order(pairs):
                side = "on" if on else "off"
                set_trace_sampling(ready, on)
                progress(f"{model} tracing at {pct} % {side} ({i + 1}/{pairs})")
                d, cpu = cpu_window(pids, lambda: load(port))
                record(d, f"tracing-{side}", f"{model}/tracing/{pct}/{side}/{i}")
                d["socialnet_point"] |= {
                    "trace_sample": sample,
                    "pair": i,
                    "tracing_switch": SWITCH_SIGNAL,
                    "tracing_cpu": cpu,
                }
    finally:
        shutil.rmtree(traces, ignore_errors=True)


def cpu_window(pids: dict[str, int], run: Callable[[], dict]) -> tuple[dict, dict]:
    """run() (one closed-loop point) and the CPU it took: the graph's services' user+sys
    (procstat.window_cpu) and the whole machine's busy time (/proc/stat), seconds, read around it;
    {"unavailable": why} where a service's /proc entry was gone.

    Why beside throughput: in the 6-pair run of 2026-11-27 12:13 a closed-loop point's throughput moved
    up to 34 % from one point to the next on one graph with nothing switched, more than tracing costs;
    the work a request costs moves far less (the soak's graph CPU per request followed the machine's
    speed, which changes over minutes, not seconds). Both sides of a pair are read the same way, over
    the whole point (warm-up included, as its request count is not): the cost is a ratio of the two."""
    before = procstat.read_system()
    doc, services = procstat.window_cpu(pids, run)
    after = procstat.read_system()
    if services.get("cpu_s") is None:
        return doc, {"unavailable": services.get("unavailable") or "the services' CPU was not read"}
    busy_s = (after.cpu_busy_ticks - before.cpu_busy_ticks) / procstat.CLK_TCK
    return doc, {"services_cpu_s": services["cpu_s"], "machine_busy_s": busy_s}


def tracing_steps(pairs: int) -> int:
    """Progress steps of one run_tracing_pairs: the warm-up and two per pair."""
    return 1 + 2 * pairs
