"""Study `contention`: async-call delays vs client connections (the capstone's Figure 9).

The compose-post graph (the socialnet study's `graph()`) runs under each
concurrency model with tracing on; tailscope-load drives it closed loop with
20, 40, 60, 80 and 100 keep-alive connections, one fresh graph per point so
each point's traces are its own. Each point's traces go through the critical
path engine (`analyze.run_critpath`), whose measurements give the scheduling
and join delay of every async call (tailscope's 5-timestamp probe) and of
every RPC. The report draws their CDFs per connection count and p99 against
connections, and says whether the capstone's shape — tails ×3 from 20 to 80
connections, ×4 at 100 — holds here, from the measured ratios. The capstone raised the
connections under wrk2, which sends at the rate it is given; closed loop, every point sits at the
graph's ceiling, so the check says "not comparable here" unless the points ran open loop at one
fixed rate (option `contention_rate`, requests/s).

Quick form: std-async and coroutine at 20, 60 and 100 connections, 1 s points
(docs/contention-study.md); full form: every model at every count, 4 s points.
Tiny form (tests): options `contention_models`, `contention_connections`.
"""

from __future__ import annotations

from pathlib import Path

from tailscope.lab import topology
from tailscope.lab.engines import run_engine
from tailscope.lab.graph import LOAD, PATH, graph, svc_models
from tailscope.lab.load import http_load_args
from tailscope.measure.measurement import achieved_per_s
from tailscope.report import plots
from tailscope.report.blocks import (
    DOES_NOT_HOLD,
    HOLDS,
    NOT_COMPARABLE,
    PARTLY,
    UNAVAILABLE,
    Figure,
    ReferenceCheck,
    Section,
    Table,
)
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.common import point_times, record_stores, requested_stores, study_section
from tailscope.studies.sources import CAPSTONE_FIGURE9
from tailscope.traces.critpath import run_critpath
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

CRITPATH = "tailscope-critpath"
CONNECTIONS_FULL = [20, 40, 60, 80, 100]
CONNECTIONS_QUICK = [20, 60, 100]
MODELS_QUICK = ["std-async", "coroutine"]
TRACE_SAMPLE = 0.05  # enough async-call samples in a 1 s point, small enough traces
# The capstone's Figure 9: p99 delay at 80 and 100 connections over the one at 20 ("increased three
# folds and quadrupled when increased to 100").
REFERENCE_RATIOS = {80: 3.0, 100: 4.0}
# A series holds when its growth reaches this share of the capstone's factor at each count compared
# (×2.4 at 80, ×3.2 at 100): the capstone's own words round its growth ("three folds", "quadrupled").
REFERENCE_SHARE = 0.8
DELAYS = (("probe_scheduling", "scheduling"), ("probe_join", "join"))


