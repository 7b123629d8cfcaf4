"""Study `diagnose` (`tailscope bench diagnose`): a real application tailscope did not build, diagnosed
from its traces alone, then changed as the diagnosis says and measured again (issue 26, item 5;
docs/diagnose.md "The HotROD study").

1. Jaeger and HotROD (Jaeger's example application, built by the bootstrap) on loopback, HotROD at its
   defaults; `/dispatch` over HotROD's four customers driven open loop by tailscope-load with a W3C
   traceparent per request and a request log, at two rates (quick: 1 and 2 requests/s).
2. Per rate: every trace fetched back from Jaeger, `tailscope.diagnose` run on them with the request
   log (the client join: the part of client p99 no span covers); the diagnosis documents are stored.
3. Each finding of the higher rate's diagnosis that HotROD can express through a flag (analysis.fixes_from:
   capacity 1 on its db query → -M, a fan-out bounded at k on its route calls → -W n, the db stage
   faster → -D) is applied — HotROD restarted with that flag — and measured again at the higher rate.

Each phase gets its own Jaeger and HotROD (hotrod_run.py). Pinned per the house rules: the load
generator on the first allowed CPU, Jaeger and HotROD on the others (`--cpus CLIENT,SERVER` moves
them). HotROD's latencies are hundreds of ms, so the generator sleeps between sends (`load_pacing`
"sleep" unless asked otherwise): busy-polling would take a core for no gain in accuracy.

Without Go (HotROD or Jaeger not built) or when either fails to start, the study stores one plan
document that says why and nothing else; the section says it. Options: `scale` (every window ×),
`cpus`, `load_pacing`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tailscope.diagnose.client import MIN_JOINED_FOR_P99
from tailscope.diagnose.diagnosis import diagnose, document
from tailscope.lab.cpus import cpu_split
from tailscope.lab.engines import EngineError
from tailscope.lab.hotrod import HotrodFlags
from tailscope.lab.tools import ToolStartError, ToolUnavailable, tool_path
from tailscope.store import EngineDocument
from tailscope.studies.base import RunContext
from tailscope.studies.common import StepProgress, point_times, run_scale
from tailscope.studies.diagnose import analysis
from tailscope.studies.diagnose.hotrod_run import Phase, PhaseError, measure_phase
from tailscope.traces.spans import read_traces

STUDY = "diagnose"
# Requests/s of the two baseline phases. HotROD's db query holds its mutex 300 ms ± 30 ms: 2/s keeps
# it busy ~60 % of the time (queues form: the capacity is identifiable), 1/s ~30 %.
QUICK_RATES = (1.0, 2.0)
FULL_RATES = (1.0, 1.5, 2.0, 2.5)
# (window, warm-up) of a baseline phase: quick 25 s (25 and 50 requests, one db query each: enough
# spans for the capacity to be identified where queues formed), full 120 s. The highest rate's baseline,
# which the fixes are judged against and whose client join the section reports, runs long enough for
# MIN_JOINED_FOR_P99 requests (the join's p99 needs them: 53 s at 2/s). A fix phase: quick 20 s.
# Quick form: five phases in about 2 min 50 s on the 2-core VM.
QUICK_TIMES = (25.0, 2.0)
FULL_TIMES = (120.0, 3.0)
FIX_QUICK_TIMES = (20.0, 2.0)
FLOOR_TIMES = (3.0, 0.5)
TOP_RATE_MARGIN = 1.05  # Poisson arrivals: a few % more than MIN_JOINED_FOR_P99 on average


def phase_document(p: Phase, point: str, kind: str, fix: dict | None = None) -> dict:
    """tailscope-load's document with what the phase ran against (the store keeps its measurements)."""
    doc = dict(p.load)
    doc["hotrod"] = {
        "kind": kind,
        "point": point,
        "rate_per_s": p.rate_per_s,
        "duration_s": p.duration_s,
        "warmup_s": p.warmup_s,
        "flags": p.flags.record(),
        "fix": fix,
        "traces": len(p.rows) - p.missing_trace_ids,
        "requests_logged": len(p.rows),
        "missing_trace_ids": p.missing_trace_ids,
        "jaeger_fetch": p.fetch,
    }
    if p.missing_trace_ids:
        doc.setdefault("unavailable", []).append(
            {
                "name": "traces",
                "variant": point,
                "reason": f"{p.missing_trace_ids} of {len(p.rows)} logged requests had no trace in Jaeger",
            }
        )
    return doc


