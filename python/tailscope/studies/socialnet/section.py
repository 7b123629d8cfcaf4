"""The socialnet study's report section: the values of analysis.py → figures, tables, notes and the
capstone Figure 3 and Figure 8 reference checks. Nothing is decided here: every sentence formats values it is given
(met / not met, brackets, which cost explains the gap are fields of the analysis)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from tailscope.lab.graph import PATH
from tailscope.measure.verdict import MET as INTERVAL_MET
from tailscope.measure.verdict import NOT_MET as INTERVAL_NOT_MET
from tailscope.measure.verdict import UNDECIDED, IntervalVerdict
from tailscope.report import plots
from tailscope.report.blocks import NOT_COMPARABLE, UNAVAILABLE, Figure, ReferenceCheck, Section, Table
from tailscope.store import Store
from tailscope.studies.common import (
    FEW_BEYOND,
    error_bar,
    interval_cell,
    length_to_decide_text,
    stores_line,
    stores_text,
    study_section,
)
from tailscope.studies.socialnet.analysis import (
    BASELINE_MODEL,
    CAPSTONE_LOAD_RANGE,
    CAPSTONE_P50_NS,
    CAPSTONE_P90_OVER_P50,
    CAPSTONE_RATIO_SHARE,
    CAPSTONE_TAIL_NS,
    CAPSTONE_TAIL_OVER_P50,
    CEILING_CONNECTIONS,
    COMMON_RATE_FRACTION,
    CONNECTIONS,
    FIGURE8_TAIL_OVER_P90,
    GAP_CPU,
    GAP_TAIL,
    MIN_P99_SAMPLES,
    MIN_PAIRS_FOR_INTERVAL,
    NARROWER_ON_REAL,
    P99_OBJECTIVE_NS,
    PING_BATCHED_CONCURRENCY,
    PROBE_CALLS,
    SCHEDULING,
    SERVED_SHARE,
    SWEEP_FRACTIONS,
    TARGET_RATIO,
    TRACE_SAMPLE,
    TRACING_COST_TARGET,
    TRACING_COST_TARGET_SAMPLED,
    WIDER_ON_REAL,
    CommonRateLatency,
    ConnectionsSweep,
    CoreScaling,
    Decomposition,
    Figure3Comparison,
    Figure8Comparison,
    RatioBracket,
    RatioTarget,
    SocialnetSummary,
    StoresArm,
    StoresComparison,
    SweepPoint,
    TargetShortfall,
    TracingCost,
    WorkComparison,
    async_call_delays,
    figure3_comparison,
    figure8_comparison,
    in_simulated_arm,
    summarize_documents,
    worst_tracing_cost,
)
from tailscope.studies.sources import CAPSTONE_FIGURE3, CAPSTONE_FIGURE8
from tailscope.units import fmt_count, fmt_ns, fmt_ratio


def build_section(study: Any, store: Store, run_id: str) -> Section:
    stored = store.documents(run_id, study.name)
    # The simulated-stores arm's documents say what they ran on in their own table; the section's stores
    # line and every figure but that table are the run's own stores'.
    own = [d.document for d in stored if not in_simulated_arm(d.document)]
    sec = study_section(
        study,
        store,
        run_id,
        section_id="socialnet",
        intro=(
            "DeathStarBench's social-network compose-post request through 12 services "
            "(topologies/socialnet.yaml; its stores and caches real memcached, Redis and PostgreSQL JSONB servers "
            "when the run's stores are real, else simulated with documented latency distributions: the first "
            "note says which), "
            "each service a process on loopback, all under one concurrency model at a time: "
            "<em>std-async</em> (DeathStarBench's handler: std::async launch::async + launch::deferred, thread "
            "per connection), <em>std-thread</em>, <em>pool-blocking</em> (fixed pool blocking on futures), "
            "<em>pool-callback</em> (IO dispatcher + pool, callbacks carrying the request context) and "
            "<em>coroutine</em> (C++20 coroutines, one event loop per core, when_all fan-out). tailscope-load "
            f"drives {PATH} open loop with {CONNECTIONS} keep-alive connections; latency from the intended "
            "send time."
        ),
    )
    sec.notes.insert(0, stores_line(own))
    summary = summarize_documents(stored)
    if summary is None:
        sec.notes.append("no socialnet measurements were stored for this run")
        return sec
    sec.intro += (
        f" Placement: {summary.pinning}" + (" (tailscope run --cpus CLIENT,SERVER)" if summary.pinned else "") + "."
    )
    sec.notes += summary_notes(summary)
    sec.blocks.append(_curve_figure(summary))
    if summary.common_rate_per_s:
        sec.blocks.append(_cdf_figure(summary, summary.common_rate_per_s))
    sec.blocks.append(_summary_table(summary))
    sec.blocks.append(_objective_table(summary))
    if summary.stores is not None and summary.stores.simulated.unavailable is None:
        sec.blocks.append(stores_table(summary.stores))
    sec.blocks.append(_decomposition_table(summary))
    sec.blocks.append(cpu_split_table(summary))
    if summary.work:
        sec.blocks.append(work_table(summary.work))
    if summary.connections:
        sec.blocks.append(_connections_figure(summary.connections))
    if summary.tracing:
        sec.blocks.append(tracing_table(summary.tracing))
    fig8 = async_call_cdf_figure(store, run_id)  # capstone Figure 8
    if fig8:
        sec.blocks.append(fig8)
    loads = [d for d in own if "socialnet_point" in d]
    checks = [figure3_reference(figure3_comparison(loads))]
    check8 = figure8_check(store, run_id)
    if check8:
        checks.append(check8)
    sec.add_references(checks, "Capstone Figures 3 and 8 vs here")
    return sec


# ---- the notes: the targets, what a missed target's costs say, core scaling ----------------------


def summary_notes(s: SocialnetSummary) -> list[str]:
    """The section's notes, in order: the ratio target (and, missed, the run's costs), the ratio on the
    run's stores beside simulated ones, core scaling, the tracing targets (one line per sampling)."""
    notes: list[str] = []
    if s.target is not None:
        notes.append(_target_line(s.target))
    if s.shortfall is not None:
        notes += _shortfall_lines(s.shortfall)
    if s.stores is not None:
        notes.append(stores_comparison_line(s.stores))
    if s.core_scaling is not None:
        notes.append(_core_scaling_line(s.core_scaling))
    notes += tracing_lines(s.tracing)
    return notes


def _met(met: bool) -> str:
    return "met" if met else "not met"


def _target_line(t: RatioTarget) -> str:
    if t.ratio is None:
        return (
            f"std-async met the p99 objective of {fmt_ns(P99_OBJECTIVE_NS)} at none of its rates: "
            "the ratio at the objective is undefined; ceilings are compared instead."
        )
    bracket = _bracket_text(t.bracket) if t.bracket else ""
    return (
        f"Target best model ≥ {TARGET_RATIO:g}× std-async at p99 ≤ {fmt_ns(P99_OBJECTIVE_NS)}: {t.best} reached "
        f"{fmt_ratio(t.ratio)} ({_ratio_verdict_text(t)}){bracket}."
    )


