"""Calibration: take off each stage what tailscope's runtime adds when it replays it.

A span's measured time already contains the traced system's runtime costs (a store wait is the
database's latency plus the timer's overshoot and the wake-up; an own-time gap contains
bookkeeping). The twin's runtime pays its own on top, so a twin fitted to raw spans runs slow.
One fixed-point step removes that bias: run the inferred topology T0 once under the model, infer
T0' from the twin's own traces with the same rules, and take the difference of every stage's
median (T0' − T0, what the runtime added) off that stage's samples before fitting again. The
differences are recorded (`calibration.added_us`); the validation afterwards says whether it
worked — calibration is measured on the same machine as the validation, and inherits its noise.
"""

from __future__ import annotations

from collections.abc import Callable

from tailscope.diagnose.diagnosis import Diagnosis
from tailscope.lab import topology as topology_mod
from tailscope.traces.spans import TraceSet
from tailscope.twin.infer import InferOptions, fit_medians_us, infer
from tailscope.twin.validate import _connections, run_twin


def calibrate(
    ts: TraceSet,
    options: InferOptions,
    model: str,
    *,
    duration_s: float = 3.0,
    warmup_s: float = 1.0,
    progress: Callable[[str], None] | None = None,
    diagnosis: Diagnosis | None = None,
) -> tuple[dict, dict]:
    topo0, report0 = infer(ts, options, diagnosis=diagnosis)
    rate = report0["recorded_rate"].get("rate_per_s")
    if rate is None:
        raise ValueError(f"calibration needs the recording rate: {report0['recorded_rate']['unavailable']}")
    run = run_twin(
        topology_mod.validate(topo0, "inferred topology"),
        model,
        rate,
        duration_s=duration_s,
        warmup_s=warmup_s,
        connections=_connections(rate, ts.traces),
        progress=progress,
    )
    _, report_twin = infer(run.traces, options)
    original, replayed = fit_medians_us(report0), fit_medians_us(report_twin)
    added_us = {k: replayed[k] - v for k, v in original.items() if k in replayed}
    topo, report = infer(ts, options, {k: v * 1000.0 for k, v in added_us.items()}, diagnosis)
    report["calibration"] = {
        "model": model,
        "rate_per_s": rate,
        "twin_traces": len(run.traces.traces),
        "added_us": {k: round(v, 3) for k, v in added_us.items()},
        "stages_not_seen_in_the_twin": sorted(set(original) - set(replayed)),
    }
    return topo, report
