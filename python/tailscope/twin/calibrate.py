"""Calibration: take off each stage what tailscope's runtime adds when it replays it.

A span's measured time already contains the traced system's runtime costs (a store wait is the
database's latency plus the timer's overshoot and the wake-up; an own-time gap contains
bookkeeping). The twin's runtime pays its own on top, so a twin fitted to raw spans runs slow.
Fixed-point steps remove that bias: run the inferred topology T0 once under the model, infer T0'
from the twin's own traces with the same rules, and take the difference of every stage's median
(T0' − T0, what the runtime added) off that stage's samples before fitting again (T1). A second step
replays T1 the same way and adds what its replay still differs from the source to the correction:
one step assumes the runtime adds the same to a stage whatever its length, and a wait's wake-up or a
burn's preemption does not (2026-11-27, socialnet: after one step the twin's p50 was 0.90× the
traces', several stages overcorrected). The total per stage is recorded (`calibration.added_us`),
with each step's largest remaining difference (`calibration.steps`); the validation afterwards says
whether it worked — calibration is measured on the same machine as the validation, and inherits its
noise.
"""

from __future__ import annotations

from collections.abc import Callable

from tailscope.diagnose.diagnosis import Diagnosis
from tailscope.lab import topology as topology_mod
from tailscope.traces.spans import TraceSet
from tailscope.twin.infer import InferOptions, fit_medians_us, infer
from tailscope.twin.validate import _connections, run_twin

DEFAULT_STEPS = 2
MAX_STEPS = 5


def calibrate(
    ts: TraceSet,
    options: InferOptions,
    model: str,
    *,
    duration_s: float = 3.0,
    warmup_s: float = 1.0,
    progress: Callable[[str], None] | None = None,
    diagnosis: Diagnosis | None = None,
    steps: int = DEFAULT_STEPS,
) -> tuple[dict, dict]:
    if not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"calibration steps must lie in 1 … {MAX_STEPS}, got {steps}")
    topo, report0 = infer(ts, options, diagnosis=diagnosis)
    rate = report0["recorded_rate"].get("rate_per_s")
    if rate is None:
        raise ValueError(f"calibration needs the recording rate: {report0['recorded_rate']['unavailable']}")
    original = fit_medians_us(report0)
    added_us: dict[str, float] = {}
    done: list[dict] = []
    report = report0
    for step in range(steps):
        run = run_twin(
            topology_mod.validate(topo, "inferred topology"),
            model,
            rate,
            duration_s=duration_s,
            warmup_s=warmup_s,
            connections=_connections(rate, ts.traces),
            progress=progress,
        )
        _, report_twin = infer(run.traces, options)
        replayed = fit_medians_us(report_twin)
        # What the replay of this step's topology still adds to each stage the source's traces gave.
        differs = {k: replayed[k] - v for k, v in original.items() if k in replayed}
        for k, d in differs.items():
            added_us[k] = added_us.get(k, 0.0) + d
        done.append(
            {
                "step": step + 1,
                "twin_traces": len(run.traces.traces),
                "largest_difference_us": round(max((abs(d) for d in differs.values()), default=0.0), 3),
            }
        )
        topo, report = infer(ts, options, {k: v * 1000.0 for k, v in added_us.items()}, diagnosis)
    report["calibration"] = {
        "model": model,
        "rate_per_s": rate,
        "twin_traces": done[0]["twin_traces"],
        "added_us": {k: round(v, 3) for k, v in added_us.items()},
        "stages_not_seen_in_the_twin": sorted(set(original) - set(replayed)),
        "steps": done,
    }
    return topo, report