def _ratio_verdict_text(t: RatioTarget) -> str:
    """The target by the points' p99 intervals (RatioTarget.verdict), or by the estimates without them."""
    v = t.verdict
    if v.verdict == "":
        return f"{_met(t.met)} by the estimates; no p99 intervals to judge it by: {v.unavailable}"
    lo, hi = t.low_by_intervals, t.high_by_intervals
    if hi is not None and lo == hi:
        span = f"{fmt_ratio(lo)} by the points' p99 intervals too"
    else:
        span = (
            f"between {fmt_ratio(lo)} and "
            + ("an unbounded ratio" if hi is None else fmt_ratio(hi))
            + " by the points' p99 intervals"
        )
    if v.verdict == UNDECIDED:
        text = f"{UNDECIDED}: {span}; {length_to_decide_text(v)} at every undecided point"
    else:
        text = f"{v.verdict}: {span}"
    if t.estimates_only:
        text += f"; points without a p99 interval judged by their estimates ({t.estimates_only})"
    return text


def _bracket_text(b: RatioBracket) -> str:
    """How far the rates tried pin the ratio: the grid, then the bisections of its bracket."""
    said = [
        f"{r.model} met it at {fmt_count(r.met_per_s)}/s and "
        + (
            f"missed at {fmt_count(r.first_miss_per_s)}/s"
            if r.first_miss_per_s is not None
            else "at every higher rate tried"
        )
        for r in (b.baseline, b.best)
    ]
    if b.low is not None and b.high is not None:
        span = f"the ratio lies between {fmt_ratio(b.low)} and {fmt_ratio(b.high)}"
    elif b.low is not None:
        span = f"the ratio is at least {fmt_ratio(b.low)}"
    elif b.high is not None:
        span = f"the ratio is at most {fmt_ratio(b.high)}"
    else:
        span = "the grid does not bound the ratio"
    halved = [f"{r.model} {r.bisections}" for r in (b.baseline, b.best) if r.bisections]
    tried = "on the sweep's grid" + (f" and its bisections ({', '.join(halved)})" if halved else "")
    return f"; {tried} {'; '.join(said)}, so {span}"


def _pct(share: float | None) -> str:
    return "—" if share is None else f"{share * 100:.0f} %"


def _transport_text(model: str, d: Decomposition) -> str:
    if d.rpcs_per_request is None or d.cpu_per_rpc_ns is None:
        return f"{model}: transport share unavailable: {d.unavailable.get('transport_share')}"
    batched = (
        f"; with {PING_BATCHED_CONCURRENCY} in flight {fmt_ns(d.batched_cpu_per_rpc_ns)} each, "
        f"{_pct(d.batched_transport_share)}: an RPC of the loaded graph lies between"
        if d.batched_transport_share is not None
        else ""
    )
    overstated = " (more than all of it: the ping, one call in flight, overstates a batched RPC)"
    return (
        f"{model} makes {d.rpcs_per_request:.1f} RPCs per request at {fmt_ns(d.cpu_per_rpc_ns)} of CPU each "
        f"(in-run ping, both ends, one call in flight) = {fmt_ns(d.transport_cpu_per_request_ns)}, "
        f"{_pct(d.transport_share)} of its CPU per request" + (overstated if d.transport_exceeds_cpu else "") + batched
    )


def _fmt_opt(v: float | None) -> str:
    return "unavailable" if v is None else f"{v:.1f}"


def _gap_text(gap: str | None, best: str) -> str:
    """What the ratio at the objective beside the CPU ratio says (the gap is decided by the analysis)."""
    if gap == GAP_TAIL:
        return "the tail, not CPU, limits std-async first."
    if gap == GAP_CPU:
        return "CPU per request accounts for the gap."
    return f"{best} reaches less than its CPU advantage at the objective."


def _shortfall_lines(f: TargetShortfall) -> list[str]:
    """The target missed: which costs the run measured, and what they imply. Only computed sentences."""
    a, b, best = f.baseline, f.contender, f.best
    if f.cpu_ratio is None:
        return [f"Decomposition unavailable: CPU per request: {f.unavailable}."]
    lines = [
        f"Measured decomposition (same run): CPU per request std-async {fmt_ns(a.cpu_per_request_ns)}, {best} "
        f"{fmt_ns(b.cpu_per_request_ns)} (std-async ÷ {best} = {fmt_ratio(f.cpu_ratio)}).",
        "Transport: " + "; ".join(_transport_text(m, d) for m, d in ((BASELINE_MODEL, a), (best, b))) + ".",
    ]
    if a.thread_create_cpu_per_request_ns is not None:
        lines.append(
            f"std-async starts {_fmt_opt(a.async_threads_per_request)} threads per request (one per async call); at "
            f"this machine's thread_create p50 of {fmt_ns(a.thread_create_ns)} that is "
            f"{fmt_ns(a.thread_create_cpu_per_request_ns)}, {_pct(a.thread_create_share)} of its CPU per request."
        )
    else:
        lines.append(f"std-async thread-creation cost unavailable: {a.unavailable.get('thread_create_share')}.")
    left = [
        f"{m} {fmt_ns(d.rest_cpu_per_request_ns)}"
        if d.rest_cpu_per_request_ns is not None
        else f"{m} unavailable: {d.unavailable.get('rest_cpu_per_request_ns')}"
        for m, d in ((BASELINE_MODEL, a), (best, b))
    ]
    lines.append(
        f"Left after the transport and thread creation, per request, that these measurements do not attribute: "
        f"{'; '.join(left)}."
    )
    if f.busy:
        lines.append(
            "Ceiling × the closed-loop run's CPU per request: "
            + "; ".join(
                f"{c.model} kept {c.cores:.2f} cores busy at its ceiling of {fmt_count(c.ceiling_per_s)}/s"
                for c in f.busy
            )
            + "."
        )
    lines.append(
        f"CPU per request, std-async ÷ {best}: measured {fmt_ratio(f.cpu_ratio)}; where both are CPU-bound that "
        f"ratio sets best ÷ std-async, so {TARGET_RATIO:g}× needs it to reach {TARGET_RATIO:g}×, or std-async to "
        "run out of something other than CPU "
        f"(threads: {fmt_count(f.threads[0])} vs {fmt_count(f.threads[1])}; context switches per request: "
        f"{_fmt_opt(a.ctx_switches_per_request)} vs {_fmt_opt(b.ctx_switches_per_request)})."
    )
    if f.cpu_per_rpc_ns is None:
        lines.append(f"CPU per RPC unavailable: {b.unavailable.get('cpu_per_rpc_ns')}.")
    lines.append(
        f"At the p99 objective {best} ÷ std-async is {fmt_ratio(f.ratio)} against a CPU-per-request ratio of "
        f"{fmt_ratio(f.cpu_ratio)}: {_gap_text(f.gap, best)}"
    )
    return lines


