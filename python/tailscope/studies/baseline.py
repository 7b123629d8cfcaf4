"""Study `baseline`: the physical references of this machine.

Every later study states its figures as ratios to these, measured in the same
run: thread create→start, condvar hand-off to a parked thread, spin hand-off
across cores, a loopback TCP round trip, an empty syscall, a clock read.
"""

from __future__ import annotations

import json

from tailscope.lab.engines import run_engine
from tailscope.report import plots
from tailscope.report.blocks import Figure, Section, Table
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.common import study_section
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

ENGINE = "tailscope-baseline"

ORDER = ["clock_read", "empty_syscall", "spin_handoff", "condvar_handoff", "tcp_pingpong", "thread_create"]
LABELS = {
    "clock_read": "clock read",
    "empty_syscall": "empty syscall",
    "spin_handoff": "spin hand-off",
    "condvar_handoff": "condvar hand-off",
    "tcp_pingpong": "TCP round trip",
    "thread_create": "thread create→start",
}


class BaselineStudy:
    name = "baseline"
    title = "Physical references of this machine"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        args = ["--artifacts", str(ctx.artifacts_dir / "baseline")]
        if ctx.form == "full":
            args.append("--full")
        if ctx.options.get("scale"):
            args += ["--scale", str(ctx.options["scale"])]
        if ctx.options.get("cpus"):
            args += ["--cpus", ctx.options["cpus"]]

        def on_progress(p: dict) -> None:
            ctx.progress(f"baseline: {p.get('phase', '')}", float(p.get("fraction_done", 0.0)))

        timeout = 1800 if ctx.form == "full" else 600
        result = run_engine(ENGINE, args, timeout_s=timeout, on_progress=on_progress)
        return [EngineDocument(self.name, ENGINE, result.document)]

    def section(self, store: Store, run_id: str) -> Section:
        df = store.measurements(run_id, self.name)
        docs = store.documents(run_id, self.name)
        sec = study_section(
            self,
            store,
            run_id,
            intro=(
                "The cheapest version of each mechanism the other studies use. Later figures are "
                "stated as ratios to these references from the same run. <em>Pinned</em>: the two "
                "sides on different cores; <em>unpinned</em>: the scheduler decides."
            ),
        )
        if df.empty:
            sec.notes.append("no baseline measurements were stored for this run")
            return sec
        pin = _pinning_text(df)
        for d in docs:
            for w in d.document.get("warnings", []):
                sec.notes.append(w)

        df = df.assign(order=df["name"].map({n: i for i, n in enumerate(ORDER)}).fillna(99))
        df = df.sort_values(["order", "variant"])

        # Table: every figure with its sample count.
        rows = []
        for _, r in df.iterrows():
            low = set(r["low_confidence"]) if r["low_confidence"] is not None else set()

            def cell(key: str, col: str, r=r, low: set = low) -> str:  # bound now: called in this iteration
                return fmt_ns(r[col]) + (" *" if key in low else "")

            rows.append(
                [
                    LABELS.get(r["name"], r["name"]),
                    r["variant"],
                    fmt_count(r["samples"]),
                    cell("50", "p50_ns"),
                    cell("90", "p90_ns"),
                    cell("99", "p99_ns"),
                    cell("99.9", "p999_ns"),
                    fmt_ns(r["max_ns"]),
                    fmt_ns(r["mean_ns"]),
                ]
            )
        sec.blocks.append(
            Table(
                "Latency of each reference",
                ["reference", "placement", "samples", "p50", "p90", "p99", "p99.9", "max", "mean"],
                rows,
                f"{pin}. Warm-up iterations excluded. * = fewer than 10 samples lie beyond this percentile: "
                "treat it as indicative only. Batched references (clock read, syscall) report the mean of 100 "
                "calls per sample.",
                numeric_from=2,
            )
        )
        sec.blocks.append(_bar_figure(df, pin))
        cdf = store.cdf(run_id, self.name)
        if not cdf.empty:
            sec.blocks.append(_cdf_figure(cdf, df, pin))
        sec.blocks.append(_ratio_table(df))
        return sec


def _pinning_text(df) -> str:
    pinned = df[df["variant"] == "pinned"]
    if pinned.empty:
        return "Unpinned only"
    p = json.loads(pinned.iloc[0]["pinning"])
    return f"Pinned: client side on CPU {p.get('client_cpu')}, server side on CPU {p.get('server_cpu')}"


