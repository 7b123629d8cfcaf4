"""The `async` study's report section, rendered from analysis.py's values: the figures, the tables,
the findings and the capstone checks. Nothing is decided here — every verdict, ratio and flag comes
in as a value; this module only formats them.
"""

from __future__ import annotations

from typing import Any

from tailscope.report import plots
from tailscope.report.blocks import UNAVAILABLE, Figure, ReferenceCheck, Section, Table
from tailscope.store import Store
from tailscope.studies.asyncmodels.analysis import (
    BASELINE,
    DEFERRED,
    DELAYS,
    ENGINE,
    FLAGGED,
    HANDOFF_PARKED,
    HANDOFF_RUNNING,
    MODEL_ORDER,
    NO_BACKLOG_DATA,
    NO_UNFLAGGED_PAIR,
    ONE_PAYLOAD,
    OVERLOADED,
    PAYLOAD_CHANGE,
    QUEUEING,
    AsyncAnalysis,
    BacklogRow,
    DelayExtremes,
    DelayPanel,
    DelayRow,
    Figure12,
    Figures13_14,
    LoadSweep,
    MaxRates,
    PayloadChange,
    PayloadComparison,
    Pinning,
    SchedulingCause,
    Targets,
    analyze,
    references,
)
from tailscope.studies.common import cite, find_document, study_section
from tailscope.studies.sources import CAPSTONE_FIGURE12, CAPSTONE_FIGURES13_14
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

REF_LABELS = {"condvar_handoff": "condvar hand-off", "spin_handoff": "spin hand-off", "thread_create": "thread start"}
DELAY_LABELS = dict(DELAYS)

INTRO = (
    "A producer thread launches calls at an offered rate (open loop) and a separate consumer thread "
    "requests their values. Each call carries five timestamps: <em>trigger_async_fn</em>, "
    "<em>fn_start</em>, <em>fn_end</em>, <em>request_val</em>, <em>val_received</em>. "
    "Scheduling delay = fn_start − trigger (deferred calls: fn_start − request_val, with "
    "deferral_wait = request_val − trigger reported beside it); join delay = val_received − "
    "max(fn_end, request_val); total = val_received − trigger. Each model is ramped to saturation, "
    "then measured at a fraction of its own maximum rate. Ratios use the physical references "
    "measured in the same run."
)


def build_section(study: Any, store: Store, run_id: str) -> Section:
    """The study's section from what the store holds for `run_id`."""
    sec = study_section(study, store, run_id, section_id="async", intro=INTRO)
    docs = store.documents(run_id, study.name)
    found = find_document(docs, engine=ENGINE)
    bench = found.document if found else None
    # This study's own baseline document first, then the `baseline` study's, if it ran.
    refs = references(
        [d.document for d in docs if d.engine == BASELINE]
        + [d.document for d in store.documents(run_id, "baseline") if d.engine == BASELINE]
    )
    for d in docs:
        for w in d.document.get("warnings", []):
            sec.notes.append(f"{d.engine}: {w}")
    if bench is None or not bench.get("measurements"):
        sec.notes.append("no tailscope-asyncbench measurements were stored for this run")
        return sec
    render(sec, analyze(bench, refs))
    return sec


def render(sec: Section, a: AsyncAnalysis) -> None:
    """Adds the analysis's figures, tables, checks and notes to `sec`."""
    for r in a.missing_references:
        sec.notes.append(f"baseline reference {REF_LABELS[r]} is missing from this run: ratios to it are shown as —")
    pin = pinning_text(a.pinning)
    for panel in a.panels:
        sec.blocks.append(_cdf_figure(panel, a, pin))
    sec.blocks.append(_delay_table(a.delay_rows, a.main_load_pct, a.sweep_payload))
    for comparison in a.payloads:
        sec.blocks.append(_payload_figure(comparison))
    if a.sweep:
        sec.blocks.append(_sweep_figure(a.sweep))
    sec.blocks.append(_max_rate_table(a.max_rates))
    sec.blocks.append(_backlog_table(a.backlog))
    sec.blocks.append(_targets_table(a.targets))
    sec.add_references([figure12_check(a.figure12), figures13_14_check(a.figures13_14)], "Capstone figures vs here")
    if a.saturated_at_main:
        sec.notes.append(
            f"saturated at {a.main_load_pct:g} % of max (backlog grew during the point, or in-flight limit): "
            + ", ".join(a.saturated_at_main)
        )