class ContentionStudy:
    name = "contention"
    title = "Async-call delays vs connections (contention sweep)"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        full = ctx.form == "full"
        duration, warmup = point_times(ctx, quick=(1.0, 0.3), full=(4.0, 1.0), floor=(0.3, 0.1))
        models = list(ctx.options.get("contention_models") or (svc_models() if full else MODELS_QUICK))
        counts = [int(c) for c in ctx.options.get("contention_connections") or []] or (
            CONNECTIONS_FULL if full else CONNECTIONS_QUICK
        )
        bad = [c for c in counts if not 1 <= c <= 10_000]
        if bad:
            raise ValueError(f"contention_connections: {bad[0]} is outside 1..10000")
        rate = float(ctx.options.get("contention_rate") or 0)  # 0: closed loop (the default)
        if not 0 <= rate <= 1e6:
            raise ValueError(f"contention_rate: {rate:g} is outside 0..1000000 requests/s")
        art = Path(ctx.artifacts_dir) / "contention"
        art.mkdir(parents=True, exist_ok=True)
        topo_json = topology.to_engine_json(topology.SOCIALNET, art / "socialnet.json")
        docs: list[EngineDocument] = []
        total = len(models) * len(counts)
        for i, model in enumerate(models):
            for j, connections in enumerate(counts):
                point = f"{model}/c{connections}"
                ctx.progress(f"contention: {model} c={connections}", (i * len(counts) + j) / total)
                traces = art / "traces" / model / str(connections)
                with graph(
                    topo_json,
                    model,
                    art / f"graph-{model}-{connections}.json",
                    TRACE_SAMPLE,
                    traces,
                    stores=requested_stores(ctx.options),
                ) as (port, ready):
                    load = record_stores(run_engine_load(port, connections, duration, warmup, rate), ready)
                load["contention_point"] = {"model": model, "connections": connections}
                docs.append(EngineDocument(self.name, LOAD, load, point))
                files = sorted(traces.glob("**/traces.jaeger.json"))
                if not files:
                    continue  # the section says which points have no traces
                doc = run_critpath([str(f) for f in files], artifacts_dir=art / "analyze" / model / str(connections))
                doc["contention_point"] = {"model": model, "connections": connections}
                docs.append(EngineDocument(self.name, CRITPATH, doc, point))
        return docs

    def section(self, store: Store, run_id: str) -> Section:
        sec = study_section(
            self,
            store,
            run_id,
            graphs=True,
            intro="The capstone's Figure 9: as client connections grow, how the scheduling and join delay of the "
            f"graph's async calls grows, per concurrency model. On {PATH}, closed loop unless the run set "
            f"`contention_rate`, tracing at {TRACE_SAMPLE * 100:.0f} % sampling, a fresh graph per point.",
        )
        docs = store.documents(run_id, self.name)
        loads = {d.point: d.document for d in docs if d.engine == LOAD}
        analyses = {d.point: d.document for d in docs if d.engine == CRITPATH}
        if not loads:
            sec.notes.append("no contention measurements were stored for this run")
            return sec
        for point in sorted(set(loads) - set(analyses)):
            sec.notes.append(f"{point}: delays unavailable: the graph wrote no traces at this point")
        df = store.measurements(run_id, self.name)
        cdf = store.cdf(run_id, self.name)
        table = p99_table(loads, df)
        sec.blocks.append(table[0])
        for key, label in DELAYS:
            fig = _cdf_figure(df, cdf, key, label)
            if fig:
                sec.blocks.append(fig)
        fig = _p99_figure(table[1])
        if fig:
            sec.blocks.append(fig)
        sec.add_references([figure9_check(table[1], fixed_rate(loads))])
        return sec


def run_engine_load(port: int, connections: int, duration_s: float, warmup_s: float, rate: float = 0.0) -> dict:
    args = http_load_args(port, PATH, connections, rate, duration_s, warmup_s, timeout="2s")
    return run_engine(LOAD, args, timeout_s=duration_s + warmup_s + 60).document


def _point(point: str) -> tuple[str, int]:
    model, c = point.rsplit("/c", 1)
    return model, int(c)


def p99_table(loads: dict[str, dict], df) -> tuple[Table, dict[tuple[str, str], dict[int, float]]]:
    """p99 of each delay per (model, connections), the ratios to the smallest
    count, and the line saying whether the capstone's shape holds."""
    series: dict[tuple[str, str], dict[int, float]] = {}
    rows = []
    for point in sorted(loads, key=_point):
        model, c = _point(point)
        cells = [model, str(c), fmt_count(achieved_per_s(loads[point]))]
        for key, label in DELAYS:
            m = df[(df["point"] == point) & (df["name"] == key)]
            if m.empty:
                cells.append("unavailable")
                continue
            p99 = float(m.iloc[0]["p99_ns"])
            series.setdefault((model, label), {})[c] = p99
            cells.append(f"{fmt_ns(p99)} (n={int(m.iloc[0]['samples'])})")
        rows.append(cells)
    caption = (
        "p99 of the async-call delays (tailscope's probe) per point; throughput achieved closed loop. "
        "Whether the capstone's growth holds: the reference table below."
    )
    return (
        Table(
            "Async-call delay p99 vs connections",
            ["model", "connections", "requests/s", "scheduling p99", "join p99"],
            rows,
            caption,
            numeric_from=1,
        ),
        series,
    )