def diagnosis_document(p: Phase) -> dict:
    traces = read_traces([p.traces_file])
    d = diagnose(traces, requests=list(p.rows))
    doc = document(d, [str(p.traces_file), str(p.request_log)])
    return {
        **doc,
        "engine": analysis.DIAGNOSIS_ENGINE,
        "rate_per_s": p.rate_per_s,
        "measurements": [],
        "unavailable": [],
    }


def _plan(skipped: str | None = None, **rest: object) -> EngineDocument:
    doc = {"schema": analysis.PLAN_SCHEMA, "engine": analysis.PLAN_ENGINE, "skipped": skipped, **rest}
    return EngineDocument(STUDY, analysis.PLAN_ENGINE, {**doc, "measurements": [], "unavailable": []}, "plan")


def run_study(ctx: RunContext) -> list[EngineDocument]:
    try:
        tool_path("jaeger")
        tool_path("hotrod")
    except ToolUnavailable as e:
        return [_plan(skipped=str(e))]
    rates = FULL_RATES if ctx.form == "full" else QUICK_RATES
    window_s, warmup_s = point_times(ctx, QUICK_TIMES, FULL_TIMES, FLOOR_TIMES)
    fix_window_s, _ = point_times(ctx, FIX_QUICK_TIMES, FULL_TIMES, FLOOR_TIMES)
    top = rates[-1]
    top_window_s = max(window_s, run_scale(ctx.options) * MIN_JOINED_FOR_P99 * TOP_RATE_MARGIN / top)
    load_cpus, server_cpus = cpu_split(ctx.options)
    pacing = str(ctx.options.get("load_pacing") or "sleep")
    art = Path(ctx.artifacts_dir) / STUDY
    step = StepProgress(ctx, STUDY, len(rates) + 3)

    def measure(name: str, flags: HotrodFlags, rate: float, window: float) -> Phase:
        where = art / name
        shutil.rmtree(where, ignore_errors=True)
        return measure_phase(
            where, flags, rate, window, warmup_s, load_cpus=load_cpus, server_cpus=server_cpus, pacing=pacing
        )

    docs: list[EngineDocument] = []
    try:
        diagnoses: dict[float, dict] = {}
        for rate in rates:
            point = f"baseline@{rate:g}/s"
            step(f"HotROD at its defaults, {rate:g} requests/s")
            phase = measure(f"baseline-{rate:g}", HotrodFlags(), rate, top_window_s if rate == top else window_s)
            docs.append(EngineDocument(STUDY, analysis.LOAD_ENGINE, phase_document(phase, point, "baseline"), point))
            diagnoses[rate] = diagnosis_document(phase)
            docs.append(EngineDocument(STUDY, analysis.DIAGNOSIS_ENGINE, diagnoses[rate], f"diagnosis@{rate:g}/s"))
    except (ToolUnavailable, ToolStartError, EngineError, PhaseError) as e:
        # Nothing half-measured is kept: without the baselines there is nothing to diagnose or fix.
        return [_plan(skipped=f"the baseline phases could not run: {e}")]

    fixes, not_applied = analysis.fixes_from(diagnoses[top])
    planned = []
    for fix in fixes:
        point = f"fix {fix.id}@{top:g}/s"
        step(f"HotROD {fix.id} at {top:g} requests/s")
        entry = {**fix.record(), "point": point, "rate_per_s": top, "unavailable": None}
        try:
            phase = measure(f"fix-{fix.kind}", HotrodFlags(**fix.flags), top, fix_window_s)
            docs.append(EngineDocument(STUDY, analysis.LOAD_ENGINE, phase_document(phase, point, "fix", entry), point))
        except (ToolStartError, EngineError, PhaseError) as e:
            entry["unavailable"] = f"the phase failed: {e}"
        planned.append(entry)
    docs.append(
        _plan(
            rates_per_s=list(rates),
            window_s=window_s,
            top_rate_window_s=top_window_s,
            fix_window_s=fix_window_s,
            warmup_s=warmup_s,
            load_cpus=load_cpus,
            server_cpus=server_cpus,
            load_pacing=pacing,
            diagnosed_at_per_s=top,
            fixes=planned,
            not_applied=not_applied,
        )
    )
    return docs