def _bar_figure(df, pin: str) -> Figure:
    import numpy as np

    names = [n for n in ORDER if n in set(df["name"])]
    fig, ax = plots.new_figure(7.5, 3.6)
    width = 0.2
    x = np.arange(len(names))
    series = [("pinned", "p50_ns", 0), ("pinned", "p99_ns", 1), ("unpinned", "p50_ns", 2), ("unpinned", "p99_ns", 3)]
    for variant, col, k in series:
        vals = []
        for n in names:
            sel = df[(df["name"] == n) & (df["variant"] == variant)]
            vals.append(float(sel.iloc[0][col]) if not sel.empty else np.nan)
        if all(np.isnan(vals)):
            continue
        ax.bar(
            x + (k - 1.5) * width,
            vals,
            width,
            label=f"{variant} {col[:3]}",
            color=plots.PALETTE[k // 2],
            alpha=1.0 if col == "p50_ns" else 0.45,
        )
    ax.set_yscale("log")
    plots.format_ns_axis(ax.yaxis)
    ax.set_xticks(x, [LABELS[n] for n in names], rotation=15)
    ax.set_ylabel("latency")
    ax.legend(ncols=4, fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.01), frameon=False)
    # Finding: where pinning matters most (ratio of p50s).
    best = None
    for n in names:
        a = df[(df["name"] == n) & (df["variant"] == "pinned")]
        b = df[(df["name"] == n) & (df["variant"] == "unpinned")]
        if a.empty or b.empty:
            continue
        ratio = float(b.iloc[0]["p50_ns"]) / max(float(a.iloc[0]["p50_ns"]), 1.0)
        if best is None or abs(np.log(ratio)) > abs(np.log(best[1])):
            best = (n, ratio, float(a.iloc[0]["p50_ns"]), float(b.iloc[0]["p50_ns"]))
    if best:
        n, ratio, a, b = best
        finding = (
            f"Placement matters most for the {LABELS[n]}: unpinned p50 {fmt_ns(b)} vs pinned "
            f"{fmt_ns(a)} ({fmt_ratio(ratio)})."
        )
    else:
        finding = "Only one placement was measured, so no pinned/unpinned comparison is possible."
    total = int(df["samples"].sum())
    return Figure(
        "p50 and p99 per reference",
        plots.to_svg(fig),
        f"{pin}. Solid bars p50, pale bars p99; log scale. {fmt_count(total)} samples in all.",
        finding,
    )


def _cdf_figure(cdf, df, pin: str) -> Figure:
    fig, ax = plots.new_figure(9.0, 4.4)
    curves = []
    for i, n in enumerate([n for n in ORDER if n in set(cdf["name"])]):
        for variant, style in (("pinned", "-"), ("unpinned", "--")):
            sel = cdf[(cdf["name"] == n) & (cdf["variant"] == variant)]
            curves.append(
                plots.CdfCurve(
                    f"{LABELS[n]} ({variant})",
                    list(zip(sel["value_ns"], sel["percentile"])),
                    plots.PALETTE[i % 8],
                    style,
                    1.4,
                )
            )
    plots.latency_cdf(ax, curves)
    worst = None
    for _, r in df.iterrows():
        if r["p50_ns"] and r["p999_ns"]:
            spread = float(r["p999_ns"]) / float(r["p50_ns"])
            if worst is None or spread > worst[0]:
                worst = (spread, r["name"], r["variant"], r["p50_ns"], r["p999_ns"], r["samples"])
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    if worst is None:
        finding = "No reference has both a p50 and a p99.9, so no tail spread can be stated."
    else:
        spread, n, v, p50, p999, samples = worst
        finding = (
            f"Widest tail: {LABELS.get(n, n)} ({v}) has p99.9 {fmt_ns(p999)} = {fmt_ratio(spread)} its p50 "
            f"{fmt_ns(p50)} ({fmt_count(samples)} samples)."
        )
    return Figure(
        "Latency distribution of each reference",
        plots.to_svg(fig),
        f"{pin}. Percentile spectrum from the HdrHistogram of each reference (3 significant digits); "
        "solid pinned, dashed unpinned.",
        finding,
    )


def _ratio_table(df) -> Table:
    """How many of the cheap things fit in the expensive ones: the yardsticks
    later studies use (e.g. a std::async call vs a thread start)."""
    pinned = df[df["variant"] == "pinned"].set_index("name") if "pinned" in set(df["variant"]) else df.set_index("name")
    ref = "condvar_handoff" if "condvar_handoff" in pinned.index else pinned.index[0]
    base = float(pinned.loc[ref, "p50_ns"])
    rows = []
    for n in ORDER:
        if n in pinned.index:
            v = float(pinned.loc[n, "p50_ns"])
            rows.append([LABELS[n], fmt_ns(v), fmt_ratio(v / base) if base else "—"])
    return Table(
        f"Ratios to the {LABELS.get(ref, ref)} (p50, pinned)",
        ["reference", "p50", "ratio"],
        rows,
        "The hand-off to a parked thread is what a thread pool pays per task at low load; the "
        "thread start is what std::async(launch::async) pays per call.",
    )


STUDY = BaselineStudy()
