"""Figures as inline SVG, so the HTML report is one self-contained file."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import matplotlib
from cycler import cycler

matplotlib.use("Agg")  # headless: never needs a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import Formatter, FuncFormatter, NullFormatter  # noqa: E402

from tailscope.units import fmt_ns

PALETTE = ["#1f6feb", "#d29922", "#2da44e", "#cf222e", "#8250df", "#57606a", "#bf3989", "#0a7ea4"]

plt.rcParams.update(
    {
        "figure.dpi": 100,
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.prop_cycle": cycler(color=PALETTE),
        "svg.fonttype": "none",  # text stays text: searchable, crisp
        "svg.hashsalt": "tailscope",  # deterministic ids across renders
    }
)

ns_formatter = FuncFormatter(lambda v, _pos: fmt_ns(v))


def new_figure(width_in: float = 7.5, height_in: float = 3.8):
    return plt.subplots(figsize=(width_in, height_in), layout="constrained")


def to_svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    # Drop the XML prolog/doctype: the SVG is embedded inline in HTML.
    return text[text.index("<svg") :]


def percentile_axis(ax, max_percentile: float = 99.99) -> None:
    """x axis of a latency 'CDF' in the HdrHistogram style: 1/(1-p) on a log
    scale, so the tail (99 %, 99.9 %, ...) gets as much room as the median."""
    import numpy as np

    ticks = [0, 50, 90, 99, 99.9, 99.99, 99.999]
    ticks = [t for t in ticks if t <= max_percentile + 1e-9]
    ax.set_xscale("log")
    ax.set_xticks([1 / (1 - t / 100) for t in ticks])
    ax.set_xticklabels([f"{t:g}%" for t in ticks])
    ax.set_xlim(1, 1 / (1 - min(max_percentile, 99.999) / 100) * 1.2)
    ax.minorticks_off()
    del np


def tail_x(percentiles):
    """Maps percentiles (0..100) to the 1/(1-p) axis, clipping 100 %."""
    import numpy as np

    p = np.minimum(np.asarray(percentiles, dtype=float), 99.9999)
    return 1.0 / (1.0 - p / 100.0)


def _minor_ns(value, _pos):
    """Minor ticks of a log axis in time units, only at 2× and 5× a power of
    ten, so a narrow axis still reads in ms/µs and never in 10^6 notation."""
    import math

    if value <= 0:
        return ""
    lead = value / 10 ** math.floor(math.log10(value) + 1e-9)
    return fmt_ns(value) if round(lead) in (2, 5) and abs(lead - round(lead)) < 1e-6 else ""


ns_minor_formatter = FuncFormatter(_minor_ns)

# Pixels a decade needs before its 2× and 5× labels fit beside the major one ("200 µs" is about
# 40 px wide and 12 px tall at the report's font size): below this they would overlap, as on a
# delay CDF whose clamped-to-1-ns samples stretch the axis over 8 decades.
MINOR_LABEL_PX_PER_DECADE = {"x": 150.0, "y": 45.0}


class _MinorNsFormatter(Formatter):
    """_minor_ns where the labels fit, read at draw time (once the limits and size are known)."""

    def __call__(self, x, pos=None):
        import math

        from matplotlib.axis import Axis, XAxis

        axis = self.axis
        if isinstance(axis, Axis):
            lo, hi = sorted(axis.get_view_interval())
            if lo > 0 and hi > lo and math.log10(hi / lo) < 1:
                return fmt_ns(x)  # less than a decade: no major tick in view, so every minor one speaks
            if lo > 0 and hi > lo:
                box = axis.axes.get_window_extent()
                name = "x" if isinstance(axis, XAxis) else "y"
                length = box.width if name == "x" else box.height
                if length / math.log10(hi / lo) < MINOR_LABEL_PX_PER_DECADE[name]:
                    return ""
        return _minor_ns(x, pos)


def thin_log_majors(axis, most: int = 6) -> None:
    """At most `most` major ticks on a log axis (every second or third decade on a wide one), so
    that labels on a small panel do not run into each other."""
    from matplotlib.ticker import LogLocator

    axis.set_major_locator(LogLocator(base=10, numticks=most))


def format_ns_axis(axis) -> None:
    """Time units on both major and minor ticks of a (log) axis; minor labels only where they fit."""
    axis.set_major_formatter(ns_formatter)
    axis.set_minor_formatter(_MinorNsFormatter())  # one per axis: a formatter reads its own axis


def plain_log_axis(axis) -> None:
    """A log axis of plain quantities (MiB, requests/s) labelled as numbers ("4", "6", "10"),
    not in matplotlib's 6×10^0 notation."""
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    axis.set_major_formatter(plain)
    axis.set_minor_formatter(plain)


@dataclass
class CdfCurve:
    """One line of a latency CDF: (value_ns, percentile 0..100) points."""

    label: str
    points: Sequence[tuple[float, float]]
    color: str | None = None
    linestyle: str = "-"
    linewidth: float = 1.3


def latency_cdf(ax, curves: Iterable[CdfCurve], *, max_percentile: float = 99.99, ylabel: str = "latency") -> int:
    """Draws latency CDFs the one way every study does: percentile axis in the
    HdrHistogram style, log time axis in ns units. Returns how many curves had points."""
    percentile_axis(ax, max_percentile)
    drawn = 0
    for c in curves:
        if not c.points:
            continue
        # A log axis cannot show 0: values below 1 ns (a clock's resolution) are drawn at 1 ns.
        ys = [max(float(v), 1.0) for v, _ in c.points]
        ax.plot(tail_x([p for _, p in c.points]), ys, c.linestyle, color=c.color, linewidth=c.linewidth, label=c.label)
        drawn += 1
    ax.set_yscale("log")
    format_ns_axis(ax.yaxis)
    ax.set_xlabel("percentile")
    ax.set_ylabel(ylabel)
    return drawn


