"""Study `threads`, the report section: the analysis values (analysis.py) → figures, tables and
sentences. Nothing is decided here: a sentence formats the values it is given."""

from __future__ import annotations

import math
from collections.abc import Callable

from tailscope.measure.verdict import MET as INTERVAL_MET
from tailscope.measure.verdict import UNDECIDED
from tailscope.report import plots
from tailscope.report.blocks import NOT_COMPARABLE, UNAVAILABLE, Figure, ReferenceCheck, Section, Source, Table
from tailscope.store import Store
from tailscope.studies.base import Study
from tailscope.studies.common import (
    FEW_BEYOND,
    LATENCY_COLUMNS,
    interval_cell,
    latency_cells,
    length_to_decide_text,
    stores_line,
)
from tailscope.studies.sources import BALLERINA_LOAD, BALLERINA_TAIL_CPU, BALLERINA_TAIL_IO
from tailscope.studies.threads.analysis import (
    ARTICLE_RISE,
    ARTICLE_SAME_THROUGHPUT,
    COMPARE,
    LOAD_CPU_BOUND,
    LOADAVG_MIN_WINDOW_S,
    P99_CPU_BOUND,
    P99_IO_BOUND,
    RULE_OF_THUMB_FACTOR,
    ArticleCheck,
    Combo,
    Point,
    Recommendation,
    ThreadComparison,
    ThreadsAnalysis,
    analyze,
)
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

INTRO = (
    "A front service with a processing pool of N threads calls one backend (≈ 1 ms of waiting, "
    "lognormal) per request: <em>passthrough</em> (IO-bound) and <em>transform</em> (the same plus a "
    "JSON transformation: CPU-bound at saturation). Variants: <em>blocking</em> (pool-blocking — the "
    "thread waits for the backend) and <em>non-blocking</em> (pool-callback — the call parks the "
    "request). Closed loop (one keep-alive connection per user, think time 0), then open loop at "
    "fractions of the best throughput. /proc sampled every 100 ms. See docs/threads-study.md."
)


def threads_section(study: Study, store: Store, run_id: str) -> Section:
    docs = [d for d in store.documents(run_id, study.name) if "threads_point" in d.document]
    sec = Section(id="threads", title=study.title, intro=INTRO)
    sec.notes.append(stores_line(d.document for d in docs))
    for s, name, variant, reason in store.unavailable(run_id):
        if s == study.name:
            sec.notes.append(f"{name} ({variant}) unavailable: {reason}")
    if not docs:
        sec.notes.append("no thread-count measurements were stored for this run")
        return sec
    a = analyze([d.document for d in docs])
    sec.notes += notes(a)
    sec.blocks += figures(a)
    sec.add_references(article_references(a), "The Ballerina article's 10 vs 100 threads vs here")
    return sec


# ---- the article's findings as reference rows -----------------------------------------------------------

ARTICLE_ROWS: dict[str, tuple[str, Source]] = {
    P99_CPU_BOUND: (
        "p99 higher with 100 threads than with 10 (message transformation, CPU-bound); TPS within ~7 %",
        BALLERINA_TAIL_CPU,
    ),
    P99_IO_BOUND: (
        "no significant p99 degradation with 100 threads (simple pass-through, IO-bound)",
        BALLERINA_TAIL_IO,
    ),
    LOAD_CPU_BOUND: (
        "load average up with many threads (transformation; 4 → 100 threads: load 5 → 37, run queue 8 → 41)",
        BALLERINA_LOAD,
    ),
}


