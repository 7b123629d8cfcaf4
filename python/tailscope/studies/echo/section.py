"""The echo study's report section: analysis.py's values → figures, tables, notes and the thesis's
reference check. Every sentence here formats values it is given; what they say is decided there."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from tailscope.measure.verdict import MET as INTERVAL_MET
from tailscope.measure.verdict import NOT_MET as INTERVAL_NOT_MET
from tailscope.measure.verdict import UNDECIDED
from tailscope.report import plots
from tailscope.report.blocks import NOT_COMPARABLE, PARTLY, UNAVAILABLE, Figure, ReferenceCheck, Section, Source, Table
from tailscope.store import Store
from tailscope.studies.common import (
    FEW_BEYOND,
    LATENCY_COLUMNS,
    error_bar,
    interval_cell,
    latency_cells,
    length_to_decide_text,
    pinning_text,
    series,
    study_section,
)
from tailscope.studies.echo.analysis import (
    CLOSED,
    GENERATOR_SATURATED_BUSY_SHARE,
    LIMIT_UNAVAILABLE,
    MODELS,
    SERVER_LIMIT_EXPECTED_FROM,
    SERVER_SATURATED_CPU_SHARE,
    TARGET_RATIO,
    THESIS_MODELS,
    THESIS_PICKS,
    THESIS_TIE_SHARE,
    CommonRateReading,
    CoordinatedOmission,
    CpuReading,
    EchoPoint,
    EchoReading,
    FloorReading,
    GeneratorReading,
    IoUringFeatures,
    LatencySpread,
    Pinning,
    RangeReading,
    RatioReading,
    RepeatP99,
    ResourceReading,
    SelfCheck,
    SyscallShare,
    TargetReading,
    ThesisRange,
    ThesisReading,
    ThroughputLeader,
    models_in,
    read,
)
from tailscope.studies.echo.run import CONNECTIONS_PER_LOAD_THREAD, PAYLOAD_BYTES
from tailscope.studies.sources import ECHO_HIGH, ECHO_LOW, ECHO_MIDDLE
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

# How many not-server-limited points the generator note names before it says "…".
NAMED_POINTS_MAX = 8


def build_section(study: Any, store: Store, run_id: str) -> Section:
    sec = study_section(
        study,
        store,
        run_id,
        section_id="echo",
        intro=(
            "Every model of the thesis (thread per connection, poll, poll + pool, Boost.Asio single and "
            "multi-threaded) plus epoll, epoll with SO_REUSEPORT, io_uring and Asio coroutines, driven by "
            f"tailscope-load with {PAYLOAD_BYTES}-byte echo requests. <em>Closed loop</em>: each connection "
            "sends its next request when the previous answer arrives (the throughput ceiling). <em>Fixed "
            "rate</em>: open loop at a common rate (a quarter of the slowest model's ceiling at that connection count), "
            "latency measured from the intended send time. Server CPU, RSS, threads and fds are sampled from "
            "/proc every 100 ms during the measured window."
        ),
    )
    reading = read(store.documents(run_id, study.name))
    render(sec, reading)
    return sec


def render(sec: Section, r: EchoReading) -> None:
    """Adds the reading's notes, figures and tables to `sec`, in report order."""
    if not r.points or r.pinning is None or r.generator is None:
        sec.notes.append("no echo measurements were stored for this run")
        return
    pin = pin_text(r.pinning)
    for p in r.with_errors:
        sec.notes.append(
            f"{p.model} at {p.connections} connections ({p.mode}): {p.errors} errors {json.dumps(p.error_kinds)}"
        )
    sec.notes += generator_notes(r.generator)
    if r.io_uring:
        sec.notes.append(io_uring_note(r.io_uring))
    if r.self_check:
        sec.notes.append(self_check_note(r.self_check))
    if r.closed and r.latency:
        sec.blocks.append(_throughput_figure(r.closed, r.throughput, pin))
        sec.blocks.append(_latency_figure(r.closed, r.latency, pin, "log"))
        sec.blocks.append(_latency_figure(r.closed, r.latency, pin, "linear"))
        sec.blocks.append(_resource_figure(r.closed, r.resources, pin))
    if r.rate:
        sec.blocks.append(_cdf_figure(r.rate, r.common_rate, pin))
    sec.blocks.append(_points_table(r.points, pin))
    if r.closed and r.thesis:
        if r.ratios:
            sec.blocks.append(ratio_table(r.ratios))
        sec.blocks.append(_recommendation_table(r.ranges))
        sec.add_references(thesis_checks(r.thesis), "The thesis's recommendation vs here")
    if r.floor:
        sec.blocks.append(_floor_table(r.floor))
    if r.coordinated_omission:
        sec.blocks.append(_co_table(r.coordinated_omission))