def _range_text(r: tuple[float, float | None] | None) -> str:
    """A range of plausible ratios (StoresArm.ratio_range): low 0 has no lower bound, high None no upper."""
    if r is None:
        return "unavailable"
    lo, hi = r
    if hi is None:
        return f"≥ {fmt_ratio(lo)}" if lo else "unbounded"
    if lo == hi:
        return fmt_ratio(lo)
    return f"≤ {fmt_ratio(hi)}" if lo == 0 else f"{fmt_ratio(lo)}–{fmt_ratio(hi)}"


def _arm_ratio_text(arm: StoresArm) -> str:
    if arm.ratio is not None:
        return fmt_ratio(arm.ratio)
    why = arm.unavailable or (arm.target.unavailable if arm.target else None) or "not measured"
    return f"unavailable ({why})"


def stores_comparison_line(c: StoresComparison) -> str:
    """The run's best ÷ std-async at the objective beside the simulated-stores arm's (issue 27), or why the
    arm did not run. The comparison (wider, narrower, overlapping) is the analysis's."""
    run, sim = c.run, c.simulated
    what = f"{run.best} ÷ std-async at p99 ≤ {fmt_ns(P99_OBJECTIVE_NS)}"
    if sim.unavailable is not None:
        return f"{what} on simulated stores: not measured ({sim.unavailable})."
    if c.run_over_simulated is None or c.difference is None:
        return f"{what}: {_arm_ratio_text(run)} on {run.stores} stores, {_arm_ratio_text(sim)} on {sim.stores} stores."
    ranges = f"{_range_text(run.ratio_range)} on {run.stores}, {_range_text(sim.ratio_range)} on {sim.stores}"
    if c.difference in (WIDER_ON_REAL, NARROWER_ON_REAL):
        verdict = f"{c.difference}: the ranges of plausible ratios ({ranges}) do not overlap"
    else:
        verdict = f"the ranges of plausible ratios ({ranges}) overlap: the difference is {UNDECIDED}"
    return (
        f"Stores: on {run.stores} stores {run.best}'s advantage over std-async at p99 ≤ {fmt_ns(P99_OBJECTIVE_NS)} "
        f"is {fmt_ratio(run.ratio)} against {fmt_ratio(sim.ratio)} on {sim.stores} ones "
        f"({run.stores} ÷ {sim.stores} {fmt_ratio(c.run_over_simulated)}); {verdict}."
    )


def _reach_cell(arm: StoresArm, model: str) -> str:
    """A model's max rate at the objective in one arm, and the next rate tried, which missed it."""
    r = arm.per.get(model)
    if r is None:
        return f"unavailable (the {arm.stores or 'simulated'}-stores arm has no {model} point)"
    missed = (
        f"missed at {fmt_count(r.first_miss_per_s)}/s" if r.first_miss_per_s is not None else "missed at no higher rate"
    )
    return f"{fmt_count(r.at_objective_per_s)} ({missed}; {r.bisections} bisection{'' if r.bisections == 1 else 's'})"


def stores_table(c: StoresComparison) -> Table:
    """best ÷ std-async at the objective with the run's stores and with simulated ones, side by side."""
    arms = (c.run, c.simulated)
    models = list(dict.fromkeys([BASELINE_MODEL, c.run.best or BASELINE_MODEL]))
    objective = f"p99 ≤ {fmt_ns(P99_OBJECTIVE_NS)}"

    def ceiling(arm: StoresArm, m: str) -> str:
        r = arm.per.get(m)
        return fmt_count(r.ceiling_per_s) if r is not None else "unavailable (no point)"

    def verdict(arm: StoresArm) -> str:
        return _ratio_verdict_text(arm.target) if arm.target and arm.target.ratio is not None else _arm_ratio_text(arm)

    rows = [
        *([f"{m} ceiling /s", *(ceiling(a, m) for a in arms)] for m in models),
        *([f"{m} max /s at {objective}", *(_reach_cell(a, m) for a in arms)] for m in models),
        [f"{c.run.best} ÷ std-async at {objective}", *(_arm_ratio_text(a) for a in arms)],
        ["plausible range", *(_range_text(a.ratio_range) for a in arms)],
        [f"target ≥ {TARGET_RATIO:g}×", *(verdict(a) for a in arms)],
    ]
    return Table(
        title=f"{c.run.best} ÷ std-async at the p99 objective: the run's stores beside simulated ones",
        columns=["", *(f"stores: {a.stores}" for a in arms)],
        rows=rows,
        caption="Both columns by the same procedure and the same analysis: each model's closed-loop ceiling "
        f"({CEILING_CONNECTIONS} connections) on a fresh graph, the open-loop sweep at {SWEEP_FRACTIONS} × "
        "that ceiling (1 % tracing, one graph), and the same bisections of the objective's bracket, each on "
        "a fresh graph; only tailscope-svc --stores differs. The simulated column runs std-async and the "
        "best model of the run's own stores only, so its ratio is that model's, whichever model would lead "
        "on simulated stores. Plausible range: the ratio's range by the points' p99 95 % intervals where "
        "they judge it, else the grid's bracket (best's max ÷ std-async's first miss up to best's first miss "
        "÷ std-async's max).",
        findings=[stores_comparison_line(c)],
        wrap_columns=(1, 2),
    )


def _plural_cpus(n: int) -> str:
    return "CPUs" if n > 1 else "CPU"


def _core_scaling_line(c: CoreScaling) -> str:
    if c.unavailable is not None:
        return f"Core scaling unavailable: {c.unavailable}."
    parts = []
    for m in c.models:
        steps = " → ".join(f"{fmt_count(p.ceiling_per_s)}/s on {p.cpus}" for p in m.points)
        growth = f" ({fmt_ratio(m.growth)} for {fmt_ratio(m.cpu_growth)} the CPUs)" if m.growth is not None else ""
        parts.append(f"{m.model} {steps} {_plural_cpus(m.points[-1].cpus)}{growth}")
    text = (
        "Core scaling, closed-loop ceiling with the graph on 1 … all allowed CPUs (generator unpinned): "
        + "; ".join(parts)
    )
    for r in c.ratios:
        text += f". {r.model} ÷ std-async ceiling: " + ", ".join(f"{fmt_ratio(x)} on {k}" for k, x in r.by_cpus)
    return text + "."


def _sampling_text(sample: float) -> str:
    return f"{sample * 100:g} % sampling"


def _target_text(target: float | None) -> str:
    return "no target" if target is None else f"≤ {target * 100:g} %"


def _cost_pct(cost: float, target: float | None) -> str:
    """A tracing cost in % with a decimal finer than its target's (0.1 % against 2 %, 0.01 % against
    0.5 %): a 1 % row's cost of 0.45 % must not read as the 0.5 % target itself."""
    digits = 2 if target is not None and target < 0.01 else 1
    return f"{cost * 100:.{digits}f}"