def pinning_text(p: Pinning) -> str:
    if not p.pinned:
        return "Unpinned"
    return (
        f"Producer on CPU {p.producer_cpu} (unpinned for std-async/std-thread, whose threads would "
        f"inherit it), consumer on CPU {p.consumer_cpu}, {p.workers} pool worker(s) on "
        f"CPU(s) {p.worker_cpus}"
    )


def _delay_words(delay: str) -> str:
    return delay.replace("_", " ")


# ---- figures -----------------------------------------------------------------


def _cdf_figure(panel: DelayPanel, a: AsyncAnalysis, pin: str) -> Figure:
    label = DELAY_LABELS[panel.delay]
    fig, ax = plots.new_figure(9.5, 4.6)
    models = [mm for mm in MODEL_ORDER if any(c.model == mm for c in panel.curves)]
    plots.latency_cdf(
        ax,
        [
            plots.CdfCurve(
                f"{c.model}/{c.mechanism}",
                list(c.cdf),
                plots.PALETTE[models.index(c.model) % len(plots.PALETTE)] if c.model in models else "#000",
                "-" if c.mechanism == "future" else "--",
            )
            for c in panel.curves
        ],
        ylabel=label.lower(),
    )
    for ref_name, ls in (("condvar_handoff", ":"), ("spin_handoff", "-.")):
        if ref_name in a.references:
            ax.axhline(
                a.references[ref_name].p50_ns,
                color="#57606a",
                linestyle=ls,
                linewidth=1,
                label=f"{REF_LABELS[ref_name]} p50",
            )
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return Figure(
        f"{label} per model ({a.sweep_payload} payload, {a.main_load_pct:g} % of each model's max rate)",
        plots.to_svg(fig),
        f"{pin}. Solid: std::promise/std::future; dashed: the model's own mechanism (continuation slot, "
        f"thread join, coroutine resumption). Grey lines: baseline references of the same run. "
        f"{fmt_count(panel.samples)} calls in all, warm-up excluded.",
        extremes_finding(panel.extremes, label),
    )


def extremes_finding(ex: DelayExtremes, label: str) -> str:
    """The CDF figure's finding: the lowest and highest p50, with the flagged points left out counted."""
    skipped = f" ({ex.left_out} flagged point(s) left out: saturated)" if ex.left_out else ""
    if ex.lowest is None:
        return f"Every point was flagged saturated: no lowest or highest {label.lower()} is stated."
    return (
        f"Lowest p50 {label.lower()}: {ex.lowest} at {fmt_ns(ex.lowest_p50_ns)}"
        + (f" ({fmt_ratio(ex.lowest_to_condvar)} the condvar hand-off)" if ex.lowest_to_condvar is not None else "")
        + f"; highest: {ex.highest} at {fmt_ns(ex.highest_p50_ns)} "
        f"({fmt_ratio(ex.highest_to_lowest)} the lowest){skipped}."
    )


def payload_finding(change: PayloadChange) -> str:
    """The payload figure's finding: the pair a payload changed most (analysis.payload_change)."""
    skipped = (
        f" {change.flagged_pairs} pair(s) with a saturated point were not compared." if change.flagged_pairs else ""
    )
    if change.unavailable == ONE_PAYLOAD:
        return "No model was measured with more than one payload."
    if change.unavailable == NO_UNFLAGGED_PAIR:
        return f"No unflagged pair of payload points to compare {_delay_words(change.delay)}.{skipped}"
    return (
        f"{_delay_words(change.delay).capitalize()}: payload changes it most for {change.variant} — p50 "
        f"{fmt_ns(change.small_p50_ns)} with {change.small} vs {fmt_ns(change.large_p50_ns)} with {change.large} "
        f"({fmt_ratio(change.ratio)}), at a rate both sustain.{skipped}"
    )