# ---- notes ----------------------------------------------------------------------------------------


def pin_text(pin: Pinning) -> str:
    threads = pin.load_threads
    n = str(threads[0]) if len(threads) == 1 else f"{threads[0]}–{threads[-1]}"
    gen = f"tailscope-load ({n} load thread{'s' if threads[-1] > 1 else ''}, {pin.load_pacing} pacing)"
    return pinning_text("Server", pin.server_cpu, gen, ",".join(map(str, pin.load_cpus)))


def limit_text(p: EchoPoint) -> str:
    cpu = "—" if p.cpu_pct is None else f"{p.cpu_pct:.0f} %"
    busy = "—" if p.generator_busy_share is None else f"{p.generator_busy_share * 100:.0f} %"
    limit = f"{LIMIT_UNAVAILABLE}: {p.limit_unavailable}" if p.limit_unavailable else p.limit
    return f"{limit} (server CPU {cpu}, generator busy {busy})"


def generator_notes(g: GeneratorReading) -> list[str]:
    """How many load threads each connection count used, the pacing, and how many fixed-rate
    points passed the generator's self-check."""
    parts = [f"{c}: {'/'.join(map(str, t))}" for c, t in g.threads_by_connections]
    notes = [
        f"Load threads per connection count — {'; '.join(parts)} (at most one per client CPU; client CPUs "
        f"{','.join(map(str, g.load_cpus))}; one thread per {CONNECTIONS_PER_LOAD_THREAD} connections)."
    ]
    if g.io_by_connections:
        text = "tailscope-load moved bytes with " + "; ".join(
            f"{'/'.join(ios)} at {c}" for c, ios in g.io_by_connections
        )
        if g.syscalls_per_request:
            lo, hi = g.syscalls_per_request
            text += f"; its system calls per completed request ranged {lo:.2f}–{hi:.2f}"
        notes.append(text + ".")
    if g.rate_points:
        notes.append(
            f"{g.rate_points_passed} of {g.rate_points} fixed-rate points passed the generator self-check "
            f"(pacing: {', '.join(g.rate_pacings)})."
        )
    unsat = g.not_server_limited
    if unsat:
        named = ", ".join(f"{p.model}@{p.connections} — {limit_text(p)}" for p in unsat[:NAMED_POINTS_MAX])
        more = " …" if len(unsat) > NAMED_POINTS_MAX else ""
        notes.append(
            f"{len(unsat)} closed-loop point(s) at {SERVER_LIMIT_EXPECTED_FROM}+ connections left the server below "
            f"{SERVER_SATURATED_CPU_SHARE * 100:.0f} % of its core, so the generator or the round trip set "
            f"their throughput, not the server: {named}{more}."
        )
    return notes


def io_uring_note(f: IoUringFeatures) -> str:
    """What the io-uring model probed and used (its ready line), fallbacks with their reason."""
    used = [k.replace("_", " ") for k in f.used]
    text = f"io-uring ran with ring setup {'?' if f.ring_setup is None else f.ring_setup}; used: {', '.join(used) or 'none'}"
    if f.not_used:
        text += "; not used: " + "; ".join(f"{k.replace('_', ' ')} ({why})" for k, why in f.not_used)
    return text + "."