def _tracing_verdict_text(t: TracingCost) -> str:
    """The row's verdict with its evidence: the interval of the median, or why there is none."""
    v = t.verdict
    if v.verdict == "" or t.cost_interval is None:
        by = f"{_met(t.met)} by the median" if t.target is not None else "not judged: median"
        return f"{by} of {t.pairs} alternated pairs; no 95 % interval: {v.unavailable}"
    lo, hi = (_cost_pct(x, t.target) for x in t.cost_interval)
    said = f"{v.verdict}; median of {t.pairs} alternated pairs, 95 % interval {lo}–{hi} %"
    if v.verdict == UNDECIDED:
        said += f"; {length_to_decide_text(v, 'pairs')}"
    return said


def tracing_lines(rows: Sequence[TracingCost]) -> list[str]:
    """One note per sampling measured: a single row is cited whole; several (the full form: every model)
    are counted by verdict and the row of the highest median cost cited whole (analysis.worst_tracing_cost)."""
    lines = []
    for sample in dict.fromkeys(r.sample for r in rows):
        at = [r for r in rows if r.sample == sample]
        worst = worst_tracing_cost(at, sample)
        assert worst is not None  # `at` is not empty
        head = f"Target tracing at {_sampling_text(sample)} {_target_text(worst.target)} throughput cost: "
        if len(at) == 1:
            lines.append(
                f"{head}measured {_cost_pct(worst.cost, worst.target)} % on {worst.model} ({_tracing_verdict_text(worst)})."
            )
            continue
        # Verdicts by the interval first, then those the median decided (rows with fewer pairs than an
        # interval needs), in a fixed order so that two runs' lines read alike.
        counts = Counter(
            r.verdict.verdict or (f"{_met(r.met)} by the median" if r.target is not None else "not judged") for r in at
        )
        order = [INTERVAL_MET, INTERVAL_NOT_MET, UNDECIDED, "met by the median", "not met by the median", "not judged"]
        tally = ", ".join(f"{v} for {counts[v]}" for v in order if counts[v])
        lines.append(
            f"{head}{tally} of {len(at)} models; the highest, {_cost_pct(worst.cost, worst.target)} % on {worst.model} "
            f"({_tracing_verdict_text(worst)})."
        )
    return lines + tracing_cpu_lines(rows)


def tracing_cpu_lines(rows: Sequence[TracingCost]) -> list[str]:
    """Per sampling, the same pairs judged by CPU (TracingCost.cpu_cost): verdicts counted, the highest
    cited with its interval; nothing for a run that did not read its points' CPU."""
    lines = []
    for sample in dict.fromkeys(r.sample for r in rows if r.cpu_cost is not None):
        at = [r for r in rows if r.sample == sample and r.cpu_cost is not None]
        worst = max(at, key=lambda r: r.cpu_cost or 0.0)
        counts = Counter(r.cpu_verdict.verdict or "judged by the median" for r in at)
        tally = ", ".join(f"{v} for {n}" for v, n in counts.items())
        lo_hi = (
            f", 95 % interval {_cost_pct(worst.cpu_cost_interval[0], worst.target)}–"
            f"{_cost_pct(worst.cpu_cost_interval[1], worst.target)} %"
            if worst.cpu_cost_interval
            else ""
        )
        lines.append(
            f"Tracing at {_sampling_text(sample)} by CPU per request (the same pairs): {tally} of {len(at)} "
            f"model(s); the highest, {_cost_pct(worst.cpu_cost or 0.0, worst.target)} % of the machine's work per "
            f"request on {worst.model} (median of {worst.pairs} pairs{lo_hi})."
        )
    return lines


# ---- figures and tables -------------------------------------------------------------------------


def _curve_figure(s: SocialnetSummary) -> Figure:
    fig, ax = plots.new_figure()
    for m in s.models:
        pts = [p for p in s.per[m].sweep if p.p99_ns]
        if pts:
            plots.line_with_intervals(
                ax, [p.achieved_per_s for p in pts], [p.p99_ns or 0.0 for p in pts], [_bounds(p) for p in pts], m
            )
    ax.axhline(P99_OBJECTIVE_NS, color="#57606a", linestyle="--", linewidth=1, label="p99 objective")
    ax.set_yscale("log")
    plots.format_ns_axis(ax.yaxis)
    ax.set_xlabel("achieved requests/s")
    ax.set_ylabel("p99 latency (from intended send)")
    ax.legend(loc="upper left", fontsize=8)
    finding = (
        f"{s.best} sustains the most at p99 ≤ {fmt_ns(P99_OBJECTIVE_NS)}: "
        f"{fmt_count(s.per[s.best].at_objective_per_s)}/s"
        if s.best
        else "no model met the objective"
    )
    return Figure(
        title="Latency vs throughput (open loop, up to saturation)",
        svg=plots.to_svg(fig),
        caption=f"p99 of latency_intended per offered rate; rates are fractions {SWEEP_FRACTIONS} of each "
        f"model's closed-loop ceiling ({CEILING_CONNECTIONS} connections) plus the common rate; "
        f"{CONNECTIONS} connections. Error bars: the p99's distribution-free 95 % interval where the point has "
        "one (none below 368 samples or with fewer than 10 beyond the p99).",
        finding=finding,
    )


def _bounds(p: SweepPoint) -> tuple[float, float] | None:
    """A point's p99 interval for an error bar: none with fewer than 10 samples beyond the p99."""
    return error_bar(p.p99, p.low_confidence)


def _objective_cell(p: SweepPoint) -> str:
    """The p99 objective at one point: met / not met / undecided (with the length that decides it)."""
    v: IntervalVerdict = p.verdict
    if v.verdict == UNDECIDED:
        if v.length_factor is None:
            return f"{UNDECIDED} ({v.why_no_length})"
        return f"{UNDECIDED}; {v.length_factor:.1f}× as long decides it"
    if v.verdict == INTERVAL_NOT_MET and p.errors:
        return f"{INTERVAL_NOT_MET} (errors)"
    if v.verdict == INTERVAL_NOT_MET and p.achieved_per_s < SERVED_SHARE * p.rate_per_s:
        return f"{INTERVAL_NOT_MET} (rate not served)"
    if v.verdict in (INTERVAL_MET, INTERVAL_NOT_MET):
        return v.verdict
    return f"{_met(p.meets_objective)} (estimate; no interval)"