def value_cdf(
    ax,
    values_ns: Iterable[float],
    percentiles: Iterable[float],
    *,
    label: str,
    color: str | None = None,
    linestyle: str = "-",
    linewidth: float = 1.4,
) -> None:
    """One CDF line the way Jaeger and the capstone draw delays: the value on a log time axis, the
    fraction of samples on y, as steps (each stored point holds until the next). A log axis cannot
    show 0, so values below 1 ns (a clamped skew, a clock's resolution) are drawn at 1 ns."""
    ax.plot(
        [max(float(v), 1.0) for v in values_ns],
        [float(p) / 100 for p in percentiles],
        color=color,
        linestyle=linestyle,
        linewidth=linewidth,
        drawstyle="steps-post",
        label=label,
    )
    ax.set_xscale("log")
    format_ns_axis(ax.xaxis)


def line_with_intervals(
    ax,
    xs: Sequence[float],
    ys: Sequence[float],
    bounds: Sequence[tuple[float, float] | None],
    label: str,
    **style,
) -> None:
    """One line of percentiles, with each point's 95 % interval (lo, hi) as an error bar where the data
    carries one (a document's `percentile_ci`); a point without one (too few samples, an old document)
    is drawn without, never with a made-up bar. No point with an interval: a plain line. `style`:
    ax.plot's keywords (a marker "o" unless given); the bars take the line's colour."""
    (line,) = ax.plot(xs, ys, label=label, **({"marker": "o"} | style))
    shown = [(x, y, b) for x, y, b in zip(xs, ys, bounds) if b is not None]
    if not shown:
        return
    below = [max(0.0, y - b[0]) for _, y, b in shown]
    above = [max(0.0, b[1] - y) for _, y, b in shown]
    ax.errorbar(
        [x for x, _, _ in shown],
        [y for _, y, _ in shown],
        yerr=[below, above],
        fmt="none",
        ecolor=line.get_color(),
        elinewidth=1,
        capsize=3,
    )


# Small multiples (two panels a row) fill the report's figure column: at 7.5 in each panel was
# ~370 px wide with 7 pt ticks, too small to read at 1400 px (screenshots of the threads section).
PANEL_GRID_WIDTH_IN = 10.0
PANEL_ROW_HEIGHT_IN = 3.0


def line_panels(
    panels: dict[str, dict[str, tuple[list, list]]],
    xlabel: str,
    ylabel: str,
    *,
    log_x: bool = False,
    log_y: bool = False,
    ns_y: bool = False,
    columns: int = 2,
):
    """Small multiples: one axis per panel title, one line per label in each → (fig, axes by title).

    The thread-count study draws every metric-vs-users figure this way (a panel per workload ×
    variant, a line per thread count), so panels share their y range and compare at a glance."""
    import math

    titles = list(panels) or ["(no data)"]
    rows = math.ceil(len(titles) / columns)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(PANEL_GRID_WIDTH_IN, PANEL_ROW_HEIGHT_IN * rows + 0.6),
        layout="constrained",
        squeeze=False,
        sharey=True,
    )
    by_title = {}
    for i, ax in enumerate(axes.flat):
        if i >= len(titles):
            ax.set_visible(False)
            continue
        title = titles[i]
        by_title[title] = ax
        ax.set_title(title, fontsize=9)
        for label, (xs, ys) in panels.get(title, {}).items():
            pts = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", markersize=3, label=label)
        if log_x:
            ax.set_xscale("log")
        if log_y:
            ax.set_yscale("log")
        if ns_y:
            # Major ticks only: minor labels on every small panel cost most of the drawing time.
            ax.yaxis.set_major_formatter(ns_formatter)
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(labelsize=7)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return fig, by_title


def grouped_bars(ax, groups: list[str], series: dict[str, list], ylabel: str) -> None:
    """Bars of several series side by side per group; a None value leaves a gap (unavailable, not 0)."""
    import numpy as np

    width = 0.8 / max(len(series), 1)
    x = np.arange(len(groups))
    for i, (label, values) in enumerate(series.items()):
        xs = [x[j] + i * width for j, v in enumerate(values) if v is not None]
        ax.bar(xs, [v for v in values if v is not None], width, label=label)
    ax.set_xticks(x + width * (len(series) - 1) / 2)
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)


def ccdf_axis(ax, xs: list, survival: list, label: str, fit: tuple[float, float, float] | None = None) -> None:
    """A log-log survival curve P(X > x); with fit = (threshold, tail_fraction, scale) also the
    exponential tail fitted above the threshold, dashed, in the same colour."""
    import numpy as np

    (line,) = ax.plot(xs, survival, label=label, linewidth=1.2)
    if fit is not None and xs:
        u, frac, scale = fit
        grid = np.geomspace(max(u, min(xs)), max(xs), 50)
        ax.plot(grid, frac * np.exp(-(grid - u) / scale), linestyle="--", linewidth=0.9, color=line.get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(ns_formatter)
    ax.xaxis.set_minor_formatter(NullFormatter())