def self_check_note(s: SelfCheck) -> str:
    """The generator self-check's verdict on the fixed-rate points, and how much of the worst point's
    tail is the generator's own send lag (a point without a measured lag is named as such)."""
    text = (
        f"Generator self-check flagged {s.flagged} of {s.rate_points} fixed-rate points (achieved rate below "
        "99 % of requested, or the generator's own send lag p99 above 10 % of the measured p99)."
    )
    if s.worst is None or s.lag_share is None:
        return text + f" Send lag: unavailable: {s.lag_unavailable}."
    w = s.worst
    return text + (
        f" Worst: {w.model} at {w.connections} connections, send-lag p99 {fmt_ns(w.send_lag_p99_ns)} = "
        f"{s.lag_share * 100:.0f} % of its latency p99 {fmt_ns(w.p99_ns)}: the flagged points' "
        "tails include the generator's own lateness, not only the server's."
    )


# ---- the in-run ratio table ---------------------------------------------------------------------------


def ratio_table(r: RatioReading) -> Table:
    """In-run ratios at every connection count: each model ÷ poll (throughput and p99), io-uring ÷ epoll;
    its caption states poll's repeat spread, the issue's target and the CPU per echo."""
    rows = []
    for row in r.rows:
        p = row.point
        vs_epoll = "—"
        if row.io_uring_vs_epoll:
            tput, p99 = row.io_uring_vs_epoll
            vs_epoll = f"{fmt_ratio(tput)} req/s, {fmt_ratio(p99)} p99"
        cpe = p.cpu_per_echo_ns
        rows.append(
            [
                str(p.connections),
                p.model,
                fmt_count(p.throughput_per_s),
                fmt_ratio(row.throughput_vs_poll),
                fmt_ratio(row.p99_vs_poll),
                vs_epoll,
                limit_text(p),
                fmt_ns(cpe) if cpe is not None else "unavailable",
                fmt_ratio(row.per_core_vs_poll),
            ]
        )
    return Table(
        "In-run ratios: each model ÷ poll, io-uring ÷ epoll (closed loop)",
        [
            "conns",
            "model",
            "req/s",
            "req/s ÷ poll",
            "p99 ÷ poll",
            "io-uring ÷ epoll",
            "limit",
            "server CPU / echo",
            "echoes per core-second ÷ poll",
        ],
        rows,
        "Same run, same cores, same client. limit = server when the server used at least "
        f"{SERVER_SATURATED_CPU_SHARE * 100:.0f} % of its core, generator when a load thread's loop found work "
        f"at least {GENERATOR_SATURATED_BUSY_SHARE * 100:.0f} % of its time, round trip when neither; a point "
        "that was not server-limited compares the generator and the round trip, not the servers. Server CPU "
        "per echo is its core's busy share ÷ echoes per second; its inverse, echoes per core-second, is what "
        "one server core could carry, and stands where the generator was the limit. "
        + spread_finding(r.spread)
        + repeat_p99_finding(r.repeat_p99)
        + target_finding(r.targets)
        + cpu_finding(r.cpu),
        numeric_from=2,
    )


def spread_finding(spread: Sequence[tuple[int, float]]) -> str:
    if not spread:
        return "poll was not repeated in this run: the spread between two runs of one point is unavailable. "
    parts = ", ".join(f"{v * 100:.0f} % at {c}" for c, v in spread)
    return (
        f"poll ran twice at each count, before and after the other models; its closed-loop throughput moved "
        f"by {parts}: a ratio closer to 1 than that is within this run's noise. "
    )


def repeat_p99_finding(repeats: Sequence[RepeatP99]) -> str:
    """poll's p99 in its two runs by their 95 % intervals: overlapping (the repeat moved no more than
    sampling explains) or apart (the run itself moved: its intervals understate the uncertainty)."""
    if not repeats:
        return ""
    parts = []
    for r in repeats:
        if r.verdict.verdict == "":
            parts.append(f"at {r.connections} no interval ({r.verdict.unavailable})")
            continue
        assert r.first.estimate_ns is not None and r.again.estimate_ns is not None
        moved = (
            "apart: the run moved more than its sampling explains" if r.apart else "overlapping: within its sampling"
        )
        parts.append(
            f"at {r.connections} {fmt_ns(r.first.estimate_ns)} {interval_cell(r.first, r.first.samples_beyond < 10)} then "
            f"{fmt_ns(r.again.estimate_ns)} {interval_cell(r.again, r.again.samples_beyond < 10)}, {moved}"
        )
    return "Its p99 in the two runs, by their 95 % intervals: " + "; ".join(parts) + ". "