def _objective_table(s: SocialnetSummary) -> Table:
    rows = [
        [
            m,
            fmt_count(p.rate_per_s),
            fmt_count(p.achieved_per_s),
            fmt_ns(p.p99_ns) + ("" if p.p99_ns is None else " " + interval_cell(p.p99, p.low_confidence)),
            str(p.errors),
            _objective_cell(p),
        ]
        for m in s.models
        for p in s.per[m].sweep
    ]
    return Table(
        title=f"The p99 objective (≤ {fmt_ns(P99_OBJECTIVE_NS)}) at every open-loop point",
        columns=["model", "offered /s", "achieved /s", "p99 [95 % interval]", "errors", "objective"],
        rows=rows,
        caption="Each point judged by its p99's distribution-free 95 % interval (order statistics): met when "
        "the whole interval lies within the objective, not met when all of it lies above (or the point had "
        "errors, or served < 95 % of its rate), undecided at this length when it straddles the objective — "
        "with how many times this point's length would decide it at its observed rate, if the p99 stays "
        f"where it is (docs/measurement.md). [{FEW_BEYOND}]: fewer than 10 samples beyond the p99; [—]: "
        "no interval (fewer than 368 samples, or a document from before intervals), the estimate decides.",
        numeric_from=1,
    )


def _cdf_figure(s: SocialnetSummary, rate: float) -> Figure:
    fig, ax = plots.new_figure()
    curves, lines = [], []
    for m in s.models:
        common = s.per[m].common
        if common is None or not common.cdf:
            continue
        curves.append(plots.CdfCurve(m, list(common.cdf)))
        if common.p99_ns is not None:
            lines.append((m, common.p99_ns))
    plots.latency_cdf(ax, curves, ylabel="latency (from intended send)")
    ax.legend(loc="upper left", fontsize=8)
    finding = ", ".join(f"{m} p99 {fmt_ns(v)}" for m, v in sorted(lines, key=lambda x: x[1]))
    return Figure(
        title=f"Latency CDF at a common rate ({fmt_count(rate)} requests/s)",
        svg=plots.to_svg(fig),
        caption=f"Every model at the same offered rate ({COMMON_RATE_FRACTION:.0%} of the slowest model's "
        "ceiling), open loop.",
        finding=finding,
    )


def _connections_figure(c: ConnectionsSweep) -> Figure:
    fig, ax = plots.new_figure()
    for line in c.lines:
        bounds = line.bounds or (None,) * len(line.points)
        plots.line_with_intervals(
            ax, [n for n, _ in line.points], [p for _, p in line.points], list(bounds), line.model
        )
    ax.set_yscale("log")
    plots.format_ns_axis(ax.yaxis)
    ax.set_xlabel("connections")
    ax.set_ylabel("p99 latency")
    ax.legend(fontsize=8)
    finding = "; ".join(
        f"{line.model}: p99 {fmt_ns(line.points[0][1])} at {line.points[0][0]} → {fmt_ns(line.points[-1][1])} at "
        f"{line.points[-1][0]} connections"
        for line in c.lines
    )
    return Figure(
        title="Connections sweep (20 → 100) at the common rate",
        svg=plots.to_svg(fig),
        caption=f"Open loop at {fmt_count(c.rate_per_s)} requests/s. Error bars: the p99's 95 % interval where "
        "the point has one with at least 10 samples beyond the p99.",
        finding=finding,
    )


def _common_p99_cell(c: CommonRateLatency | None) -> str:
    if c is None or c.p99_ns is None:
        return fmt_ns(None)
    return fmt_ns(c.p99_ns) + " " + interval_cell(c.p99_interval, c.p99_low_confidence)


def _summary_table(s: SocialnetSummary) -> Table:
    rows = []
    for m in s.models:
        p = s.per[m]
        e = p.errors
        rows.append(
            [
                m,
                fmt_count(p.ceiling_per_s),
                fmt_ratio(p.ceiling_ratio),
                fmt_count(p.at_objective_per_s),
                fmt_ratio(p.ratio),
                fmt_ns(p.common.p50_ns if p.common else None),
                _common_p99_cell(p.common),
                fmt_ns(p.cpu_per_request_ns),
                fmt_count(p.threads),
                f"{e.errors}/{e.rejections}/{e.timeouts}",
            ]
        )
    return Table(
        title="Per-model summary",
        columns=[
            "model",
            "ceiling /s",
            "vs std-async",
            f"max /s at p99 ≤ {fmt_ns(P99_OBJECTIVE_NS)}",
            "vs std-async",
            "p50 @ common",
            "p99 @ common",
            "CPU / request",
            "threads",
            "errors/rejections/timeouts",
        ],
        rows=rows,
        caption="Ceiling: closed loop. Max at objective: highest achieved open-loop rate with p99 within the "
        "objective, no errors and ≥ 95 % of the offered rate served. CPU / request: user + sys CPU of "
        "all 12 service processes over the sweep ÷ front requests. Threads: sum over services of the "
        "per-process maximum. Errors are summed over every service of the sweep's graph. p99 [lo–hi]: its "
        f"distribution-free 95 % interval; [{FEW_BEYOND}]: fewer than 10 samples beyond it; [—]: none.",
    )


def _decomposition_table(s: SocialnetSummary) -> Table:
    def cell(d: Decomposition, field: str, fmt: Callable[[Any], str]) -> str:
        v = getattr(d, field)
        return fmt(v) if v is not None else f"unavailable: {d.unavailable.get(field, 'not measured')}"

    def pct(v: float) -> str:
        return f"{v * 100:.0f} %"

    def num(v: float) -> str:
        return f"{v:.1f}"

    rows = []
    for m in s.models:
        d = s.per[m].decomposition
        rows.append(
            [
                m,
                cell(d, "cpu_per_request_ns", fmt_ns),
                cell(d, "rpcs_per_request", num),
                cell(d, "cpu_per_rpc_ns", fmt_ns),
                cell(d, "batched_cpu_per_rpc_ns", fmt_ns),
                cell(d, "transport_share", pct),
                cell(d, "batched_transport_share", pct),
                cell(d, "async_threads_per_request", num),
                cell(d, "thread_create_share", pct),
                cell(d, "threads", fmt_count),
                cell(d, "ctx_switches_per_request", num),
            ]
        )
    return Table(
        title="Where a request's CPU goes (measured in this run)",
        columns=[
            "model",
            "CPU / request",
            "RPCs / request",
            "CPU / RPC (ping, 1 in flight)",
            f"CPU / RPC ({PING_BATCHED_CONCURRENCY} in flight)",
            "transport share (1 in flight)",
            f"transport share ({PING_BATCHED_CONCURRENCY} in flight)",
            "threads started / request",
            "thread-creation share",
            "threads",
            "context switches / request",
        ],
        rows=rows,
        caption="RPCs / request: the services' downstream calls counters ÷ front requests. CPU / RPC: an in-run "
        "ping through the same multiplexed channel against one service of the model's graph (user + sys of both "
        f"ends ÷ calls), with one call in flight and with {PING_BATCHED_CONCURRENCY}: an RPC of the loaded graph "
        "shares wake-ups and sends with others, so its cost lies between the two. Transport share: RPCs × CPU per "
        "RPC ÷ CPU per request. Threads started: async-call threads "
        "(std-async, std-thread), costed at the run's thread_create baseline p50. Context switches: voluntary + "
        "involuntary of every service process ÷ front requests.",
    )


def _split_cell(v: float | None, why: str | None) -> str:
    return fmt_ns(v) if v is not None else f"unavailable ({why or 'not measured'})"