def article_reference(r: ArticleCheck, a: ThreadsAnalysis) -> ReferenceCheck:
    """One of the article's findings at 10 vs 100 threads beside this run (analysis.ArticleCheck decides)."""
    reported, source = ARTICLE_ROWS[r.figure]
    ref = f"Ballerina article: {r.figure}, 100 vs 10 threads"
    c = r.comparison
    if c is None:
        here = "unavailable" if r.verdict == UNAVAILABLE else f"not measured at {COMPARE[0]} and {COMPARE[1]} threads"
        return ReferenceCheck(ref, reported, here, r.verdict, r.reason, source)
    thr = c.throughput_ratio
    tput = f"throughput {_pct_change(thr)}" if thr is not None else "throughput —"
    if r.figure == LOAD_CPU_BOUND:
        here = (
            f"{r.workload} non-blocking at {c.users} users: load {fmt_ratio(c.load_ratio)} "
            f"({_num(c.at_lo.inst_load, '.1f')} → {_num(c.at_hi.inst_load, '.1f')}), run queue "
            f"{fmt_ratio(c.runq_ratio)} ({_num(c.at_lo.procs_running, '.1f')} → {_num(c.at_hi.procs_running, '.1f')})"
        )
        quantity = (
            "instantaneous load, the figure the kernel's 1-minute load average smooths: the points ran "
            f"{a.window_s:.0f} s, less than the {LOADAVG_MIN_WINDOW_S:.0f} s the load average needs"
            if not a.loadavg_describes_points
            else "instantaneous load over the point's window"
        )
        criterion = f"the shape counts as a rise at ≥ {ARTICLE_RISE:g}×; {quantity}"
    else:
        here = (
            f"{r.workload} non-blocking at {c.users} users: p99 {fmt_ratio(c.p99_ratio)} "
            f"({fmt_ns(c.at_lo.p99_ns)} → {fmt_ns(c.at_hi.p99_ns)}), {tput}"
        )
        criterion = f"p99 counts as rising at ≥ {ARTICLE_RISE:g}×" + (
            f", throughput as the same within ±{ARTICLE_SAME_THROUGHPUT * 100:.0f} %"
            if r.figure == P99_CPU_BOUND
            else ""
        )
    if r.verdict in (NOT_COMPARABLE, UNAVAILABLE):
        return ReferenceCheck(ref, reported, here, r.verdict, f"{r.reason}. Measured all the same: {here}.", source)
    why = (
        f"{here}; {criterion}; the article ran Ballerina on a 4-vCPU instance, this graph on {a.cores} CPU(s) "
        "with a pool-callback front."
    )
    return ReferenceCheck(ref, reported, here, r.verdict, why, source)


def article_references(a: ThreadsAnalysis) -> list[ReferenceCheck]:
    return [article_reference(r, a) for r in a.article]


# ---- notes ---------------------------------------------------------------------------------------------


def _cpus(cpus: tuple[int, ...]) -> str:
    return str(list(cpus)) if cpus else "—"


def notes(a: ThreadsAnalysis) -> list[str]:
    """Flagged points, graphs that did not start, the graphs' health and pinning, then each
    (workload, variant)'s closing line."""
    out = [
        f"flagged: {p.workload} {p.variant} N={p.threads} users={p.users} ({p.kind}): " + "; ".join(p.flags)
        for p in a.flagged
    ]
    out += [f"{f.workload} {f.variant} N={f.threads}: the graph did not start — {f.reason}" for f in a.graphs.failed]
    g = a.graphs
    out.append(
        f"Threads the system refused to create: {g.thread_create_failures}; requests rejected by the services: "
        f"{g.rejections}. IO dispatchers per pool service: "
        f"{', '.join(map(str, g.io_dispatchers)) or 'not reported'} (fixed for every N). "
        f"Pinning: generator on CPU {_cpus(a.pinning.load_cpus)}, graph on CPU(s) {_cpus(a.pinning.graph_cpus)}."
    )
    for c in a.combos:
        cmp_ = a.comparisons[c]
        if cmp_:
            out.append(closing_line(c, cmp_, a.recommendations[c]))
    return out


def _pct_change(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f} %"