def target_finding(targets: Sequence[TargetReading]) -> str:
    """The issue's target, stated from this run: best ÷ poll ≥ 1.3 with p99 no higher, at 100 and 1000."""
    parts = []
    for t in targets:
        if t.unavailable:
            parts.append(f"{t.connections} connections: unavailable ({t.unavailable})")
            continue
        caveat = "" if t.server_limited else " (a point here was not server-limited)"
        if t.spread is not None:
            caveat += f" (poll's repeat moved {t.spread * 100:.0f} %)"
        parts.append(
            f"{t.connections} connections: {t.best} {t.ratio:.3f}× of poll, {p99_text(t)} — {t.verdict}{caveat}"
        )
    return f"Target best ÷ poll ≥ {TARGET_RATIO}× with p99 no higher: " + "; ".join(parts) + "."


def p99_text(t: TargetReading) -> str:
    """best's p99 beside poll's: by their 95 % intervals when both have one, else by the estimates."""
    v, by_estimate = t.p99_verdict, "no higher" if t.p99_no_higher else "higher"
    if v.verdict == INTERVAL_MET:
        return "p99 no higher (95 % intervals apart)"
    if v.verdict == INTERVAL_NOT_MET:
        return "p99 higher (95 % intervals apart)"
    if v.verdict == UNDECIDED:
        return f"p99 {by_estimate} by the estimates, but the 95 % intervals overlap: {length_to_decide_text(v)}"
    return f"p99 {by_estimate} (estimates only; intervals unavailable: {v.unavailable})"


def cpu_finding(readings: Sequence[CpuReading]) -> str:
    """At each target connection count: the model with the least server CPU per echo, as poll's ÷
    its own (echoes per core-second ÷ poll), beside the target ratio; the kernel's share of the
    server's CPU; and what poll's user time and its two system calls' entries weigh in its CPU per echo."""
    parts = []
    for r in readings:
        if r.unavailable:
            parts.append(f"{r.connections} connections: unavailable ({r.unavailable})")
            continue
        parts.append(
            f"{r.connections} connections: {r.best} {fmt_ns(r.best_cpu_per_echo_ns)} per echo vs poll's "
            f"{fmt_ns(r.poll_cpu_per_echo_ns)} = {fmt_ratio(r.ratio)} "
            f"the echoes per core-second ({'at least' if r.at_least_target else 'below'} {TARGET_RATIO}×)"
            + kernel_share_text(r.kernel_shares)
            + syscall_share_text(r.syscall, r.syscall_unavailable)
        )
    return " By server CPU per echo: " + "; ".join(parts) + "."


def kernel_share_text(shares: Sequence[tuple[str, float]]) -> str:
    """On loopback a server's send also runs the TCP receive path of the client's socket, work every
    model pays per echo whatever its own loop costs: the kernel's share of the server's CPU says how much."""
    text = ", ".join(f"{model} {share * 100:.0f} %" for model, share in shares)
    return f" (system time of the server's CPU: {text})" if shares else ""


def syscall_share_text(s: SyscallShare | None, unavailable: str) -> str:
    if s is None:
        return f"; the system-call share is unavailable: {unavailable}"
    if s.carry_factor is None:
        return ""
    return (
        f"; an empty system call costs {fmt_ns(s.syscall_ns)} here (baseline p50): poll's two per echo are "
        f"{s.entries_share * 100:.0f} % of its CPU per echo and its user time {s.user_share * 100:.0f} %; without both it "
        f"would carry {s.carry_factor:.2f}× its echoes per core-second"
    )


# ---- figures ----------------------------------------------------------------------------------------


def _series(points: Sequence[EchoPoint], model: str, key: Callable[[EchoPoint], Any]) -> tuple[list[float], list[Any]]:
    return series(points, lambda p: p.model == model, lambda p: p.connections, key)


def _bounds(p: EchoPoint, key: str) -> tuple[float, float] | None:
    """A point's interval of percentile `key` for an error bar; none with fewer than 10 samples beyond it."""
    return error_bar(p.intervals.get(key), key in p.low_confidence)