def _payload_figure(c: PayloadComparison) -> Figure:
    """Capstone Figures 13/14: `delay` per payload, every payload of a model at one common rate."""
    import numpy as np

    label = DELAY_LABELS[c.delay]
    by = {(p.model, p.mechanism, p.payload): p for p in c.points}
    fig, ax = plots.new_figure(8.5, 3.8)
    width = 0.8 / len(c.payloads)
    x = np.arange(len(c.variants))
    for k, payload in enumerate(c.payloads):
        vals, hatch = [], []
        for model, mech in c.variants:
            pt = by.get((model, mech, payload))
            vals.append(pt.p50_ns if pt else np.nan)
            hatch.append(bool(pt and pt.flagged))
        bars = ax.bar(
            x + (k - (len(c.payloads) - 1) / 2) * width, vals, width, label=payload, color=plots.PALETTE[k % 8]
        )
        for bar, flagged in zip(bars, hatch):
            if flagged:
                bar.set_hatch("xx")
    ax.set_yscale("log")
    plots.format_ns_axis(ax.yaxis)
    ax.set_xticks(x, [f"{a}/{b}" for a, b in c.variants], rotation=35, ha="right", fontsize=7)
    ax.set_ylabel(f"p50 {label.lower()}")
    ax.legend(fontsize=8, title="payload", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    rate_text = ", ".join(f"{mm} {fmt_count(r)}/s" for mm, r in c.common_rates_per_s)
    return Figure(
        f"{label} per payload, at a rate every payload sustains",
        plots.to_svg(fig),
        f"p50 per model, mechanism and payload; log scale. Each model's payloads are offered one common rate, "
        f"{c.main_load_pct:g} % of the lowest of its payloads' own maximum rates ({rate_text}). Hatched: a point "
        "flagged saturated (not used by the finding). vector10000 is std::vector<int> of 10 000 elements.",
        payload_finding(c.change),
    )


def _sweep_figure(s: LoadSweep) -> Figure:
    fig, ax = plots.new_figure(9.5, 4.2)
    models = list(s.models)
    for line in s.lines:
        model = line.model
        color = (
            plots.PALETTE[MODEL_ORDER.index(model) % 8]
            if model in MODEL_ORDER
            else plots.PALETTE[models.index(model) % 8]
        )
        ax.plot(
            list(line.loads_pct),
            list(line.p99_ns),
            "-o" if line.mechanism == "future" else "--o",
            color=color,
            markersize=3,
            linewidth=1.2,
            label=f"{model}/{line.mechanism}",
        )
    ax.set_yscale("log")
    plots.format_ns_axis(ax.yaxis)
    ax.set_xlabel("offered load, % of the model's own max rate")
    ax.set_ylabel("p99 total delay")
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    g = s.growth
    if g:
        finding = (
            f"Among points not flagged saturated, the tail grows most for {g.model}/{g.mechanism}: p99 total "
            f"{fmt_ns(g.from_p99_ns)} at {g.from_load_pct:g} % → {fmt_ns(g.to_p99_ns)} at {g.to_load_pct:g} % of "
            f"max ({fmt_ratio(g.ratio)})."
        )
    else:
        finding = "Fewer than two unsaturated load points per model: no growth is stated."
    return Figure(
        f"Load sweep: p99 total delay vs load ({s.sweep_payload} payload)",
        plots.to_svg(fig),
        "Each model is offered a fraction of its own saturation rate, so the x axis means 'how close to "
        "its limit', not the same absolute rate.",
        finding,
    )


# ---- tables ------------------------------------------------------------------


def _delay_table(delay_rows: tuple[DelayRow, ...], main_load_pct: float, sweep_payload: str) -> Table:
    rows = []
    for r in delay_rows:

        def cell(value_ns: float, key: str, low: frozenset[str] = r.low_confidence) -> str:
            return fmt_ns(value_ns) + (" *" if key in low else "")

        rows.append(
            [
                r.variant,
                r.delay,
                fmt_count(r.samples),
                cell(r.p50_ns, "50"),
                cell(r.p90_ns, "90"),
                cell(r.p99_ns, "99"),
                cell(r.p999_ns, "99.9"),
                fmt_ratio(r.to_condvar),
                fmt_ratio(r.to_spin),
                fmt_ratio(r.to_thread_start),
            ]
        )
    return Table(
        f"Delays at {main_load_pct:g} % of each model's max rate ({sweep_payload} payload)",
        [
            "model/mechanism",
            "delay",
            "samples",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "p50 ÷ condvar",
            "p50 ÷ spin",
            "p50 ÷ thread start",
        ],
        rows,
        "Ratios divide the p50 by the p50 of the pinned baseline reference of the same run. * = fewer than 10 "
        "samples lie beyond this percentile. deferral_wait exists for deferred calls only.",
        numeric_from=2,
    )


def _max_rate_table(rates: MaxRates) -> Table:
    rows = [
        [
            r.model,
            f"{r.rate_per_s:,.0f}".replace(",", "\u2009"),
            fmt_ns(r.per_call_ns),
            fmt_ratio(r.budget_to_thread_start),
            str(r.ramp_steps),
            "yes" if r.saturation_found else "no (cap reached)",
        ]
        for r in rates.rows
    ]
    caption = (
        "Highest achieved rate of a sustained ramp step (offered rate doubled per step, then refined between "
        "the last sustained and the first saturated step). Per-call budget = 1 / max rate."
    )
    if rates.fastest_to_slowest is not None:
        caption += f" {rates.fastest} sustains {fmt_ratio(rates.fastest_to_slowest)} the rate of {rates.slowest}."
    return Table(
        "Maximum sustained rate per model",
        ["model", "max calls/s", "per-call budget", "budget ÷ thread start", "ramp steps", "saturation found"],
        rows,
        caption,
        numeric_from=1,
    )


def explain(c: SchedulingCause) -> str:
    """One sentence on where a point's scheduling delay comes from (analysis.scheduling_cause)."""
    if c.kind == NO_BACKLOG_DATA:
        return "no backlog data in this document"
    lead = f"p50 {fmt_ns(c.p50_ns)}: "
    if c.kind == OVERLOADED:
        return (
            lead + "overloaded — the backlog grew during the point (median lateness "
            f"{fmt_ns(c.lateness_first_quarter_p50_ns)} → {fmt_ns(c.lateness_last_quarter_p50_ns)} "
            "from the first to the last quarter of the calls), so the delay is queueing and keeps growing"
        )
    if c.kind == DEFERRED:
        return lead + "deferred calls run inside the request; no queue"
    parts = []
    if c.kind == QUEUEING:
        parts.append(
            f"queueing — the median call found {fmt_count(c.queue_p50)} earlier call(s) not yet started "
            f"(mean {c.queue_mean:.3g}, max {fmt_count(c.queue_max)}), though the backlog "
            "did not grow"
        )
        if c.stalled and c.stall_fraction is not None:
            parts.append(
                f"for {c.stall_fraction * 100:.0f} % of the point calls waited while no body started (gaps up to "
                f"{fmt_ns(c.stall_max_ns)})"
            )
        if c.waited_for_cpu and c.runqueue_share is not None:
            parts.append(
                f"the worker(s) sat runnable on a run queue, waiting for a CPU, {c.runqueue_share * 100:.0f} % of the "
                "point"
            )
    elif c.kind == HANDOFF_PARKED and c.parks_per_call is not None:
        parts.append(
            f"hand-off — the median call found an empty queue, and the worker had parked before "
            f"{c.parks_per_call * 100:.0f} % of the calls: a kernel wake-up per call"
        )
    elif c.kind == HANDOFF_RUNNING and c.parks_per_call is not None:
        parts.append(
            f"hand-off — the median call found an empty queue and a running worker "
            f"(parked before {c.parks_per_call * 100:.0f} % of the calls)"
        )
    else:
        parts.append("the median call found no call ahead of it")
    if c.why_saturated:
        parts.append(
            "saturated: "
            + ", ".join(c.why_saturated)
            + (
                f" (in flight up to {fmt_count(c.in_flight_max)}; the producer was held back)"
                if c.in_flight_limited
                else ""
            )
        )
    e = c.empty_queue
    if e is not None:
        parts.append(
            f"calls launched into an empty queue ({fmt_count(e.calls)}) had p50 {fmt_ns(e.p50_ns)}"
            + (f" ({fmt_ratio(e.to_reference)} the {REF_LABELS[e.reference]})" if e.to_reference is not None else "")
        )
    return lead + "; ".join(parts)


def _backlog_cell(r: BacklogRow) -> str:
    if not r.has_backlog:
        return "—"
    return "grew" if r.backlog_grew else "steady"


def _backlog_table(backlog: tuple[BacklogRow, ...]) -> Table:
    rows = []
    readings: list[tuple[str, str]] = []
    for r in backlog:
        rows.append(
            [
                f"{r.variant} @ {r.load_pct:g} %",
                fmt_count(r.offered_per_s),
                fmt_count(r.achieved_per_s),
                fmt_count(r.queue_p50),
                ("—" if r.in_flight_mean is None else f"{r.in_flight_mean:.3g} / {fmt_count(r.in_flight_max)}"),
                _backlog_cell(r),
                "—" if r.runqueue_share is None else f"{r.runqueue_share * 100:.0f} %",
                "—" if r.parks_per_call is None else f"{r.parks_per_call:.2f}",
                fmt_ns(r.empty_queue_p50_ns),
            ]
        )
        readings.append((f"{r.variant} @ {r.load_pct:g} %", explain(r.cause)))
    return Table(
        "What the calls met: queue, backlog and CPU (scheduling delay)",
        [
            "model/mechanism @ load",
            "offered/s",
            "achieved/s",
            "queue p50",
            "in flight mean / max",
            "backlog",
            "workers on run queue",
            "parks per call",
            "p50, empty queue",
        ],
        rows,
        "Computed after each point from the five stamps of every call (nothing added to the timed path). Queue = "
        "calls launched earlier and not yet started when a call was launched; in flight = launched and not yet "
        "received. Backlog 'grew' = the median lateness (val_received − intended start) of the last quarter of the "
        "calls exceeds the first quarter's by more than 5 % of the point: the point is overloaded. Workers on run "
        "queue = time the pool's threads were runnable but waiting for a CPU (/proc schedstat), as a share of the "
        "point. Parks per call = times a worker went to sleep in the kernel ÷ calls. p50, empty queue = scheduling "
        "delay of the calls that found no call ahead of them: the hand-off alone.",
        numeric_from=1,
        details=readings,
    )


def _met_word(met: bool | None) -> str:
    if met is None:
        return "—"
    return "met" if met else "not met"


def _targets_table(t: Targets) -> Table:
    rows = []
    readings: list[tuple[str, str]] = []
    for c in t.rows:
        name = f"{c.label} ({c.mechanism}, {c.load_pct:g} % load)"
        rows.append(
            [
                "  same, calls launched into an empty queue only" if c.empty_queue_only else name,
                fmt_ns(c.measured_p50_ns),
                fmt_ns(c.reference_p50_ns),
                fmt_ratio(c.ratio),
                f"≤ {c.limit:g}×",
                _met_word(c.met),
            ]
        )
        if c.empty_queue_only:
            readings.append(
                (f"{name}, empty queue only", f"{fmt_count(c.empty_queue_calls)} calls: the hand-off without queueing")
            )
        elif c.cause is not None:
            readings.append((name, explain(c.cause)))
    if t.resume:
        r = t.resume
        rows.append(
            [
                "coroutine resumed on the same thread, p50",
                fmt_ns(r.p50_ns),
                fmt_ns(r.target_ns),
                fmt_ratio(r.ratio),
                "≤ 1× (50 ns)",
                _met_word(r.met),
            ]
        )
        readings.append((rows[-1][0], "mean of 1000 resume→suspend round trips per sample"))
    return Table(
        "Performance targets, as measured (not asserted)",
        ["target", "measured p50", "reference", "ratio", "target", "verdict"],
        rows,
        "Targets from the study's issue, at the lowest load of the sweep and at the main load. Each is "
        "also shown for the calls that were launched into an empty queue (the hand-off without queueing): "
        "the baseline references are closed-loop (each hand-off starts when both threads are known to be "
        "running), while the benchmark's calls arrive open-loop, also while a worker is off its CPU.",
        numeric_from=1,
        details=readings,
    )


# ---- the capstone's figures beside this run ------------------------------------

FIGURE12_REPORTED = "std::thread beats std::async on scheduling and join delay, each at 75 % of its maximum rate"
FIGURES13_14_REPORTED = (
    "a larger promised value (void → long long → vector of 10 000) increases scheduling and join delay"
)


def figure12_check(f: Figure12) -> ReferenceCheck:
    """The capstone's Figure 12 beside this run (analysis.Figure12 says how it is judged)."""
    if f.verdict == UNAVAILABLE:
        if f.unavailable == FLAGGED:
            flagged = [cite(f"{m}/future {_delay_words(d)}", flags) for m, d, flags in f.flagged]
            why = f"a point it would compare was flagged at {f.load_pct:g} % of max: {', '.join(flagged)}"
        else:
            why = f"not measured in this run: {', '.join(f'{m} {_delay_words(d)}' for m, d in f.missing)}"
        return ReferenceCheck(
            "capstone Figure 12", FIGURE12_REPORTED, "unavailable", UNAVAILABLE, why, CAPSTONE_FIGURE12
        )
    here = "; ".join(
        f"{_delay_words(d.delay)} p99 std::thread {fmt_ns(d.thread_p99_ns)} vs std::async {fmt_ns(d.async_p99_ns)} "
        f"({fmt_ratio(d.thread_to_async)})"
        for d in f.delays
    )
    rates = (
        f"each at {f.load_pct:g} % of its own max rate (std::async {fmt_count(f.async_offered_per_s)}/s, "
        f"std::thread {fmt_count(f.thread_offered_per_s)}/s offered)"
    )
    deferred_text = (
        f"; deferred starts its body {fmt_ns(f.deferred_p50_ns)} after the request (p50): no hand-off"
        + (" [flagged: " + "; ".join(f.deferred_flags) + "]" if f.deferred_flags else "")
        if f.deferred_p50_ns is not None
        else ""
    )
    return ReferenceCheck(
        "capstone Figure 12", FIGURE12_REPORTED, here, f.verdict, f"{here}, {rates}{deferred_text}.", CAPSTONE_FIGURE12
    )


def figures13_14_check(f: Figures13_14) -> ReferenceCheck:
    """The capstone's Figures 13/14 beside this run (analysis.Figures13_14 says how they are judged)."""
    skipped_text = f"; {f.flagged_pairs} pair(s) with a flagged point not compared" if f.flagged_pairs else ""
    if f.verdict == UNAVAILABLE:
        return ReferenceCheck(
            "capstone Figures 13/14",
            FIGURES13_14_REPORTED,
            "unavailable",
            UNAVAILABLE,
            "std::async/future has no unflagged pair of payload points at a common rate in this run" + skipped_text,
            CAPSTONE_FIGURES13_14,
        )
    here = "std::async/future p50: " + ", ".join(
        f"{_delay_words(mv.delay)} {mv.small} → {mv.large} {fmt_ratio(mv.ratio)}" for mv in f.async_moves
    )
    rose = [_delay_words(mv.delay) for mv in f.async_moves if mv.rose]
    why = (
        f"{here}: a delay counts as rising at ×{PAYLOAD_CHANGE:g} or more (the capstone: a larger value, a longer "
        f"delay); rose: {', '.join(rose) or 'none'}; across every model (not judged), {f.changed_pairs} of "
        f"{f.compared_pairs} unflagged delay pairs changed that much either way{skipped_text}; at each model's "
        f"common rate, {f.main_load_pct:g} % of the lowest of its payloads' max rates."
    )
    return ReferenceCheck("capstone Figures 13/14", FIGURES13_14_REPORTED, here, f.verdict, why, CAPSTONE_FIGURES13_14)