def fixed_rate(loads: dict[str, dict]) -> float | None:
    """The one open-loop rate every point was offered (requests/s), or None: closed loop (every point
    at the graph's ceiling), or points at different rates."""
    rates = {(d.get("load") or {}).get("requested_per_s") for d in loads.values()}
    modes = {(d.get("load") or {}).get("mode") for d in loads.values()}
    if len(rates) != 1 or modes != {"open"}:
        return None
    rate = next(iter(rates))
    return float(rate) if rate else None


def series_shape(model: str, label: str, s: dict[int, float]) -> tuple[bool | None, str]:
    """Whether the capstone's growth (×3 at 80, ×4 at 100 over 20) holds for
    one series, and the sentence saying so: it holds when the tail grows at
    least REFERENCE_SHARE of the reference factor at each count measured and
    does not shrink from 80 to 100. None: the series cannot be judged (and why)."""
    base_c = min(s)
    base = s[base_c]
    if base <= 0:
        return None, f"{model} {label}: shape unavailable: p99 at {base_c} connections is 0."
    ratios = {c: s[c] / base for c in s if c != base_c}
    compared = {c: r for c, r in ratios.items() if c in REFERENCE_RATIOS}
    if not compared:
        return None, f"{model} {label}: shape unavailable: no point at 80 or 100 connections."
    holds = all(r >= REFERENCE_RATIOS[c] * REFERENCE_SHARE for c, r in compared.items())
    if 80 in compared and 100 in compared:
        holds = holds and compared[100] >= compared[80]
    text = ", ".join(f"×{r:.1f} at {c} (capstone ×{REFERENCE_RATIOS[c]:.0f})" for c, r in sorted(compared.items()))
    return holds, (
        f"{model} {label} p99 over {base_c} connections: {text}: "
        f"the capstone's shape {'holds' if holds else 'does not hold'} here."
    )


def shape_verdict(model: str, label: str, s: dict[int, float]) -> str:
    return series_shape(model, label, s)[1]


FIGURE9_REPORTED = "async-call delay tails ×3 from 20 to 80 connections, ×4 at 100 (std::async, wrk2)"


def figure9_check(series: dict[tuple[str, str], dict[int, float]], rate_per_s: float | None) -> ReferenceCheck:
    """The capstone's Figure 9 beside this run: every (model, delay) series judged by series_shape;
    holds when every judged series holds, partly when some do. Not comparable when the points did not
    run at one fixed offered rate (`rate_per_s` None: closed loop, each point at the ceiling)."""
    judged = [(key, *series_shape(key[0], key[1], s)) for key, s in sorted(series.items())]
    verdicts = [v for _, v, _ in judged if v is not None]
    src = CAPSTONE_FIGURE9
    if not verdicts:
        why = " ".join(text for _, _, text in judged) or "no point had async-call delays"
        return ReferenceCheck("capstone Figure 9", FIGURE9_REPORTED, "unavailable", UNAVAILABLE, why, src)
    here = "; ".join(
        f"{model} {label} ×{s[max(s)] / s[min(s)]:.1f} at {max(s)}"
        for (model, label), s in sorted(series.items())
        if len(s) > 1 and s[min(s)] > 0
    )
    each = "; ".join(text.removesuffix(".") for _, _, text in judged)
    if rate_per_s is None:
        why = (
            "every point ran closed loop, so each sat at the graph's ceiling and more connections only queue "
            "more requests in front of it; the capstone raised the connections under wrk2, which sends at the "
            "rate it is given (the rate is not stated) — a fixed-rate sweep (option contention_rate) is "
            f"comparable. Measured closed loop: {each}."
        )
        return ReferenceCheck("capstone Figure 9", FIGURE9_REPORTED, here, NOT_COMPARABLE, why, src)
    verdict = HOLDS if all(verdicts) else PARTLY if any(verdicts) else DOES_NOT_HOLD
    held = [f"{m} {lbl}" for (m, lbl), v, _ in judged if v]
    missed = [f"{m} {lbl}" for (m, lbl), v, _ in judged if v is False]
    why = (
        f"at a fixed {fmt_count(rate_per_s)} requests/s, p99 over the {min(min(s) for s in series.values())}-"
        f"connection point grows at least {REFERENCE_SHARE:g} of the capstone's factor for "
        f"{', '.join(held) or 'no series'}" + (f", not for {', '.join(missed)}" if missed else "") + f" ({each})."
    )
    return ReferenceCheck("capstone Figure 9", FIGURE9_REPORTED, here, verdict, why, src)