def _style(model: str) -> dict:
    i = MODELS.index(model) if model in MODELS else 0
    return {
        "color": plots.PALETTE[i % 8],
        "linestyle": "-" if model in THESIS_MODELS else "--",
        "marker": "o",
        "markersize": 3.5,
        "linewidth": 1.4,
    }


def _throughput_figure(closed: Sequence[EchoPoint], leaders: Sequence[ThroughputLeader], pin: str) -> Figure:
    fig, axes = plots.new_figure(10.0, 3.8)
    fig.clf()
    ax1, ax2 = fig.subplots(1, 2)
    for m in models_in(closed):
        xs, ys = _series(closed, m, lambda p: p.throughput_per_s)
        ax1.plot(xs, ys, label=m, **_style(m))
        ax2.plot(xs, ys, label=m, **_style(m))
    for ax, scale in ((ax1, "linear"), (ax2, "log")):
        ax.set_xscale("log")
        ax.set_yscale(scale)
        ax.set_xlabel("connections")
        ax.set_ylabel("requests/s")
        ax.set_title(f"{scale} y", fontsize=9)
    plots.plain_log_axis(ax2.yaxis)
    ax2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    parts = [
        f"{t.connections} conns: {t.fastest.model} {fmt_count(t.fastest.throughput_per_s)}/s "
        f"({fmt_ratio(t.ratio)} of {t.slowest.model})"
        for t in leaders
    ]
    return Figure(
        "Closed-loop throughput vs connections",
        plots.to_svg(fig),
        f"{pin}. Closed loop (-R 0), {PAYLOAD_BYTES}-byte echo, 1 request in flight per connection. "
        "Solid: the thesis's five models; dashed: the additions.",
        "Fastest per connection count — " + "; ".join(parts) + ".",
    )


def _latency_figure(closed: Sequence[EchoPoint], spread: LatencySpread, pin: str, yscale: str = "log") -> Figure:
    fig, _ = plots.new_figure(10.0, 6.4)
    fig.clf()
    axes = fig.subplots(2, 2).flatten()
    panels: list[tuple[str, Callable[[EchoPoint], float], str]] = [
        ("mean", lambda p: p.mean_ns, ""),
        ("p90", lambda p: p.p90_ns, ""),
        ("p99", lambda p: p.p99_ns, "99"),
        ("p99.9", lambda p: p.p999_ns, "99.9"),
    ]
    for ax, (title, key, pct) in zip(axes, panels):
        for m in models_in(closed):
            xs, ys = _series(closed, m, key)
            mine = sorted((p for p in closed if p.model == m), key=lambda p: p.connections)  # _series' order
            bounds = [_bounds(p, pct) if pct else None for p in mine]
            plots.line_with_intervals(ax, xs, ys, bounds, m, **_style(m))
        ax.set_xscale("log")
        ax.set_yscale(yscale)
        plots.format_ns_axis(ax.yaxis)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("connections")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return Figure(
        f"Closed-loop latency vs connections (mean, p90, p99, p99.9), {yscale} y",
        plots.to_svg(fig),
        f"{pin}. Closed loop: latency of each request from its send; at saturation this is queueing in "
        f"the server. Log x, {yscale} y. Error bars on p99 and p99.9: their distribution-free 95 % interval "
        "where the point has one with at least 10 samples beyond the percentile."
        + (" Some p99.9 values rest on fewer than 10 tail samples." if spread.p999_low_confidence else ""),
        latency_finding(spread, yscale),
    )


def latency_finding(s: LatencySpread, yscale: str) -> str:
    """The log figure states the p99 spread; its linear twin states the mean's,
    so the two findings add information instead of repeating each other."""
    if yscale != "linear":
        return (
            f"At {s.connections} connections the lowest p99 is {s.lowest_p99.model} ({fmt_ns(s.lowest_p99.p99_ns)}), "
            f"the highest {s.highest_p99.model} ({fmt_ns(s.highest_p99.p99_ns)}, {fmt_ratio(s.p99_ratio)})."
        )
    lo, hi = s.lowest_mean, s.highest_mean
    return (
        f"At {s.connections} connections the mean ranges from {fmt_ns(lo.mean_ns)} ({lo.model}) to "
        f"{fmt_ns(hi.mean_ns)} ({hi.model}, {fmt_ratio(s.mean_ratio)})."
    )


