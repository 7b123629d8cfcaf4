"""Study `placement`, report: the values of analysis.py → the report section (tables, figures,
notes). Nothing is decided here: every sentence formats values it is given."""

from __future__ import annotations

from typing import Any

from tailscope.lab.placement import cpu_text
from tailscope.measure.verdict import MET as INTERVAL_MET
from tailscope.measure.verdict import UNDECIDED
from tailscope.report import plots
from tailscope.report.blocks import UNAVAILABLE, Figure, ReferenceCheck, Section, Table
from tailscope.store import Store
from tailscope.studies.common import length_to_decide_text, study_section
from tailscope.studies.placement.analysis import (
    ANALYSIS,
    KNAPSACK_BETTER_SHARE,
    LOAD,
    NO_MEASUREMENTS,
    SVC,
    IpcVsLatency,
    KnapsackVsColocated,
    LatencyPlacements,
    PlacementSummary,
    has_measurements,
    summarize,
)
from tailscope.studies.placement.run import LOAD_FRACTION, MIX, MODEL, SAMPLE_INTERVAL_S
from tailscope.studies.sources import NTUA_IPC_VS_LATENCY, NTUA_KNAPSACK, NTUA_LATENCY_PLACEMENTS
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

INTRO = (
    "DeathStarBench hotel reservation (topologies/hotel.yaml: 8 services; memcached and MongoDB's roles "
    "real servers placed like any service, or timed waits, as the stores line says) under the request mix search 60 % / recommend 39 % / login 0.5 % / reserve 0.5 %, "
    f"{MODEL} model. Each service's CPU need is sized from 100 ms /proc samples; each tested service "
    "runs alone on the performance pool beside tailscope-stress kernels; its sensitivity score "
    "decides, by a 0-1 knapsack, which services get the performance pool; the placements are then "
    "compared with colocated, random and latency-driven ones at the same offered rate."
)


def placement_section(study: Any, store: Store, run_id: str) -> Section:
    docs = store.documents(run_id, study.name)
    sec = study_section(study, store, run_id, intro=INTRO, graphs=True)
    analysis = next((d.document for d in docs if d.engine == ANALYSIS), None)
    if not has_measurements(analysis):
        sec.notes.append(NO_MEASUREMENTS)
        return sec
    s = summarize([d.document for d in docs if d.engine in (LOAD, SVC)], analysis)
    sec.intro += (
        f" Pools: general = CPUs {cpu_text(s.pools_general)} (with the load generator), performance = CPUs "
        f"{cpu_text(s.pools_performance)} ({s.pools_how}); same-core interference = {s.same_core}; "
        f"offered rate {fmt_count(s.rate_per_s)}/s."
    )
    sec.notes += summary_notes(s)
    sec.blocks.append(_sizing_table(s))
    if s.heatmap.available:
        sec.blocks.append(_heatmap_figure(s))
    else:
        sec.notes.append("slowdown heatmap unavailable: no interference point was measured")
    reasons = "; ".join(s.counter_reasons) or "no service was measured in isolation"
    if s.ipc_bars_available:
        sec.blocks.append(_ipc_figure(s))
    else:
        sec.notes.append(f"IPC/MPKI bars unavailable: {reasons}")
    if s.topdown_available:
        sec.blocks.append(_topdown_figure(s))
    else:
        sec.notes.append(f"top-down bars unavailable: {reasons}")
    if s.outcomes:
        sec.blocks.append(_scenario_table(s))
        sec.blocks.append(_scenario_figure(s))
    sec.add_references(thesis_references(s), "The thesis's placements vs here")
    return sec


# ---- the thesis's results beside this run's ----------------------------------------------------------

KNAPSACK_REPORTED = (
    "the knapsack placement (services valued by IPC) gave the best latency and tail latency, under 30 ms, "
    "improving on colocated; request rate raised until latency passed 50 ms"
)
LATENCY_REPORTED = (
    "three hand-made placements pairing services sensitive to different resources did not improve on colocated"
)
IPC_REPORTED = "IPC lowest under the memory-bandwidth kernel, while tail latency was among its lowest there"