def cpu_split_table(s: SocialnetSummary) -> Table:
    """CPU per request split into the services and each store process, per model (issue 27)."""
    systems = list(dict.fromkeys(st.system for m in s.models for st in s.per[m].decomposition.split.stores))
    rows = []
    for m in s.models:
        d = s.per[m].decomposition
        split = d.split
        by_system = {st.system: st for st in split.stores}
        stores_cells = [
            _split_cell(by_system[sys].cpu_per_request_ns, by_system[sys].unavailable)
            if sys in by_system
            else f"unavailable ({split.stores_unavailable or 'no ' + sys + ' server in this graph'})"
            for sys in systems
        ]
        total_why = split.stores_unavailable or d.unavailable.get("cpu_per_request_ns") or "a part is unavailable"
        rows.append(
            [
                m,
                stores_text(split.stores_mode, split.stores_reason),
                _split_cell(split.services_cpu_per_request_ns, d.unavailable.get("cpu_per_request_ns")),
                *stores_cells,
                _split_cell(split.total_cpu_per_request_ns if split.stores else None, total_why),
            ]
        )
    return Table(
        title="CPU per request: services and stores (measured in this run)",
        columns=["model", "stores", "services", *(f"{sys} process" for sys in systems), "services + stores"],
        rows=rows,
        caption="Services: user + sys of every service process of the model's sweep graph ÷ front requests (the "
        "decomposition's CPU / request). Each store: user + sys of that store server over the same graph's life "
        "(read from /proc just before the supervisor stopped it) ÷ the same requests; mongodb is DeathStarBench's "
        "role, served by PostgreSQL JSONB. With simulated stores no store process runs: a store's wait costs no "
        "CPU, which is what the real stores correct.",
    )


def work_table(w: WorkComparison) -> Table:
    """CPU per call of each service with a work stage: real work vs the busy loop it replaced (issue 27)."""
    rows = [
        [
            r.service,
            _split_cell(r.real_work_ns, r.unavailable),
            _split_cell(r.simulated_work_ns, r.unavailable),
            fmt_ratio(r.work_ratio) if r.work_ratio is not None else f"unavailable ({r.unavailable or 'no busy loop'})",
            _split_cell(r.real_process_ns, r.unavailable),
            _split_cell(r.simulated_process_ns, r.unavailable),
        ]
        for r in w.services
    ]
    total_ratio = (
        w.real_cpu_per_request_ns / w.simulated_cpu_per_request_ns
        if w.real_cpu_per_request_ns is not None and w.simulated_cpu_per_request_ns
        else None
    )
    rows.append(
        [
            "every service, per front request",
            "",
            "",
            "",
            _split_cell(w.real_cpu_per_request_ns, "the front served no request"),
            _split_cell(w.simulated_cpu_per_request_ns, "the front served no request")
            + (f" (real ÷ simulated {fmt_ratio(total_ratio)})" if total_ratio is not None else ""),
        ]
    )
    return Table(
        title=f"CPU per call: real work vs the simulated topology's busy loops ({w.model}, closed loop)",
        columns=[
            "service",
            f"work stages, {w.real_mode}",
            f"work stages, {w.simulated_mode}",
            "real ÷ busy loop",
            "process, real work",
            "process, busy loops",
        ],
        rows=rows,
        caption="Work stages: the CPU the service's work stages took (the engine reads the thread's CPU clock "
        "around each) ÷ the service's calls — with real work (DeathStarBench's text scan, URL hash, unique id, "
        "post serialisation, hotel's JSON) and with tailscope-svc --work simulated, which burns the busy loop each "
        "stage keeps in simulated_cpu (the topology's earlier cpu: value). Process: user + sys of the service's "
        "process ÷ its calls (the transport and runtime included). Each from a closed-loop graph of the same model "
        "and stores; the mode each graph recorded heads its column. A ratio far from 1 is a finding about the "
        "busy loop's size, not an error: the sizes were calibrated to the same order, not to equality.",
    )


def _tracing_verdict_cell(t: TracingCost) -> str:
    v = t.verdict
    return _verdict_cell(v, t.met, t.target)


def _tracing_cpu_cells(t: TracingCost) -> list[str]:
    """The row's CPU cost with its interval, and its verdict; unavailable with the reason."""
    if t.cpu_cost is None:
        return [f"unavailable ({t.cpu_unavailable})", "—"]
    lo_hi = (
        f" [{_cost_pct(t.cpu_cost_interval[0], t.target)}–{_cost_pct(t.cpu_cost_interval[1], t.target)} %]"
        if t.cpu_cost_interval
        else " [—]"
    )
    met = t.target is not None and t.cpu_cost <= t.target
    return [f"{_cost_pct(t.cpu_cost, t.target)} %{lo_hi}", _verdict_cell(t.cpu_verdict, met, t.target)]


def _verdict_cell(v: IntervalVerdict, met: bool, target: float | None) -> str:
    if v.verdict == UNDECIDED:
        return f"{UNDECIDED}: {length_to_decide_text(v, 'pairs')}"
    if v.verdict:
        return v.verdict
    if target is None:
        return f"not judged ({v.unavailable})"
    return f"{_met(met)} by the median (no interval: {v.unavailable})"


def _tracing_graphs_text(rows: Sequence[TracingCost]) -> str:
    """Where a run's pairs ran: one closed-loop run per row with the sampling switched on its interval
    boundaries, or (runs stored before it) one warmed graph per row switched between points, or a fresh
    graph per point."""
    if all(r.switched for r in rows):
        slot_s, guard, used, warmup_s = rows[0].slots
        return " ".join(
            [
                f"— each side {used * slot_s:g} s of ONE closed-loop run per row (after {warmup_s:g} s of warm-up) on one",
                "graph started at the row's sampling, the front's sampling paused and resumed by a signal on the load",
                f"generator's {slot_s:g} s interval boundaries, the {guard * slot_s:g} s after each switch discarded",
                "(requests admitted before it keep their sampling), in ABBA order (off on | on off | …)"
                + (f", the switching thread under {rows[0].switcher} —" if rows[0].switcher else " —"),
            ]
        )
    one = " ".join(
        [
            "in ABBA order (off→on, on→off, …) on one graph per row, started at the row's sampling, warmed by a",
            "discarded point, its front's sampling paused and resumed by a signal between points",
        ]
    )
    if all(r.one_graph for r in rows):
        return one
    if not any(r.one_graph for r in rows):
        return "on fresh graphs"
    return f"(rows {', '.join(f'{r.model} {r.sample * 100:g} %' for r in rows if r.one_graph)} {one}; the others on fresh graphs)"


def _tracing_rates_cell(t: TracingCost, rates: Sequence[float]) -> str:
    """A side's rates in pair order (points), or their median and range (a switched run's many sides)."""
    if not t.switched:
        return ", ".join(fmt_count(x) for x in rates)
    return f"{fmt_count(statistics.median(rates))} ({fmt_count(min(rates))}–{fmt_count(max(rates))})"