def _resource_figure(closed: Sequence[EchoPoint], r: ResourceReading | None, pin: str) -> Figure:
    fig, _ = plots.new_figure(10.0, 3.8)
    fig.clf()
    ax1, ax2 = fig.subplots(1, 2)
    for m in models_in(closed):
        xs, cpu = _series(closed, m, lambda p: p.cpu_pct if p.cpu_pct is not None else math.nan)
        _, rss = _series(closed, m, lambda p: (p.rss_bytes or math.nan) / 2**20)
        ax1.plot(xs, cpu, label=m, **_style(m))
        ax2.plot(xs, rss, label=m, **_style(m))
    ax1.set_ylabel("server CPU % (100 = one core)")
    ax2.set_ylabel("server RSS (MiB)")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xlabel("connections")
    ax2.set_yscale("log")
    plots.plain_log_axis(ax2.yaxis)  # MiB as numbers, not 6×10^0
    ax2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return Figure(
        "Server CPU and memory vs connections (closed loop)",
        plots.to_svg(fig),
        f"{pin}. Mean CPU % and peak RSS of the server process over the measured window "
        "(/proc, 100 ms samples). Threads and fds are in the table below.",
        resource_finding(r),
    )


def resource_finding(r: ResourceReading | None) -> str:
    if r is None:
        return "No resource samples were taken."
    big, small = r.largest_rss, r.smallest_rss
    finding = (
        f"At {r.connections} connections {big.model} holds {(big.rss_bytes or 0) / 2**20:.1f} MiB "
        f"({fmt_ratio(r.rss_ratio)} of {small.model}, {big.threads} threads)"
    )
    if r.most_efficient:
        finding += (
            f"; most requests per CPU-% : {r.most_efficient.model} "
            f"({fmt_count(r.requests_per_cpu_pct)} req/s per % CPU)"
        )
    return finding + "."


def _cdf_figure(rate: Sequence[EchoPoint], readings: Sequence[CommonRateReading], pin: str) -> Figure:
    fig, _ = plots.new_figure(4.0 * len(readings) + 2.0, 3.8)
    fig.clf()
    axes = fig.subplots(1, len(readings), squeeze=False)[0]
    for ax, r in zip(axes, readings):
        sel = [p for p in rate if p.connections == r.connections]
        by_model = {p.model: p for p in sel}
        plots.latency_cdf(
            ax,
            [plots.CdfCurve(m, by_model[m].cdf, _style(m)["color"], _style(m)["linestyle"]) for m in models_in(sel)],
            max_percentile=99.9,
        )
        ax.set_title(f"{r.connections} connections, {fmt_count(r.rate_per_s)} req/s", fontsize=9)
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    findings = [f"{r.connections} conns: {r.lowest_p99.model} p99 {fmt_ns(r.lowest_p99.p99_ns)}" for r in readings]
    return Figure(
        "Latency distribution at a common fixed rate (from the intended send time)",
        plots.to_svg(fig),
        f"{pin}. Open loop, fixed inter-arrival, de-synchronised per-connection start; the common rate is "
        "a quarter of the slowest model's closed-loop maximum at that connection count, so every model can "
        "sustain it.",
        "Lowest p99 at the common rate — " + "; ".join(findings) + ".",
    )


# ---- tables ------------------------------------------------------------------------------------------