def closing_line(combo: Combo, c: ThreadComparison, rec: Recommendation) -> str:
    """A (workload, variant)'s closing note: the article's comparison, the recommended N beside the
    rule of thumb, and where the shape differs from the article."""
    w, v = combo
    thr = c.throughput_ratio
    text = (
        f"{w}, {v}, {c.hi} vs {c.lo} threads at {c.users} users: p99 {fmt_ratio(c.p99_ratio)}, "
        f"load {fmt_ratio(c.load_ratio)} (instantaneous), run queue {fmt_ratio(c.runq_ratio)}, throughput "
        + (_pct_change(thr) if thr is not None else "—")
        + f"; tail {c.at_lo.tail.verdict} at {c.lo}, {c.at_hi.tail.verdict} at {c.hi}. "
    )
    best = rec.best
    text += (
        f"Recommended N = {best.threads} ({fmt_count(best.achieved_per_s)}/s with p99 {fmt_ns(best.p99_ns)}"
        f"{_objective_text(rec)}) "
        if best
        else "No N met the p99 objective. "
    )
    if rec.analytic is not None:
        text += (
            f"vs the rule of thumb N ≈ {rec.cores} × (1 + {fmt_ns(rec.wait_ns)} / {fmt_ns(rec.compute_ns)}) "
            f"= {rec.analytic:.1f}"
        )
        if rec.rule_holds is not None:
            text += (
                " — the rule holds here"
                if rec.rule_holds
                else f" — the rule does not hold here (off by more than {RULE_OF_THUMB_FACTOR:g}×)"
            )
        text += "."
    else:
        text += "(analytic estimate unavailable: compute or wait not measured)."
    # Where the shape differs from the article (more threads → higher p99 and load, same throughput), say so.
    diffs = []
    if c.p99_did_not_rise:
        diffs.append(f"p99 did not rise (×{c.p99_ratio:.2f})")
    if c.load_did_not_rise:
        diffs.append(f"load did not rise (×{c.load_ratio:.2f})")
    if c.throughput_changed and thr is not None:
        diffs.append(f"throughput changed by {_pct_change(thr)}")
    if diffs:
        rq = c.at_hi.procs_running
        text += (
            f" Differs from the article: {', '.join(diffs)}; measured cause: the system run queue averaged "
            f"{rq:.1f} tasks on {rec.cores} graph CPU(s) at {c.hi} threads"
            if rq is not None
            else f" Differs from the article: {', '.join(diffs)}"
        )
        fr = c.at_hi.front_runnable
        text += f", the front had {fr:.1f} runnable threads on average." if fr is not None else "."
    return text


# ---- figures -------------------------------------------------------------------------------------------


def _panels(a: ThreadsAnalysis, metric: str, kind: str = "closed", x: str = "users") -> dict:
    panels = {}
    for w, v in a.combos:
        lines = {}
        for n in a.threads:
            pts = sorted(
                (getattr(p, x), getattr(p, metric))
                for p in a.points
                if (p.workload, p.variant, p.threads, p.kind) == (w, v, n, kind) and getattr(p, metric) is not None
            )
            if pts:
                lines[f"N={n}"] = ([p[0] for p in pts], [p[1] for p in pts])
        panels[f"{w} · {v}"] = lines
    return panels


def _finding_vs_threads(a: ThreadsAnalysis, metric: str, fmt: Callable[[float], str]) -> str:
    parts = []
    for c in a.combos:
        cmp_ = a.comparisons.get(c)
        change = cmp_.change(metric) if cmp_ else None
        if cmp_ and change:
            parts.append(
                f"{c[0]} {c[1]}: {fmt(change.at_lo)} at N={cmp_.lo} → {fmt(change.at_hi)} at N={cmp_.hi}"
                + (f" (×{change.ratio:.2f})" if change.ratio is not None else "")
            )
    return (
        "; ".join(parts) + (f" ({a.most_users} users)." if parts else "")
        or "no pair of thread counts to compare in this run."
    )


def _combo_grid(a: ThreadsAnalysis):
    """A figure with one panel per (workload, variant), two a row."""
    rows = math.ceil(len(a.combos) / 2)
    fig, _ = plots.new_figure(plots.PANEL_GRID_WIDTH_IN, plots.PANEL_ROW_HEIGHT_IN * rows + 0.6)
    fig.clf()
    return fig, fig.subplots(rows or 1, 2, squeeze=False)