def _vs(o, base) -> str:
    return f"{fmt_ns(o.p50_ns)} / {fmt_ns(o.p99_ns)}" + (
        f" vs {fmt_ns(base.p50_ns)} / {fmt_ns(base.p99_ns)}" if base else ""
    )


def knapsack_reference(k: KnapsackVsColocated, s: PlacementSummary) -> ReferenceCheck:
    ref = "NTUA thesis §6.3.5: knapsack vs colocated"
    if k.knapsack is None or k.colocated is None:
        return ReferenceCheck(ref, KNAPSACK_REPORTED, "unavailable", k.verdict, k.reason, NTUA_KNAPSACK)
    here = (
        f"knapsack p50 / p99 {_vs(k.knapsack, k.colocated)} colocated "
        f"({fmt_ratio(k.p50_ratio)} / {fmt_ratio(k.p99_ratio)})"
    )
    setup = (
        f"the knapsack's values here are scores from {' / '.join(s.score_bases) or 'no score'} (the thesis: IPC); "
        f"the rate is {LOAD_FRACTION * 100:.0f} % of the closed-loop ceiling ({fmt_count(s.rate_per_s)}/s; the thesis: the "
        "rate at which latency passed 50 ms)"
    )
    if k.verdict == UNAVAILABLE:
        return ReferenceCheck(ref, KNAPSACK_REPORTED, here, k.verdict, f"{k.reason}; {setup}.", NTUA_KNAPSACK)
    why = (
        f"{here}; a latency counts as improved at ≤ {KNAPSACK_BETTER_SHARE:g}× colocated's{_by_intervals(k)}; {setup}."
    )
    return ReferenceCheck(ref, KNAPSACK_REPORTED, here, k.verdict, why, NTUA_KNAPSACK)


def _by_intervals(k: KnapsackVsColocated) -> str:
    """The two improvements as the 95 % intervals judge them (KnapsackVsColocated.p50_verdict/p99_verdict)."""
    said = []
    for name, v in (("p50", k.p50_verdict), ("p99", k.p99_verdict)):
        if v.verdict == "":
            said.append(f"{name} unavailable ({v.unavailable})")
        elif v.verdict == UNDECIDED:
            said.append(f"{name} {UNDECIDED} ({length_to_decide_text(v)})")
        else:
            said.append(f"{name} {'improved' if v.verdict == INTERVAL_MET else 'not improved'}")
    return "; by the two points' 95 % intervals: " + ", ".join(said)


def latency_reference(lp: LatencyPlacements) -> ReferenceCheck:
    ref = "NTUA thesis §6.3.5: latency1–3 vs colocated"
    o = lp.latency_driven
    here = (
        f"latency-driven (not the thesis's) p99 {fmt_ns(o.p99_ns)}, {fmt_ratio(o.p99_vs_colocated)} of colocated"
        if o is not None
        else "latency-driven placement not measured"
    )
    why = lp.reason + (f". Measured all the same: {here}." if o is not None else ".")
    return ReferenceCheck(ref, LATENCY_REPORTED, here, lp.verdict, why, NTUA_LATENCY_PLACEMENTS)


def ipc_reference(c: IpcVsLatency) -> ReferenceCheck:
    ref = "NTUA thesis §6.3.4: IPC vs tail latency"
    if not c.services:
        return ReferenceCheck(ref, IPC_REPORTED, "unavailable", c.verdict, c.reason, NTUA_IPC_VS_LATENCY)
    here = "; ".join(
        f"{r.service}: IPC cut most by {r.ipc_kernel} ({100 * r.ipc_loss:+.0f} %), p99 raised most by "
        f"{r.latency_kernel} ({100 * r.latency_rise:+.0f} %)"
        for r in c.services
    )
    differ = [r.service for r in c.services if r.disagree]
    why = (
        f"{here}; each kernel at its highest intensity measured, end-to-end p99 (the thesis's wrk2 tail); the two "
        f"figures point at different kernels for {', '.join(differ) or 'no service'} of {len(c.services)}."
    )
    return ReferenceCheck(ref, IPC_REPORTED, here, c.verdict, why, NTUA_IPC_VS_LATENCY)