def _points_table(points: Sequence[EchoPoint], pin: str) -> Table:
    rows = []
    for p in sorted(points, key=lambda p: (p.mode, p.connections, MODELS.index(p.model) if p.model in MODELS else 99)):
        rows.append(
            [
                p.model,
                str(p.connections),
                "closed" if p.mode == CLOSED else f"{fmt_count(p.rate_per_s)}/s",
                fmt_count(p.throughput_per_s),
                *latency_cells(
                    p.mean_ns, p.p50_ns, p.p90_ns, p.p99_ns, p.p999_ns, p.samples, p.low_confidence, p.intervals
                ),
                "—" if p.cpu_pct is None else f"{p.cpu_pct:.0f}",
                "—" if not p.rss_bytes else f"{p.rss_bytes / 2**20:.1f}",
                "—" if p.threads is None else str(p.threads),
                "—" if p.fds is None else str(p.fds),
                str(p.errors),
            ]
        )
    return Table(
        "Every sweep point",
        [
            "model",
            "conns",
            "mode",
            "req/s",
            *LATENCY_COLUMNS,
            "CPU %",
            "RSS MiB",
            "threads",
            "fds",
            "errors",
        ],
        rows,
        f"{pin}. Latency from the intended send time (closed loop: intended = actual send). "
        "[lo–hi] = the percentile's distribution-free 95 % interval (order statistics); "
        f"[{FEW_BEYOND}] = fewer than 10 samples beyond it; [—] = none (fewer samples than one needs: "
        "368 for p99, 3688 for p99.9, or a document from before intervals).",
        numeric_from=1,
    )


def _recommendation_table(ranges: Sequence[RangeReading]) -> Table:
    """Per connection range: the highest closed-loop throughput (mean over the range's points); among models
    within 5 % of it, the one with the lowest p99 at the common rate."""
    rows = []
    for r in ranges:
        if not r.connections:
            rows.append(
                [r.name, "unavailable: no point of this run in the range (the full form covers it)"]
                + [""] * 4
                + [THESIS_PICKS[r.name]]
            )
            continue
        pick, lowest_tail, thesis_best = r.pick, r.lowest_tail, r.thesis_best
        if pick is None or lowest_tail is None:
            continue
        rows.append(
            [
                f"{r.name} ({', '.join(map(str, r.connections))})" + ("" if r.server_limited else " †"),
                pick,
                fmt_count(r.score[pick]),
                fmt_ns(r.p99_at_rate[pick]) if math.isfinite(r.p99_at_rate[pick]) else "—",
                lowest_tail,
                f"{thesis_best} ({fmt_ratio(r.thesis_best_ratio)})" if thesis_best else "—",
                THESIS_PICKS[r.name],
            ]
        )
    return Table(
        "Recommendation per connection range (derived from this run)",
        [
            "range (connections)",
            "recommended",
            "mean req/s",
            "p99 at common rate",
            "lowest p99 at common rate",
            "best thesis model (throughput ratio)",
            "the thesis's pick (§5.1)",
        ],
        rows,
        "Recommended = highest mean closed-loop throughput over the range's points; among models within "
        "5 % of it, the lowest mean p99 at the common fixed rate. Ranges and picks as the thesis's conclusion "
        "(§5.1: < 100, 100–2000, > 2000 connections, each pick for its throughput). † = some closed-loop point in the range was not "
        "server-limited (see the ratio table). With the server pinned to one CPU, multi-threaded models "
        "cannot use more than one core.",
        numeric_from=2,
    )


THESIS_SOURCES: dict[str, Source] = {"< 100": ECHO_LOW, "100–2000": ECHO_MIDDLE, "> 2000": ECHO_HIGH}


def thesis_check(r: ThesisRange) -> ReferenceCheck:
    """One range of the thesis's recommendation beside this run's, as a reference row."""
    ref = f"echo thesis §5.1: {r.name} connections"
    reported = f"{r.thesis_pick} has the best throughput (Fortio closed loop, 64 B, a server of 8 logical CPUs)"
    counts = f" at {', '.join(map(str, r.connections))} connections" if r.connections else ""
    if r.thesis_best is None:
        here = "no point of the thesis's five models" + counts
    elif r.pick_share is None:
        here = f"best of the thesis's five: {r.thesis_best}; {r.thesis_pick} not measured"
    elif r.thesis_best == r.thesis_pick:
        here = f"best of the thesis's five: {r.thesis_pick}{counts}"
    else:
        here = f"best of the thesis's five: {r.thesis_best}; {r.thesis_pick} {fmt_ratio(r.pick_share)} of it{counts}"
    flag = "" if r.server_limited or not r.connections else " [a point was not server-limited]"
    measured = f"{here} (mean closed-loop throughput over the range's counts){flag}"
    if r.verdict in (UNAVAILABLE, NOT_COMPARABLE):
        why = r.reason + (f". Measured all the same: {measured}." if r.thesis_best else ".")
        return ReferenceCheck(ref, reported, here, r.verdict, why, THESIS_SOURCES[r.name])
    tie = f" (a tie: within {100 - THESIS_TIE_SHARE * 100:.0f} % of the best)" if r.verdict == PARTLY else ""
    why = f"{measured}{tie}; this run's recommendation overall: {r.recommended}."
    return ReferenceCheck(ref, reported, here, r.verdict, why, THESIS_SOURCES[r.name])