def figures(a: ThreadsAnalysis) -> list[Figure | Table]:
    out: list[Figure | Table] = []
    cap = (
        f"Closed loop, {len(a.closed)} points, ≈ {a.window_s:.1f} s measured each; graph on {a.cores} CPU(s), "
        "the generator on another. Latency from the intended send time (tailscope-load)."
    )
    metrics: tuple[tuple[str, str, str, dict, Callable[[float], str]], ...] = (
        ("achieved_per_s", "Throughput vs users (one line per N)", "requests/s", {"log_x": True}, fmt_count),
        ("mean_ns", "Mean latency vs users", "mean latency", {"log_x": True, "log_y": True, "ns_y": True}, fmt_ns),
        ("p99_ns", "p99 latency vs users", "p99 latency", {"log_x": True, "log_y": True, "ns_y": True}, fmt_ns),
    )
    for metric, title, ylabel, kw, fmt in metrics:
        fig, _ = plots.line_panels(_panels(a, metric), "concurrent users", ylabel, **kw)
        out.append(Figure(title=title, svg=plots.to_svg(fig), caption=cap, finding=_finding_vs_threads(a, metric, fmt)))
    out.append(_load_figure(a))
    # Context switches per request vs N.
    fig, _ = plots.line_panels(
        _panels(a, "vcs_per_req", x="users"), "concurrent users", "voluntary cs / request", log_x=True
    )
    out.append(
        Figure(
            title="Context switches per request (front, voluntary)",
            svg=plots.to_svg(fig),
            caption="Summed over the front's threads from /proc/PID/task/*/status, start to end of the "
            "measured window, ÷ requests served in it. Involuntary switches and run-queue wait per "
            "request are in the table below.",
            finding="Voluntary: "
            + _finding_vs_threads(a, "vcs_per_req", lambda v: f"{v:.2f}")
            + " Involuntary: "
            + _finding_vs_threads(a, "ics_per_req", lambda v: f"{v:.2f}"),
        )
    )
    # Open loop: p99 vs achieved rate.
    if a.has_open:
        fig, _ = plots.line_panels(
            _panels(a, "p99_ns", kind="open", x="achieved_per_s"),
            "achieved requests/s",
            "p99",
            log_y=True,
            ns_y=True,
        )
        worst = a.worst_open
        out.append(
            Figure(
                title="p99 vs load (open loop, fractions of each N's best throughput)",
                svg=plots.to_svg(fig),
                caption="Latency from the intended send time; connections = the most users of the sweep.",
                finding=f"highest open-loop p99: {fmt_ns(worst.p99_ns)} ({worst.workload} {worst.variant} "
                f"N={worst.threads} at {fmt_count(worst.achieved_per_s)}/s)"
                if worst
                else "no open-loop point has a p99.",
            )
        )
    out.append(_ccdf_figure(a))
    out.append(_tail_table(a))
    out.append(_points_table(a))
    out.append(_recommendation_table(a))
    return out


def _load_figure(a: ThreadsAnalysis) -> Figure:
    """Load and run queue vs N (bars), at the most users."""
    fig, grid = _combo_grid(a)
    for ax, c in zip(grid.flat, a.combos):
        rows = {p.threads: p for p in a.closed if p.combo == c and p.users == a.top_users}
        ns = sorted(rows)
        series = {
            "instantaneous load": [rows[n].inst_load for n in ns],
            "run queue (procs_running)": [rows[n].procs_running for n in ns],
            "front runnable threads": [rows[n].front_runnable for n in ns],
        }
        if a.loadavg_describes_points:
            series["loadavg 1 min (end)"] = [rows[n].loadavg_1m for n in ns]
        plots.grouped_bars(ax, [f"N={n}" for n in ns], series, "tasks")
        ax.set_title(f"{c[0]} · {c[1]}", fontsize=9)
    for ax in list(grid.flat)[len(a.combos) :]:
        ax.set_visible(False)
    la_note = (
        ""
        if a.loadavg_describes_points
        else " The kernel's 1-minute load average is not shown: points ran "
        f"{a.window_s:.1f} s < {LOADAVG_MIN_WINDOW_S:.0f} s, so it would mostly show earlier points (unavailable, not 0)."
    )
    return Figure(
        title=f"Load and run-queue length vs N ({a.top_users} users)",
        svg=plots.to_svg(fig),
        caption="Instantaneous load = mean of runnable + uninterruptible tasks over the point (system, "
        "less the sampler); run queue = procs_running; front runnable = threads of the front in "
        "state R." + la_note,
        finding=_finding_vs_threads(a, "inst_load", lambda v: f"{v:.1f}")
        + " Run queue: "
        + _finding_vs_threads(a, "procs_running", lambda v: f"{v:.1f}"),
    )


