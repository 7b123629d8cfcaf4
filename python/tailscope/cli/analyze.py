"""`tailscope analyze`: the critical-path analysis of trace files or a live Jaeger."""

from __future__ import annotations

import os
from pathlib import Path

import click
import duckdb

from tailscope.cli.common import (
    _store_failure,
    console,
    max_traces_option,
    number,
    results_option,
    wait_for_store_option,
    whole,
)
from tailscope.cli.run import run_and_report
from tailscope.lab.allow_list import check_base_url
from tailscope.store import Store, StoreError
from tailscope.traces.critpath import PER_TRACE


def jaeger_options(f):
    """`analyze --jaeger …`: the options of jaeger_query (docs/deploy.md)."""
    f = click.option(
        "--limit",
        "jaeger_limit",
        type=whole(1, 1_000_000),
        default=None,
        help="--jaeger: at most N traces, newest first (default 1000).",
    )(f)
    f = click.option(
        "--lookback",
        "jaeger_lookback",
        default=None,
        metavar="DURATION",
        help="--jaeger: how far back to search, e.g. 15m, 1h, 2d (default 1h).",
    )(f)
    f = click.option(
        "--operation", "jaeger_operation", default=None, help="--jaeger: only traces with this operation."
    )(f)
    f = click.option(
        "--service", "jaeger_service", default=None, help="--jaeger: traces that pass through this service."
    )(f)
    f = click.option(
        "--jaeger",
        "jaeger_url",
        default=None,
        metavar="URL",
        help="Read traces from Jaeger's query API, e.g. http://127.0.0.1:16686.",
    )(f)
    return f


def _jaeger_study(files: tuple[Path, ...], o: dict):
    from tailscope.studies.analyze import JaegerAnalyzeStudy
    from tailscope.traces import jaeger as jq

    if o["jaeger_url"] is None:
        given = [
            k for k in ("jaeger_service", "jaeger_operation", "jaeger_lookback", "jaeger_limit") if o[k] is not None
        ]
        if given:
            raise click.UsageError(f"--{given[0].removeprefix('jaeger_')} is an option of --jaeger URL")
        return None
    if files:
        raise click.UsageError("give trace FILES or --jaeger URL, not both")
    if not o["jaeger_service"]:
        raise click.UsageError("--jaeger needs --service NAME (Jaeger searches traces by service)")
    try:
        query = jq.JaegerQuery(
            base_url=check_base_url(str(o["jaeger_url"])),
            service=str(o["jaeger_service"]),
            operation=o["jaeger_operation"] or None,
            lookback_s=jq.parse_lookback(str(o["jaeger_lookback"] or jq.DEFAULT_LOOKBACK)),
            limit=int(o["jaeger_limit"] or jq.DEFAULT_LIMIT),
        )
    except ValueError as e:
        raise click.BadParameter(str(e)) from e
    return JaegerAnalyzeStudy(query)


@click.command()
@click.argument("files", nargs=-1, required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--algorithm",
    type=click.Choice(["capstone", "jaeger", "crisp"]),
    default="capstone",
    show_default=True,
    help="Critical-path rules (docs/critical-path.md).",
)
@click.option(
    "--what-if",
    "what_if",
    multiple=True,
    metavar="SERVICE",
    help="Project end-to-end latency with SERVICE's own time removed (repeatable).",
)
@click.option("--what-if-no-delays", is_flag=True, help="Project latency with all scheduling/join delay removed.")
@max_traces_option("Stop after N traces (0 = all).")
@click.option(
    "--stagger-window-us",
    type=number(0, 1e9),
    default=1000.0,
    show_default=True,
    help="Sibling client spans starting within this many µs of the first are one fan-out launch (launch stagger).",
)
@click.option(
    "--jobs",
    type=whole(1, 4096),
    default=None,
    help="Worker threads of the analyzer (default: the CPUs this process may run on; more are capped to them). "
    "The result is the same for every N.",
)
@click.option(
    "--per-trace",
    "per_trace",
    type=click.Choice(list(PER_TRACE)),
    default="index",
    show_default=True,
    help="What the run folder keeps per trace: index (trace_index.ndjson: id, span count, start, end-to-end time) "
    "or full (also critical_paths.ndjson, every trace's whole result: ~225 bytes a span, the input's size again).",
)
@click.option("--timeline", is_flag=True, help="Also write each chosen trace's timeline as an SVG file.")
@click.option(
    "--trace",
    "trace_ids",
    multiple=True,
    metavar="ID",
    help="Trace to draw a timeline of (repeatable; default: the median and the p99 trace).",
)
@jaeger_options
@results_option
@wait_for_store_option
def analyze(
    files: tuple[Path, ...],
    algorithm: str,
    what_if: tuple[str, ...],
    what_if_no_delays: bool,
    max_traces: int,
    stagger_window_us: float,
    jobs: int | None,
    per_trace: str,
    timeline: bool,
    trace_ids: tuple[str, ...],
    results_dir: Path | None,
    wait_for_store_s: float,
    **jaeger: object,
) -> None:
    """Critical paths of trace FILES (Jaeger JSON, NDJSON, OTLP JSON, optionally .gz), or of the traces
    a live Jaeger holds (--jaeger URL --service S): stored and reported."""
    jaeger_study = _jaeger_study(files, jaeger)
    if not files and jaeger_study is None:
        raise click.UsageError("give trace FILES, or --jaeger URL --service NAME")
    options = {
        "trace_files": [str(f.resolve()) for f in files],
        "algorithm": algorithm,
        "what_if": list(what_if),
        "what_if_no_delays": what_if_no_delays,
        "max_traces": max_traces,
        "stagger_window_us": stagger_window_us,
        "jobs": jobs if jobs is not None else len(os.sched_getaffinity(0)),
        "per_trace": per_trace,
        "timeline": timeline,
        "timeline_traces": list(trace_ids),
    }
    outcome = run_and_report(
        ["analyze"],
        False,
        results_dir,
        options,
        form="analyze",
        studies_given=[jaeger_study] if jaeger_study else None,
        wait_for_store_s=wait_for_store_s,
    )
    _print_analysis(outcome.database, outcome.report.parent, outcome.run_id, timeline)


def _print_analysis(database: Path, run_dir: Path, run_id: str, timeline: bool) -> None:
    """The delays of the analyzed traces (figures or "unavailable: reason")
    and the timeline files written."""
    from tailscope.traces.critpath import delay_summary_lines

    try:
        with Store(database, read_only=True) as store:
            docs = [d.document for d in store.documents(run_id, "analyze")]
    except (StoreError, duckdb.Error) as e:
        _store_failure(e)
    for doc in docs:
        for line in delay_summary_lines(doc):
            console.print(line, highlight=False, markup=False)
        for t in doc.get("timelines", []):
            if "missing_trace_id" in t:
                console.print(f"timeline of {t['missing_trace_id']}: unavailable: {t['reason']}", markup=False)
            elif timeline and t.get("svg_path"):
                svg = run_dir / "artifacts" / t["svg_path"]
                console.print(f"timeline ({t.get('label', '')}): {svg}", markup=False)
        if timeline and doc.get("timelines_unavailable"):
            console.print(f"timelines: unavailable: {doc['timelines_unavailable']}", markup=False)