def _tracing_rates_text(rows: Sequence[TracingCost]) -> str:
    points = "off /s and on /s list them in order; the i-th on is paired with the i-th off"
    switched = (
        "off /s and on /s: the sides' median rate (lowest–highest); each on side is paired with the off side beside it"
    )
    if all(r.switched for r in rows):
        return switched
    if not any(r.switched for r in rows):
        return points
    return f"{switched}; rows of points: {points}"


def tracing_table(rows: Sequence[TracingCost]) -> Table:
    """One row per (model, sampling): the pairs' throughputs, the median ratio, the cost with its
    interval, the row's target and its verdict."""
    samplings = " and ".join(_sampling_text(x) for x in dict.fromkeys(r.sample for r in rows))
    pairs = sorted({r.pairs for r in rows})
    pairs_text = f"{pairs[0]} to {pairs[-1]}" if len(pairs) > 1 else f"{pairs[0]}"
    # The CPU columns where the run read its sides' CPU (the switched run's marks; each point's /proc
    # reading in older runs): runs stored before either keep their table.
    cpu = any(r.cpu_cost is not None for r in rows)
    table = Table(
        title=f"Tracing cost ({samplings} vs off)",
        columns=[
            "model",
            "sampling",
            "off /s",
            "on /s",
            "on ÷ off (median)",
            "cost [95 % interval]",
            "target",
            "verdict",
        ],
        rows=[
            [
                t.model,
                f"{t.sample * 100:g} %",
                _tracing_rates_cell(t, t.off_per_s),
                _tracing_rates_cell(t, t.on_per_s),
                fmt_ratio(t.ratio),
                f"{_cost_pct(t.cost, t.target)} %"
                + (
                    f" [{_cost_pct(t.cost_interval[0], t.target)}–{_cost_pct(t.cost_interval[1], t.target)} %]"
                    if t.cost_interval
                    else " [—]"
                ),
                _target_text(t.target),
                _tracing_verdict_cell(t),
            ]
            for t in rows
        ],
        caption=f"Each row: one model's closed-loop throughput ({CONNECTIONS} connections) with tracing on at the "
        f"row's sampling against tracing off, {pairs_text} alternated off/on pairs {_tracing_graphs_text(rows)} "
        f"({_tracing_rates_text(rows)}); cost = 1 − the median of the pairs' "
        "on ÷ off, [95 % interval of the median, order statistics over the pairs; [—] below "
        f"{MIN_PAIRS_FOR_INTERVAL} pairs]. Targets: {TRACING_COST_TARGET * 100:g} % at 100 % sampling, "
        f"{TRACING_COST_TARGET_SAMPLED * 100:g} % at {TRACE_SAMPLE * 100:g} % (the sampling of every sweep "
        "point); the verdict judges the interval against the target (without an interval, the median). Traced: "
        "spans of every RPC, store operation and the 5 probe timestamps of every async call, recorded in "
        "per-thread buffers and spilled to disk once a second during the run in a binary form (the cost includes "
        "that spill); the NDJSON span files are encoded from it when each service stops, after the timed load "
        "(docs/microservices.md, Tracing).",
    )
    if cpu:
        table.columns += ["CPU cost [95 % interval]", "CPU verdict"]
        for row, t in zip(table.rows, rows):
            row += _tracing_cpu_cells(t)
        table.caption += (
            " CPU cost: the same pairs judged by work instead of throughput — per pair, the graph's services' "
            "CPU per request with tracing on minus off, ÷ the whole machine's busy CPU per request with it off "
            + (
                "(the service processes' CPU clocks and /proc/stat read on each side's boundaries)"
                if all(r.switched for r in rows)
                else "(user+sys from /proc around each point)"
            )
            + ", median and 95 % interval over the pairs, against the same target."
        )
    return table


# ---- capstone Figure 8: the async calls of this run's traces (the analyze study's measurements) ----


def async_call_cdf_figure(store: Store, run_id: str) -> Figure | None:
    """The capstone's Figure 8: CDFs of the scheduling and join delay of every
    async call in the traced graph (tailscope's 5-timestamp probe), one panel
    per concurrency model, beside the RPC-gap delays of the same traces.
    From the analyze study's measurements of this run; None when it stored none."""
    df = store.measurements(run_id, "analyze")
    if df.empty:
        return None
    calls = df[df["name"].isin(list(PROBE_CALLS))]
    delays = async_call_delays(calls.to_dict("records"))
    if delays is None:
        return None
    cdf = store.cdf(run_id, "analyze")
    points = sorted(calls["point"].unique())
    import matplotlib.colors
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    # Three panels a row and one legend for all: five models in one row with a legend per panel
    # left each panel ~200 px wide and covered by its own legend (screenshots at 1400 px).
    columns = min(3, len(points))
    rows = -(-len(points) // columns)
    fig, grid = plt.subplots(
        rows, columns, figsize=(4.6 * columns, 3.2 * rows + 1.4), layout="constrained", sharey=True, squeeze=False
    )
    axes = list(grid.flat)
    for ax in axes[len(points) :]:
        ax.set_visible(False)
    # One colour per call in every panel (tab20: the graph has a dozen async calls).
    all_variants = sorted(calls["variant"].unique())
    cmap = plt.get_cmap("tab20")
    colour_of = {v: matplotlib.colors.to_hex(cmap(i % 20)) for i, v in enumerate(all_variants)}
    handles: dict[str, Line2D] = {}
    for ax, point in zip(axes, points, strict=False):
        sub = calls[calls["point"] == point]
        for variant in sorted(sub["variant"].unique()):
            for name, style in zip(PROBE_CALLS, ("-", ":"), strict=True):
                if sub[(sub["name"] == name) & (sub["variant"] == variant)].empty:
                    continue
                pts = cdf[(cdf["point"] == point) & (cdf["name"] == name) & (cdf["variant"] == variant)]
                plots.value_cdf(
                    ax,
                    pts["value_ns"],
                    pts["percentile"],
                    color=colour_of[variant],
                    linestyle=style,
                    linewidth=1.2,
                    label=variant.split(":")[-1],
                )
                if name.endswith(SCHEDULING):
                    handles.setdefault(variant.split(":")[-1], ax.get_lines()[-1])
        for name, colour in (("rpc_scheduling", "#000"), ("rpc_join", "#777")):
            pts = cdf[(cdf["point"] == point) & (cdf["name"] == name)]
            if not pts.empty:
                plots.value_cdf(ax, pts["value_ns"], pts["percentile"], color=colour, linewidth=2, label=name)
                handles.setdefault(f"RPC gap {name.split('_')[1]}", ax.get_lines()[-1])
        ax.set_xscale("log")  # also for a panel with nothing drawn
        plots.format_ns_axis(ax.xaxis)
        plots.thin_log_majors(ax.xaxis)
        ax.set_title(point or "(input)", fontsize=9)
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="outside lower center",
        ncols=4,
        fontsize=7,
        frameon=False,
        title="call (solid: scheduling, dotted: join)",
        title_fontsize=7,
    )
    for r in range(rows):
        grid[r][0].set_ylabel("fraction of calls")
    w = delays.largest
    return Figure(
        "Delay of every async call, per concurrency model (capstone Figure 8)",
        plots.to_svg(fig),
        "Scheduling delay (launch → the call's function starts) and join delay (function ends → the caller "
        "has the value) from tailscope's 5-timestamp probe on every async/deferred call of the sampled "
        f"traces ({fmt_count(delays.samples)} call samples), solid and dotted; thick lines: the RPC-gap delays of "
        "the same traces (server span start − client span start, client end − server end).",
        f"Largest p99 among the async calls: {fmt_ns(w.p99_ns)} ({w.kind} delay of {w.call} under {w.model}).",
    )