def _ccdf_figure(a: ThreadsAnalysis) -> Figure:
    fig, grid = _combo_grid(a)
    verdicts = []
    for ax, c in zip(grid.flat, a.combos):
        for p in sorted(a.closed, key=lambda p: p.threads):
            t = p.tail
            if p.combo != c or p.users != a.top_users or t.ccdf is None or t.fit is None:
                continue
            xs, surv = t.ccdf
            plots.ccdf_axis(
                ax,
                xs,
                surv,
                f"N={p.threads} ({t.verdict})",
                (t.fit.threshold_ns, t.fit.tail_fraction, t.fit.exponential_scale_ns),
            )
            verdicts.append(f"{c[0]} {c[1]} N={p.threads}: {t.verdict}")
        ax.set_title(f"{c[0]} · {c[1]}", fontsize=9)
        ax.set_ylabel("P(latency > x)", fontsize=8)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    for ax in list(grid.flat)[len(a.combos) :]:
        ax.set_visible(False)
    return Figure(
        title=f"Latency survival (log-log CCDF) at {a.top_users} users, against the fitted exponential",
        svg=plots.to_svg(fig),
        caption="Solid: empirical P(X > x) from the point's HdrHistogram (samples reconstructed from the "
        "buckets, ≤ 0.1 % off). Dashed: the exponential tail fitted to the excesses over the Hill "
        "threshold. A power-law tail is a straight line here and bends above the dashed curve.",
        finding="; ".join(verdicts) or "no tail could be analysed (too few samples per point)",
    )


# ---- tables --------------------------------------------------------------------------------------------


