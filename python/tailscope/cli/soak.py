"""`tailscope soak`: every model held at a steady load over time."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tailscope.atomicfile import write_text_atomic
from tailscope.cli.common import (
    _fail,
    console,
    err_console,
    json_out_option,
    known_models,
    number,
    stores_option,
)


@click.command()
@click.option(
    "--minutes",
    type=number(1.0, 24 * 60.0),
    default=30.0,
    show_default=True,
    help="Wall-clock budget of the whole soak, split evenly over the models.",
)
@click.option("--model", "models", multiple=True, help="Models to soak (repeatable; default: all five).")
@click.option(
    "--interval-s",
    type=number(5.0, 3600.0),
    default=60.0,
    show_default=True,
    help="Length of one reported interval.",
)
@click.option(
    "--fraction",
    type=number(0.05, 1.0),
    default=0.8,
    show_default=True,
    help="Offered rate as a fraction of the highest open-loop rate at which each model meets the p99 objective.",
)
@click.option(
    "--docstore-maintenance",
    "maintenance",
    type=click.Choice(["between", "during"]),
    default="between",
    show_default=True,
    help="When a real document store maintains its tables: 'between' intervals (autovacuum and timed "
    "checkpoints off, VACUUM (ANALYZE) + CHECKPOINT before each interval, while no load runs) or "
    "'during' them on PostgreSQL's own schedule.",
)
@stores_option
@json_out_option("--out", "out_path", "Also write every interval and verdict as JSON here.")
def soak(
    minutes: float,
    models: tuple[str, ...],
    interval_s: float,
    fraction: float,
    maintenance: str,
    stores: str,
    out_path: Path | None,
) -> None:
    """Hold the socialnet graph at a fraction of its ceiling: per-interval rate, p50/p99, errors, RSS, threads, fds."""
    from tailscope.lab.engines import EngineError
    from tailscope.studies import soak as soak_mod
    from tailscope.units import fmt_ns

    known = known_models()
    chosen = list(models) or list(known)
    unknown = [m for m in chosen if m not in known]
    if unknown:
        _fail(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(known)})")

    def on_interval(s: soak_mod.ModelSoak, iv: soak_mod.Interval) -> None:
        procs = "  ".join(
            f"{p.service.removesuffix('-service')}:{(p.rss_bytes or 0) / 2**20:.1f}M/{p.threads}t/{p.fds}fd"
            if p.rss_bytes is not None
            else f"{p.service}: unavailable"
            for p in iv.processes
        )
        p50 = fmt_ns(iv.p50_ns) if iv.p50_ns is not None else "unavailable"
        p99 = fmt_ns(iv.p99_ns) if iv.p99_ns is not None else "unavailable"
        if iv.p99_ci_ns is not None:
            p99 += f" [{fmt_ns(iv.p99_ci_ns[0])}–{fmt_ns(iv.p99_ci_ns[1])}]"
        c = iv.cost
        cpu = "unavailable"
        if c is not None and c.graph_cpu_per_request_ns is not None:
            cpu = fmt_ns(c.graph_cpu_per_request_ns)
        machine = (
            ""
            if c is None
            else f" steal {soak_mod.share_text(c.steal_share)} other {soak_mod.share_text(c.other_cpu_share)}"
        )
        e = iv.episodes
        if e is None:
            episodes = " saturated s unavailable"
        else:
            episodes = f" saturated {len(e.saturated_s)} s" + (
                f" ({soak_mod.spans_text(e.saturated_s)})" if e.saturated_s else ""
            )
            if e.stolen_s:
                episodes += f" stolen {len(e.stolen_s)} s ({soak_mod.spans_text(e.stolen_s)})"
            if e.any:
                episodes += f" p99 outside {fmt_ns(e.p99_outside_ns) if e.p99_outside_ns else 'unavailable'}"
        console.print(
            f"{s.model} #{iv.index}: {iv.achieved_per_s:.0f}/s of {iv.requested_per_s:.0f}/s "
            f"p50 {p50} p99 {p99} errors {iv.errors} cpu/req {cpu}{machine}{episodes} | {procs}"
        )

    def on_model(s: soak_mod.ModelSoak) -> None:
        console.print(
            f"[bold]{s.model}[/] (stores: {s.stores}): ceiling {s.ceiling_per_s:.0f}/s; {soak_mod.objective_line(s)}"
        )
        for v in s.verdicts:
            console.print(f"  {v}")

    try:
        results = soak_mod.run_soak(
            minutes,
            chosen,
            interval_s=interval_s,
            fraction=fraction,
            on_interval=on_interval,
            on_model=on_model,
            stores=stores,
            maintenance=maintenance,
        )
    except EngineError as e:
        _fail(e)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted: the graph was stopped[/]")
        sys.exit(130)
    if out_path is not None:
        write_text_atomic(out_path, soak_mod.to_json(results))
        console.print(f"written: {out_path}")