def figure8_check(store: Store, run_id: str) -> ReferenceCheck | None:
    """The capstone's Figure 8 (CDFs of every async call's delay in DeathStarBench, std::async, at
    70–80 % of capacity) beside this run's std-async traces. None when the run analyzed no traces with
    probe calls."""
    df = store.measurements(run_id, "analyze")
    docs = {d.point: d.document for d in store.documents(run_id, "analyze")}
    c = figure8_comparison(df.to_dict("records"), (docs.get(BASELINE_MODEL) or {}).get("trace_load"))
    return figure8_reference(c) if c is not None else None


FIGURE8_REPORTED = (
    "every async call's delay (std::async): ~70 % near 0 ms, p90 ×5 higher, tail 10–40 ms = 2–8× the p90, "
    "traced at 70–80 % of capacity"
)


def figure8_reference(c: Figure8Comparison) -> ReferenceCheck:
    """The reference-vs-here row of a Figure 8 comparison."""
    ref = "capstone Figure 8"
    if not c.pooled:
        return ReferenceCheck(ref, FIGURE8_REPORTED, "unavailable", c.verdict, c.unavailable or "", CAPSTONE_FIGURE8)
    here = "std-async, every async call: " + "; ".join(
        f"{p.kind} p50 {fmt_ns(p.p50_ns)}, p90 {fmt_ns(p.p90_ns)}, p99 {fmt_ns(p.p99_ns)} "
        f"(p99 {fmt_ratio(p.tail_over_p90)} the p90, n={fmt_count(p.samples)})"
        for p in c.pooled
    )
    load = c.trace_load
    traced = (
        f"traced at {fmt_count(load.rate_per_s)}/s ({load.fraction * 100:.0f} % of its ceiling, {load.trace_sample * 100:.0f} % "
        "sampling)"
        if load
        else f"traced at {TRACE_SAMPLE * 100:g} % over the open-loop sweep"
    )
    w = c.std_async
    context = (
        (
            f"; largest per-call p99 {fmt_ns(w.p99_ns)} ({w.kind} delay of {w.call}, n={fmt_count(w.samples)})"
            if w
            else ""
        )
        + (
            "; the other models' largest: " + ", ".join(f"{o.model} {fmt_ns(o.p99_ns)}" for o in c.others)
            if c.others
            else ""
        )
        + (" (std-async the highest)" if c.std_async_highest else "")
    )
    if c.verdict == NOT_COMPARABLE:
        why = f"{c.unavailable}. Measured all the same: {here}, {traced}{context}."
        return ReferenceCheck(ref, FIGURE8_REPORTED, here, c.verdict, why, CAPSTONE_FIGURE8)
    heavy = [p.kind for p in c.pooled if p.heavy_tail]
    why = (
        f"{here}, {traced}; the tail reaches the capstone's {FIGURE8_TAIL_OVER_P90:g}× the p90 for "
        f"{', '.join(heavy) or 'neither delay'}{context}; calls with fewer than {MIN_P99_SAMPLES} samples not cited."
    )
    return ReferenceCheck(ref, FIGURE8_REPORTED, here, c.verdict, why, CAPSTONE_FIGURE8)


FIGURE3_REPORTED = (
    f"compose-post p50 ≈ {fmt_ns(CAPSTONE_P50_NS)}, p90 {CAPSTONE_P90_OVER_P50:g}× the median, tail "
    f"{fmt_ns(CAPSTONE_TAIL_NS[0])}–{fmt_ns(CAPSTONE_TAIL_NS[1])} (DeathStarBench containers under wrk2)"
)
# Why our absolute scale differs from the capstone's (the scale is stated, only the shape is judged).
FIGURE3_SCALE_REASON = (
    "the scale differs by design: here the 12 services are processes on one machine's loopback, their "
    "stores what the section's stores line says (real memcached, Redis and PostgreSQL JSONB servers on the "
    "same machine, or waits of a few hundred µs: topologies/socialnet.yaml), the capstone's were "
    "DeathStarBench's containers with real stores, nginx and Thrift"
)


def figure3_reference(c: Figure3Comparison) -> ReferenceCheck:
    """The capstone's Figure 3 beside std-async's latency at 70–80 % of its ceiling: a scale comparison
    (p50 ÷ the capstone's, with the reason it differs) and the shape judged on p90 ÷ p50 and p99 ÷ p50."""
    ref = "capstone Figure 3"
    if c.p50_ns is None:
        return ReferenceCheck(ref, FIGURE3_REPORTED, "unavailable", c.verdict, c.unavailable or "", CAPSTONE_FIGURE3)
    here = (
        f"std-async at {(c.fraction or 0) * 100:.0f} % of its ceiling ({fmt_count(c.rate_per_s)}/s): p50 {fmt_ns(c.p50_ns)} "
        f"({fmt_ratio(c.scale)} the capstone's), p90 {fmt_ratio(c.p90_over_p50)} the median, p99 {fmt_ns(c.p99_ns)} "
        f"({fmt_ratio(c.p99_over_p50)} the median)"
    )
    if c.verdict in (NOT_COMPARABLE, UNAVAILABLE):
        return ReferenceCheck(ref, FIGURE3_REPORTED, here, c.verdict, f"{c.unavailable}.", CAPSTONE_FIGURE3)
    lo, hi = CAPSTONE_LOAD_RANGE
    why = (
        f"{here}; the shape counts when p90 ≥ {CAPSTONE_RATIO_SHARE * CAPSTONE_P90_OVER_P50:g}× the median "
        f"(the capstone's ×{CAPSTONE_P90_OVER_P50:g}) and p99 ≥ {CAPSTONE_TAIL_OVER_P50:g}× it (its tail's low end "
        f"over its median); measured at the capstone's load ({lo * 100:.0f} %–{hi * 100:.0f} % of capacity, here of the closed-loop "
        f"ceiling, the {c.kind} point); {FIGURE3_SCALE_REASON}."
    )
    return ReferenceCheck(ref, FIGURE3_REPORTED, here, c.verdict, why, CAPSTONE_FIGURE3)