def _num(v: float | None, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def _tail_table(a: ThreadsAnalysis) -> Table:
    rows = []
    for p in sorted(a.points, key=lambda p: (p.workload, p.variant, p.kind, p.threads, p.users)):
        t, fit = p.tail, p.tail.fit
        label = [f"{p.workload} · {p.variant}", p.kind, str(p.threads), str(p.users)]
        if t.kind is not None and fit is not None:
            rows.append(
                label
                + [
                    fmt_count(fit.n),
                    str(fit.k),
                    f"{_num(fit.alpha, '.2f')} [{_num(fit.alpha_ci_low, '.2f')}, {_num(fit.alpha_ci_high, '.2f')}]",
                    _num(fit.xi, "+.2f"),
                    _num(fit.mean_excess_slope, "+.2f"),
                    t.kind,
                ]
            )
        else:
            rows.append(label + ["—", "—", "—", "—", "—", f"unavailable: {t.unavailable}"])
    return Table(
        title="Tail index per point",
        columns=[
            "workload · variant",
            "loop",
            "N",
            "users",
            "samples",
            "k",
            "Hill α [95 % CI]",
            "GPD ξ",
            "mean-excess slope",
            "verdict",
        ],
        rows=rows,
        numeric_from=2,
        wrap_columns=(9,),
        caption="Hill estimator on the top k = ⌊√n⌋ latencies (bootstrap CI); verdict from the generalized "
        "Pareto shape ξ of the same excesses (heavy: CI above 0; light: below; else exponential-like); "
        "mean-excess slope > 0 corroborates a heavy tail. docs/threads-study.md.",
    )


def _points_table(a: ThreadsAnalysis) -> Table:
    rows = []
    for p in sorted(a.closed, key=lambda p: (p.workload, p.variant, p.threads, p.users)):
        rows.append(
            [
                f"{p.workload} · {p.variant}",
                str(p.threads),
                str(p.users),
                fmt_count(p.achieved_per_s),
                *latency_cells(
                    p.mean_ns, p.p50_ns, p.p90_ns, p.p99_ns, p.p999_ns, p.count, p.low_confidence, p.intervals
                ),
                "—" if p.cpu_pct is None else f"{p.cpu_pct:.0f} %",
                _num(p.ics_per_req, ".2f"),
                fmt_ns(p.rq_wait_per_req_ns),
                "; ".join(p.flags) or "",
            ]
        )
    return Table(
        title="Every closed-loop point",
        columns=[
            "workload · variant",
            "N",
            "users",
            "req/s",
            *LATENCY_COLUMNS,
            "CPU (system)",
            "invol. cs / req",
            "run-queue wait / req",
            "flags",
        ],
        rows=rows,
        numeric_from=1,
        wrap_columns=(13,),
        caption="p99 and p99.9 [lo–hi]: the percentile's distribution-free 95 % interval (order statistics); "
        f"[{FEW_BEYOND}]: fewer than 10 samples beyond it; [—]: no interval (fewer than 368 samples for a p99, "
        "3688 for a p99.9, or a document from before intervals). Run-queue wait: the front's threads' time "
        "runnable but not running (/proc/PID/task/*/schedstat), per request.",
    )


def _objective_text(rec: Recommendation) -> str:
    """The recommended point's p99 against the objective by its 95 % interval; "" without one (the
    estimate chose it, as the sentence already says)."""
    v, best = rec.objective, rec.best
    if best is None or best.p99_ci is None or v.verdict == "":
        return ""
    cell = interval_cell(best.p99_ci, "99" in best.low_confidence)
    if v.verdict == UNDECIDED:
        return f" {cell}, {UNDECIDED} against the objective: {length_to_decide_text(v)}"
    return f" {cell}, {'within' if v.verdict == INTERVAL_MET else 'above'} the objective by its 95 % interval"


def _best_cells(best: Point | None) -> list[str]:
    if best is None:
        return ["none met it", "—", "—"]
    p99 = fmt_ns(best.p99_ns)
    if best.p99_ci is not None and best.p99_ns is not None:
        p99 += " " + interval_cell(best.p99_ci, "99" in best.low_confidence)
    return [str(best.threads), fmt_count(best.achieved_per_s), p99]


def _recommendation_table(a: ThreadsAnalysis) -> Table:
    rows = []
    for c in a.combos:
        rec = a.recommendations[c]
        rows.append(
            [
                f"{c[0]} · {c[1]}",
                *_best_cells(rec.best),
                fmt_ns(rec.compute_ns),
                fmt_ns(rec.wait_ns) + (f" (N={rec.wait_at[0]}, {rec.wait_at[1]} users)" if rec.wait_at else ""),
                f"{rec.analytic:.1f}" if rec.analytic is not None else "unavailable",
            ]
        )
    return Table(
        title=f"Recommended thread count (p99 ≤ {fmt_ns(a.objective_ns)})",
        columns=[
            "workload · variant",
            "recommended N",
            "req/s",
            "p99",
            "compute / req",
            "wait / req",
            f"analytic N ≈ {a.cores} × (1 + wait/compute)",
        ],
        rows=rows,
        numeric_from=1,
        caption="Recommended: the N whose best closed-loop point has the highest throughput with p99 within "
        "the objective and no errors. Compute: the front's CPU time per request (median over points); "
        "wait: the least-loaded point's mean latency minus compute (queueing at that point, e.g. "
        "with 10 users in the quick form, inflates it; the full form has a 1-user point). Cores: the "
        "graph's CPUs.",
    )