def thesis_checks(t: ThesisReading) -> list[ReferenceCheck]:
    """The thesis's recommendation, one reference row per range (its three ranges, in order)."""
    return [thesis_check(r) for r in t.ranges]


def _floor_table(f: FloorReading) -> Table:
    rows = [
        [
            "blocking loopback ping-pong (tailscope-baseline)",
            fmt_ns(f.pingpong_p50_ns),
            fmt_ns(f.pingpong_p99_ns),
            fmt_count(f.pingpong_samples),
            "1×",
        ]
    ]
    for r in f.rows:
        label = "back to back (closed loop)" if r.kind == CLOSED else "1000 req/s (open loop)"
        rows.append(
            [
                f"tailscope-load → {r.model}, 1 connection, {label}",
                fmt_ns(r.p50_ns),
                fmt_ns(r.p99_ns),
                fmt_count(r.samples),
                fmt_ratio(r.ratio),
            ]
        )
    return Table(
        "Measurement floor: what tailscope-load adds",
        ["measurement", "p50", "p99", "samples", "ratio of p50 to the ping-pong"],
        rows,
        "Same two cores, same run. The like-for-like comparison is the closed-loop row (one request in "
        "flight, sent as soon as the answer arrives, exactly the ping-pong's traffic): target ≤ 1.1×, "
        f"measured {fmt_ratio(f.closed_ratio)}. The 1000/s row adds what an idle millisecond costs "
        f"both processes (wake-ups from sleep): {fmt_ratio(f.rate_ratio)}.",
        numeric_from=1,
    )


def _co_table(co: CoordinatedOmission) -> Table:
    rows = [
        ["analytic expectation", fmt_ns(co.expected_p99_ns), "1×"],
        ["tailscope-load, from intended send time", fmt_ns(co.corrected_p99_ns), fmt_ratio(co.corrected_ratio)],
        [
            "tailscope-load, from actual send time (uncorrected)",
            fmt_ns(co.uncorrected_p99_ns),
            fmt_ratio(co.uncorrected_ratio),
        ],
    ]
    wrk_note = ""
    if co.wrk_p99_ns is not None:
        rows.append(
            [
                "wrk (closed loop, Debian, same stalling server over HTTP)",
                fmt_ns(co.wrk_p99_ns),
                fmt_ratio(co.wrk_ratio),
            ]
        )
        wrk_note = (
            f" wrk's p99 is {fmt_ratio(co.wrk_ratio)} of the expectation: wrk measures closed loop (uncorrected) and "
            "then back-fills synthetic samples after the run (stats_correct, expected interval = its own mean "
            "per-connection interval), an estimate that holds only while its achieved rate is steady."
        )
    else:
        rows.append(["wrk", "unavailable", co.wrk_unavailable])
    return Table(
        "Coordinated omission, shown: a server that stalls",
        ["p99 from", "p99", "ratio to expectation"],
        rows,
        f"epoll server stalling {co.stall_ms} ms every {co.stall_every_ms} ms; tailscope-load at "
        f"{co.rate_per_s}/s over {co.connections} connections. Expected p99 = stall − 1 % × period + "
        f"p50 = {fmt_ns(co.expected_p99_ns)}. Corrected is within {co.corrected_off * 100:.0f} % of it; the "
        f"uncorrected figure under-reports {fmt_ratio(co.under_report)}." + wrk_note,
        numeric_from=1,
    )
