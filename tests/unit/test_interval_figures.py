"""Intervals in the report's latency figures and tables: error bars drawn where the data carries a
percentile_ci and only there (report.plots.line_with_intervals), and the socialnet section's curve and
objective table fed from the points' intervals (never a bar for a p99 with fewer than 10 samples beyond)."""

from __future__ import annotations

from matplotlib.container import ErrorbarContainer

from tailscope.report import plots
from tailscope.studies.socialnet import section
from tailscope.studies.socialnet.analysis import summarize


def _errorbars(ax) -> list[ErrorbarContainer]:
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def test_error_bars_are_drawn_where_intervals_are_present():
    fig, ax = plots.new_figure()
    plots.line_with_intervals(ax, [1, 2, 3], [10.0, 20.0, 30.0], [(8.0, 13.0), None, (25.0, 40.0)], "m")
    bars = _errorbars(ax)
    assert len(bars) == 1
    _, _, (segments,) = bars[0].lines
    # One vertical segment per point with an interval, from lo to hi, none for the point without.
    spans = sorted(tuple(seg[:, 1]) for seg in segments.get_segments())
    assert spans == [(8.0, 13.0), (25.0, 40.0)]
    assert len(ax.lines) >= 1 and ax.lines[0].get_label() == "m"
    plots.plt.close(fig)


def test_no_error_bars_without_intervals():
    fig, ax = plots.new_figure()
    plots.line_with_intervals(ax, [1, 2], [10.0, 20.0], [None, None], "m")
    assert _errorbars(ax) == [] and len(ax.lines) == 1
    plots.plt.close(fig)


def _point(rate: float, p99_ms: float, ci_ms: tuple[float, float] | None, count: int, low: bool = False) -> dict:
    lat: dict = {"count": count, "percentiles": {"50": 1e6, "99": p99_ms * 1e6}}
    if ci_ms:
        lat["percentile_ci"] = {"99": [ci_ms[0] * 1e6, ci_ms[1] * 1e6]}
    if low:
        lat["low_confidence"] = ["99"]
    return {
        "socialnet_point": {"model": "coroutine", "kind": "rate", "rate_per_s": rate, "connections": 64},
        "load": {"achieved_per_s": rate, "errors_total": 0},
        "measurements": [{"name": "latency_intended", "latency": lat}],
    }


def test_the_socialnet_curve_bars_only_the_points_with_an_interval(monkeypatch):
    loads = [
        _point(500, 10, (8, 12), 5000),  # a bar
        _point(800, 30, (20, 70), 600, low=True),  # an interval, but fewer than 10 beyond: no bar
        _point(900, 40, None, 300),  # no interval (too few samples): no bar
    ]
    drawn = []
    real = plots.line_with_intervals
    monkeypatch.setattr(
        plots,
        "line_with_intervals",
        lambda ax, xs, ys, bounds, label, **kw: drawn.append(bounds) or real(ax, xs, ys, bounds, label, **kw),
    )
    s = summarize(loads, {})
    section._curve_figure(s)
    assert drawn == [[(8e6, 12e6), None, None]]
    table = section._objective_table(s)
    assert [r[3] for r in table.rows] == ["10 ms [8–12 ms]", "30 ms [unavailable (n beyond < 10)]", "40 ms [—]"]
    assert [r[5] for r in table.rows] == [
        "met",
        "undecided at this length; 4.0× as long decides it",
        "met (estimate; no interval)",
    ]


def test_the_echo_latency_figure_bars_p99_where_the_points_carry_intervals(monkeypatch):
    from conftest import echo_point
    from tailscope.measure.intervals import QuantileInterval
    from tailscope.studies.echo import section as echo_section
    from tailscope.studies.echo.analysis import latency_spread

    with_ci = echo_point("poll", 8, 1000, 200e3, intervals={"99": QuantileInterval(0.99, 20_000, 200e3, 190e3, 215e3)})
    closed = [with_ci, echo_point("poll", 100, 1000, 300e3), echo_point("epoll", 8, 1000, 250e3)]
    drawn: list[tuple[str, list]] = []
    real = plots.line_with_intervals

    def spy(ax, xs, ys, bounds, label, **kw):
        drawn.append((label, list(bounds)))
        real(ax, xs, ys, bounds, label, **kw)

    monkeypatch.setattr(plots, "line_with_intervals", spy)
    echo_section._latency_figure(closed, latency_spread(closed), "unpinned")
    # Four panels × two models; only poll's p99 at 8 connections carries a bar.
    assert len(drawn) == 8
    bars = [(label, b) for label, b in drawn if any(x is not None for x in b)]
    assert bars == [("poll", [(190e3, 215e3), None])]


def test_the_socialnet_connections_sweep_and_common_rate_carry_the_p99_intervals():
    def conn(c: int, ci, low=False) -> dict:
        d = _point(300, 20, ci, 5000, low)
        d["socialnet_point"].update(kind="connections", connections=c)
        return d

    common = _point(300, 20, (18, 25), 5000)
    common["socialnet_point"]["kind"] = "common"
    s = summarize([conn(20, (18, 22)), conn(50, (18, 30), low=True), conn(100, None), common], {})
    assert s.connections is not None
    (line,) = s.connections.lines
    assert line.bounds == ((18e6, 22e6), None, None)  # < 10 beyond and no interval: no bar
    fig = section._connections_figure(s.connections)
    assert "Error bars" in fig.caption
    assert section._summary_table(s).rows[0][6] == "20 ms [18–25 ms]"