def thesis_references(s: PlacementSummary) -> list[ReferenceCheck]:
    """The thesis's three placement results beside this run, as the section's reference rows."""
    out = []
    if s.knapsack_check is not None:
        out.append(knapsack_reference(s.knapsack_check, s))
    if s.latency_check is not None:
        out.append(latency_reference(s.latency_check))
    if s.ipc_check is not None:
        out.append(ipc_reference(s.ipc_check))
    return out


# ---- notes -----------------------------------------------------------------------------------------


def summary_notes(s: PlacementSummary) -> list[str]:
    """The section's findings in words: the lowest p99, an empty knapsack, the most sensitive service."""
    notes = []
    if s.lowest_p99 is not None:
        best = s.outcome(s.lowest_p99)
        notes.append(
            f"Lowest end-to-end p99: {best.name} ({fmt_ns(best.p99_ns)}"
            + (f", {fmt_ratio(best.p99_vs_colocated)} of colocated" if best.p99_vs_colocated else "")
            + "); "
            + ", ".join(
                f"{o.name} {fmt_ns(o.p99_ns)} ({fmt_ratio(o.p99_vs_colocated)})" for o in s.outcomes if o is not best
            )
            + "."
            + (
                f" Flagged generator-limited (the generator's own lag, not the graph, may set the tail): "
                f"{', '.join(s.generator_limited)}."
                if s.generator_limited
                else ""
            )
        )
    if s.knapsack_placed_none:
        scored = ", ".join(f"{k} {v.score:.3f}" for k, v in s.scores.items() if v.score is not None)
        notes.append(
            "The knapsack placed no service on the performance pool: no tested service had a score > 0 "
            f"(scores: {scored or 'none'}); "
            "its scenario is then the general pool for everything."
        )
    if s.most_sensitive is not None:
        notes.append(
            f"Most sensitive service: {s.most_sensitive} (score {s.scores[s.most_sensitive].score:.3f}); scores from "
            + " / ".join(s.score_bases)
            + (
                " — hardware counters were unavailable, so the score uses latency and CPU time."
                if s.scored_without_counters
                else "."
            )
        )
    return notes


# ---- figures and tables -----------------------------------------------------------------------------


def _sizing_table(s: PlacementSummary) -> Table:
    rows = [
        [
            r.service,
            f"{r.peak_pct:.0f} %" if r.peak_pct is not None else "unavailable",
            f"{r.p95_pct:.0f} %" if r.p95_pct is not None else "unavailable",
            fmt_count(r.weight_millicores),
            f"{r.score:.3f}" if r.score is not None else "not tested",
            r.pool,
        ]
        for r in s.sizing
    ]
    return Table(
        title="Sizing, sensitivity score and the knapsack's choice",
        columns=["service", "CPU peak", "CPU p95", "weight (millicores)", "score", "knapsack pool"],
        rows=rows,
        caption=f"CPU % of each service process from /proc every {SAMPLE_INTERVAL_S * 1000:.0f} ms at the study's "
        f"rate, unpinned; weight = peak × 10 (millicores), capacity {fmt_count(s.capacity_millicores)}.",
    )


def _heatmap_finding(s: PlacementSummary) -> str:
    top = s.heatmap.largest
    if top is None:
        return "no interference point gave a slowdown of the score metrics"
    kernel, instances, position = top.interference
    return f"largest slowdown: {top.service} with {kernel}×{instances} ({position}): {100 * top.slowdown:+.0f} %"


def _heatmap_figure(s: PlacementSummary) -> Figure:
    import numpy as np

    hm = s.heatmap
    fig, ax = plots.new_figure(height_in=1.2 + 0.35 * len(hm.services))
    data = np.array([[np.nan if v is None else 100 * v for v in row] for row in hm.cells], dtype=float)
    im = ax.imshow(data, aspect="auto", cmap="OrRd")
    ax.set_yticks(range(len(hm.services)))
    ax.set_yticklabels(hm.services, fontsize=8)
    ax.set_xticks(range(len(hm.columns)))
    ax.set_xticklabels([f"{k}×{n}\n{p}" for k, n, p in hm.columns], fontsize=7)
    fig.colorbar(im, ax=ax, label="slowdown %")
    return Figure(
        title="Slowdown by interference kernel and intensity",
        svg=plots.to_svg(fig),
        caption="Mean relative slowdown of the score metrics of the tested service (isolated on the performance "
        "pool) with tailscope-stress kernels beside it; blank = not measured.",
        finding=_heatmap_finding(s),
    )