def _cdf_figure(df, cdf, key: str, label: str) -> Figure | None:
    m = df[df["name"] == key]
    if m.empty:
        return None
    models = sorted({_point(p)[0] for p in m["point"]})
    import matplotlib.pyplot as plt

    fig, grid = plt.subplots(
        1, len(models), figsize=(4.0 * len(models), 3.4), layout="constrained", sharey=True, squeeze=False
    )
    for ax, model in zip(grid[0], models, strict=True):
        pts_model = sorted((p for p in m["point"] if _point(p)[0] == model), key=_point)
        for i, point in enumerate(pts_model):
            pts = cdf[(cdf["point"] == point) & (cdf["name"] == key)]
            plots.value_cdf(
                ax, pts["value_ns"], pts["percentile"], color=plots.PALETTE[i % 8], label=f"{_point(point)[1]} conns"
            )
        plots.thin_log_majors(ax.xaxis)
        ax.set_title(model, fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    grid[0][0].set_ylabel("fraction of async calls")
    worst = m.sort_values("p99_ns", ascending=False).iloc[0]
    return Figure(
        f"Async-call {label} delay CDF per connection count",
        plots.to_svg(fig),
        f"{label.capitalize()} delay of every async/deferred call in the sampled traces (5-timestamp probe), "
        "one curve per connection count.",
        f"Largest p99: {fmt_ns(worst['p99_ns'])} ({worst['point']}, n={int(worst['samples'])}).",
    )


def _p99_figure(series: dict[tuple[str, str], dict[int, float]]) -> Figure | None:
    if not series:
        return None
    fig, ax = plots.new_figure(7.5, 3.6)
    for i, ((model, label), s) in enumerate(sorted(series.items())):
        cs = sorted(s)
        ax.plot(
            cs,
            [s[c] for c in cs],
            marker="o",
            linestyle="-" if label == "scheduling" else ":",
            color=plots.PALETTE[(i // 2) % 8],
            label=f"{model} {label}",
        )
    ax.set_yscale("log")
    plots.format_ns_axis(ax.yaxis)
    ax.set_xlabel("connections")
    ax.set_ylabel("p99 delay")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    growth = []
    for (model, label), s in sorted(series.items()):
        if len(s) > 1 and s[min(s)] > 0:
            growth.append(f"{model} {label} ×{s[max(s)] / s[min(s)]:.1f}")
    return Figure(
        "Async-call delay p99 vs connections",
        plots.to_svg(fig),
        "p99 of the scheduling (solid) and join (dotted) delay per model and connection count.",
        (
            f"From {min(min(s) for s in series.values())} to {max(max(s) for s in series.values())} connections: "
            + ", ".join(growth)
            + "."
        )
        if growth
        else "Growth: unavailable: fewer than two connection counts with delays.",
    )


__all__ = ["STUDY", "ContentionStudy", "fmt_ratio"]

STUDY = ContentionStudy()