def _topdown_figure(s: PlacementSummary) -> Figure:
    fig, ax = plots.new_figure()
    groups = list(s.topdown_dominant)
    parts = sorted({k for g in groups for k in s.counter_bars[g] if k.startswith("topdown.")})
    bottom = [0.0] * len(groups)
    for part in parts:
        vals = [s.counter_bars[g].get(part) or 0.0 for g in groups]
        ax.bar(groups, vals, bottom=bottom, label=part.split(".", 1)[1])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("share of pipeline slots")
    ax.legend(fontsize=7)
    return Figure(
        title="Top-down level 1 per service (isolated)",
        svg=plots.to_svg(fig),
        caption="Pipeline slots by top-down category, each service alone on the performance pool.",
        finding="; ".join(f"{g}: mostly {part}" for g, part in s.topdown_dominant.items()),
    )


def _ipc_figure(s: PlacementSummary) -> Figure:
    fig, ax = plots.new_figure()
    groups = list(s.counter_bars)
    keys = ["ipc", "l1d_mpki", "l1i_mpki", "llc_mpki", "dtlb_mpki", "itlb_mpki", "branch_mpki"]
    series = {k: [v if isinstance(v := s.counter_bars[g].get(k), (int, float)) else None for g in groups] for k in keys}
    plots.grouped_bars(ax, groups, series, "IPC / misses per 1000 instructions")
    best = s.highest_ipc
    return Figure(
        title="IPC and MPKI per service (isolated)",
        svg=plots.to_svg(fig),
        caption="Per-service perf_event counter group (inherit), each service alone on the performance pool.",
        finding=f"highest IPC: {best} ({s.counter_bars[best]['ipc']:.2f})" if best else "IPC unavailable",
    )


def _scenario_table(s: PlacementSummary) -> Table:
    rows = []
    for o in s.outcomes:
        placed = s.placements[o.name]
        rows.append(
            [
                o.name,
                "none (unpinned)" if placed.performance is None else (", ".join(placed.performance) or "none"),
                "all (unpinned)" if placed.general is None else ", ".join(placed.general),
                fmt_ns(o.p50_ns),
                fmt_ns(o.p99_ns) + (" *" if o.p99_low_confidence else ""),
                fmt_ratio(o.p99_vs_colocated),
                fmt_count(o.achieved_per_s),
                fmt_count(o.errors) + (" (generator-limited)" if o.generator_bottleneck else ""),
            ]
        )
    return Table(
        title="Placements compared (the thesis's table: scenario × pool)",
        columns=[
            "scenario",
            "performance pool",
            "general pool",
            "p50",
            "p99",
            "p99 vs colocated",
            "achieved /s",
            "errors",
        ],
        rows=rows,
        caption=f"Same offered rate ({fmt_count(s.rate_per_s)}/s, mix {', '.join(f'{p} {w:g}' for p, w in MIX)}), "
        "one run, end-to-end latency from the intended send time. "
        + " ".join(f"{n}: {sc.how}." for n, sc in s.placements.items()),
        numeric_from=3,
        wrap_columns=(1, 2),
    )


def _scenario_figure(s: PlacementSummary) -> Figure:
    fig, ax = plots.new_figure()
    names = [o.name for o in s.outcomes]
    plots.grouped_bars(
        ax,
        names,
        {"p50": [o.p50_ns for o in s.outcomes], "p99": [o.p99_ns for o in s.outcomes]},
        "latency",
    )
    plots.format_ns_axis(ax.yaxis)
    best = s.outcome(s.lowest_p99) if s.lowest_p99 is not None else None
    return Figure(
        title="End-to-end p50 / p99 per placement",
        svg=plots.to_svg(fig),
        caption="latency_intended of the whole mix; a missing bar is unavailable (no request completed).",
        finding=f"lowest p99: {best.name} ({fmt_ns(best.p99_ns)})" if best else "no scenario measured a p99",
    )
