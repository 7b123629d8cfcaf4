"""The `tailscope` command."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import click
import duckdb
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from tailscope.atomicfile import write_text_atomic
from tailscope.lab import lifetime, machine
from tailscope.lab.allow_list import check_base_url
from tailscope.runner import DB_NAME, RunError, default_results_dir, run_studies, write_report
from tailscope.store import Store, StoreError
from tailscope.studies.registry import all_studies, study_by_name
from tailscope.traces.jaeger import JaegerQueryError

console = Console()
err_console = Console(stderr=True)

VERDICT_STYLE = {machine.OK: "green", machine.WARN: "yellow", machine.UNAVAILABLE: "red"}

objective_option = click.option(
    "--objective-ms",
    type=click.FloatRange(min=0.001),
    default=None,
    help="p99 objective of the thread-count study's recommendation (default 50 ms).",
)

load_pacing_option = click.option(
    "--load-pacing",
    type=click.Choice(["busy-poll", "sleep"]),
    default=None,
    help="How tailscope-load paces on its own core in the echo study: busy-poll (default; no wake-up "
    "latency in the send lag) or sleep (until --spin-us before each send). Recorded in every document.",
)

load_io_option = click.option(
    "--load-io",
    type=click.Choice(["by-connections", "epoll", "uring"]),
    default=None,
    help="How tailscope-load moves bytes in the echo study: by-connections (default; its io_uring path "
    "from 100 connections up, where epoll's send+recv per echo made the generator the limit, epoll below), "
    "or one path for every point. Recorded in every document.",
)

results_option = click.option(
    "--results",
    "results_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Results folder (default: ./results or $TAILSCOPE_RESULTS).",
)


def _check_cpus(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """--cpus CLIENT,SERVER: two CPU numbers this process may run on."""
    if value is None:
        return None
    parts = value.split(",")
    allowed = os.sched_getaffinity(0)
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise click.BadParameter(f"'{value}' is not CLIENT,SERVER (two CPU numbers, e.g. 0,1)")
    bad = [int(p) for p in parts if int(p) not in allowed]
    if bad:
        raise click.BadParameter(f"CPU {bad[0]} is not one this process may use (allowed: {sorted(allowed)})")
    return value


def stacked(*options):
    """One decorator applying several click options, first one first in --help."""

    def apply(f):
        for option in reversed(options):
            f = option(f)
        return f

    return apply


# The options of every command that runs studies (`run`, `bench STUDY`): one definition, so the
# commands cannot drift apart.
study_run_options = stacked(
    click.option("--full", is_flag=True, help="Long form of every study (quick form by default)."),
    click.option(
        "--cpus",
        default=None,
        callback=_check_cpus,
        help="CLIENT,SERVER cpus for pinned measurements (default: first,last).",
    ),
    click.option(
        "--scale",
        type=click.FloatRange(min=0.001),
        default=None,
        help="Multiply every sample count (e.g. 0.05 for a smoke run; figures get noisier).",
    ),
    objective_option,
    load_pacing_option,
    load_io_option,
    results_option,
)


def sampling_option(help_text: str):
    """--sampling: the fraction of requests that were traced (a rate read from traces is divided by it)."""
    return click.option("--sampling", type=click.FloatRange(1e-6, 1.0), default=1.0, show_default=True, help=help_text)


def jaeger_urls_option():
    """--jaeger URL (repeatable): read traces from a Jaeger query API as well as from files."""
    return click.option(
        "--jaeger",
        "jaeger_urls",
        multiple=True,
        metavar="URL",
        help="Also read traces from a Jaeger query API (repeatable).",
    )


def cpu_fraction_option(help_text: str):
    """--cpu-fraction: the share of a span's own time that is CPU (a trace cannot tell)."""
    return click.option(
        "--cpu-fraction", type=click.FloatRange(0.0, 1.0), default=1.0, show_default=True, help=help_text
    )


def twin_duration_option(default_s: float, help_text: str):
    """--duration-s of a twin run."""
    return click.option(
        "--duration-s", type=click.FloatRange(1.0, 3600.0), default=default_s, show_default=True, help=help_text
    )


def max_traces_option(help_text: str):
    return click.option("--max-traces", type=click.IntRange(min=0), default=0, help=help_text)


# What `--jaeger URL` fetches for the twin commands: every service's traces, this many per service,
# from this far back. `topology from-traces` can change them (jaeger_fetch_options); `advise` uses them.
JAEGER_FETCH_LIMIT = 1000
JAEGER_FETCH_LOOKBACK = "1h"

jaeger_fetch_options = stacked(
    jaeger_urls_option(),
    click.option(
        "--jaeger-service", default=None, help="Only this service's traces from --jaeger (default: every service)."
    ),
    click.option(
        "--jaeger-limit",
        type=click.IntRange(1, 100_000),
        default=JAEGER_FETCH_LIMIT,
        show_default=True,
        help="Traces per service from --jaeger.",
    ),
    click.option(
        "--jaeger-lookback",
        default=JAEGER_FETCH_LOOKBACK,
        show_default=True,
        help="How far back --jaeger looks (Jaeger's lookback).",
    ),
)


def traced_model_option(help_text: str):
    """--model: the concurrency model the traced system ran (checked by _check_model)."""
    return click.option("--model", default="std-async", show_default=True, help=help_text)


def json_out_option(name: str, dest: str, help_text: str):
    """A file to write a result document (JSON) to, besides what is printed."""
    return click.option(name, dest, type=click.Path(dir_okay=False, path_type=Path), default=None, help=help_text)


def _results(results_dir: Path | None) -> Path:
    return results_dir or default_results_dir()


def _fail(message: object, exit_code: int = 2) -> NoReturn:
    """One red `error:` line on stderr, then exit (2 unless told)."""
    err_console.print(f"[red]error:[/] {message}")
    sys.exit(exit_code)


def _store_failure(e: Exception) -> NoReturn:
    """Exit 2 with one clear line; a DuckDB error that got past the open-time
    check (store.check_database) still names the database instead of a traceback."""
    if isinstance(e, duckdb.Error):
        e = StoreError(
            f"the results database could not be read: {str(e).strip().splitlines()[0]} "
            "(move tailscope.duckdb aside to start a new one)"
        )
    _fail(e)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tailscope")
def main() -> None:
    """tailscope: where does a microservice's tail latency come from?"""


@main.command()
def doctor() -> None:
    """Check what this machine can measure (cores, perf counters, io_uring, limits)."""
    t = RichTable(title="tailscope doctor", show_lines=False)
    for col in ("check", "verdict", "value", "detail"):
        t.add_column(col)
    from tailscope.lab.labhosts import qdisc_checks

    for c in [*machine.doctor_checks(), *qdisc_checks()]:
        t.add_row(c.name, f"[{VERDICT_STYLE[c.verdict]}]{c.verdict}[/]", c.value, c.detail)
    console.print(t)


def _run(
    study_names: list[str],
    full: bool,
    results_dir: Path | None,
    options: dict,
    form: str | None = None,
    studies_given: list | None = None,
) -> str:
    try:
        studies = studies_given or ([study_by_name(n) for n in study_names] if study_names else all_studies())
    except KeyError as e:
        _fail(e.args[0])
    results = _results(results_dir)
    try:
        # SIGTERM and SIGHUP take Ctrl-C's path: engines stopped, staging removed, nothing stored.
        with lifetime.terminate_as_interrupt():
            run_id, report, failures = run_studies(
                studies,
                form=form or ("full" if full else "quick"),
                results_dir=results,
                options=options,
                console=err_console,
            )
    except (RunError, JaegerQueryError, StoreError, duckdb.Error) as e:
        _store_failure(e)
    except KeyboardInterrupt as e:
        what = "interrupted" if not isinstance(e, lifetime.Terminated) else f"stopped by {e}"
        err_console.print(f"[yellow]{what}: nothing was stored, no files were left behind[/]")
        sys.exit(lifetime.interrupt_exit_code(e))
    for study, why in failures:
        err_console.print(f"[red]study {study} failed:[/] {why}")
    console.print(f"run [bold]{run_id}[/] stored in {results / DB_NAME}")
    console.print(f"report: {report}")
    if failures:
        sys.exit(1)
    return run_id


@main.command()
@click.option("--study", "study_names", multiple=True, help="Run only these studies (repeatable).")
@study_run_options
def run(study_names: tuple[str, ...], **given: object) -> None:
    """The main job: run every available study, store the results, write the report."""
    _run_given(list(study_names), given)


def _run_given(study_names: list[str], given: dict) -> None:
    """`_run` with the values of study_run_options."""
    _run(
        study_names,
        bool(given["full"]),
        given["results_dir"],
        _options(given["cpus"], given["scale"], given["objective_ms"], given["load_pacing"], given["load_io"]),
    )


def _options(
    cpus: str | None,
    scale: float | None,
    objective_ms: float | None = None,
    load_pacing: str | None = None,
    load_io: str | None = None,
) -> dict:
    opts: dict = {}
    if load_pacing:
        opts["load_pacing"] = load_pacing
    if load_io:
        opts["load_io"] = load_io
    if objective_ms:
        opts["objective_ms"] = objective_ms
    if cpus:
        opts["cpus"] = cpus
    if scale:
        opts["scale"] = scale
    return opts


@main.group()
def bench() -> None:
    """Run one study on its own (stored and reported like `tailscope run`)."""


def _make_bench_command(name: str, title: str):
    @study_run_options
    def cmd(**given: object) -> None:
        _run_given([name], given)

    cmd.__doc__ = title
    return click.command(name=name)(cmd)


for _study in all_studies():
    if _study.name == "analyze":  # needs trace files: `tailscope analyze FILE...`
        continue
    bench.add_command(_make_bench_command(_study.name, _study.title))


def jaeger_options(f):
    """`analyze --jaeger …`: the options of jaeger_query (docs/deploy.md)."""
    f = click.option(
        "--limit",
        "jaeger_limit",
        type=click.IntRange(1, 1_000_000),
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


@main.command()
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
    type=click.FloatRange(min=0, max=1e9),
    default=1000.0,
    show_default=True,
    help="Sibling client spans starting within this many µs of the first are one fan-out launch (launch stagger).",
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
def analyze(
    files: tuple[Path, ...],
    algorithm: str,
    what_if: tuple[str, ...],
    what_if_no_delays: bool,
    max_traces: int,
    stagger_window_us: float,
    timeline: bool,
    trace_ids: tuple[str, ...],
    results_dir: Path | None,
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
        "timeline": timeline,
        "timeline_traces": list(trace_ids),
    }
    run_id = _run(
        ["analyze"], False, results_dir, options, form="analyze", studies_given=[jaeger_study] if jaeger_study else None
    )
    _print_analysis(_results(results_dir), run_id, timeline)


def _print_analysis(results: Path, run_id: str, timeline: bool) -> None:
    """The delays of the analyzed traces (figures or "unavailable: reason")
    and the timeline files written."""
    from tailscope.traces.critpath import delay_summary_lines

    try:
        with Store(results / DB_NAME, read_only=True) as store:
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
                svg = results / run_id / "artifacts" / t["svg_path"]
                console.print(f"timeline ({t.get('label', '')}): {svg}", markup=False)
        if timeline and doc.get("timelines_unavailable"):
            console.print(f"timelines: unavailable: {doc['timelines_unavailable']}", markup=False)


@main.command()
@results_option
def runs(results_dir: Path | None) -> None:
    """List the stored runs."""
    path = _results(results_dir) / DB_NAME
    try:
        with Store(path, read_only=True) as store:
            rows = store.runs()
    except (StoreError, duckdb.Error) as e:
        _store_failure(e)
    t = RichTable()
    t.add_column("run", no_wrap=True)  # the id is what users copy: never wrap or elide it
    for col in ("started (UTC)", "form", "studies", "status"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["run_id"], str(r["started_at"])[:19], r["form"], ", ".join(r["studies"] or []), r["status"])
    console.print(t)


@main.command()
@click.argument("run_id", required=False)
@results_option
def report(run_id: str | None, results_dir: Path | None) -> None:
    """Regenerate the HTML report of RUN_ID (default: the latest run)."""

    results = _results(results_dir)
    try:
        with Store(results / DB_NAME, read_only=True) as store:
            run_id = run_id or store.latest_run_id()
            if run_id is None:
                raise StoreError("the results database holds no runs yet (run `tailscope run`)")
            store.run(run_id)  # unknown run -> error listing the known ones
            out = write_report(store, run_id, results / run_id / "report.html")
    except (StoreError, duckdb.Error) as e:
        _store_failure(e)
    except OSError as e:
        _fail(f"cannot write the report: {e}")
    console.print(f"report: {out}")


@main.command()
@click.argument("run_id", required=False)
@click.option("--to", "out_dir", type=click.Path(path_type=Path), required=True, help="Folder to write into.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True)
@results_option
def export(run_id: str | None, out_dir: Path, fmt: str, results_dir: Path | None) -> None:
    """Export one run's tables (default: the latest run) as Parquet or CSV files."""
    try:
        with Store(_results(results_dir) / DB_NAME, read_only=True) as store:
            run_id = run_id or store.latest_run_id()
            if run_id is None:
                raise StoreError("the results database holds no runs yet (run `tailscope run`)")
            for path in store.export(run_id, out_dir, fmt):
                console.print(str(path))
    except (StoreError, duckdb.Error) as e:
        _store_failure(e)
    except OSError as e:
        _fail(f"cannot write the export: {e}")


@main.command()
@click.option(
    "--minutes",
    type=click.FloatRange(min=1.0, max=24 * 60.0),
    default=30.0,
    show_default=True,
    help="Wall-clock budget of the whole soak, split evenly over the models.",
)
@click.option("--model", "models", multiple=True, help="Models to soak (repeatable; default: all five).")
@click.option(
    "--interval-s",
    type=click.FloatRange(min=5.0, max=3600.0),
    default=60.0,
    show_default=True,
    help="Length of one reported interval.",
)
@click.option(
    "--fraction",
    type=click.FloatRange(min=0.05, max=1.0),
    default=0.8,
    show_default=True,
    help="Offered rate as a fraction of each model's measured closed-loop ceiling.",
)
@json_out_option("--out", "out_path", "Also write every interval and verdict as JSON here.")
def soak(minutes: float, models: tuple[str, ...], interval_s: float, fraction: float, out_path: Path | None) -> None:
    """Hold the socialnet graph at a fraction of its ceiling: per-interval rate, p50/p99, errors, RSS, threads, fds."""
    from tailscope.lab.engines import EngineError
    from tailscope.lab.graph import MODELS
    from tailscope.studies import soak as soak_mod
    from tailscope.units import fmt_ns

    chosen = list(models) or list(MODELS)
    unknown = [m for m in chosen if m not in MODELS]
    if unknown:
        _fail(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(MODELS)})")

    def on_interval(s: soak_mod.ModelSoak, iv: soak_mod.Interval) -> None:
        procs = "  ".join(
            f"{p.service.removesuffix('-service')}:{(p.rss_bytes or 0) / 2**20:.1f}M/{p.threads}t/{p.fds}fd"
            if p.rss_bytes is not None
            else f"{p.service}: unavailable"
            for p in iv.processes
        )
        p50 = fmt_ns(iv.p50_ns) if iv.p50_ns is not None else "unavailable"
        p99 = fmt_ns(iv.p99_ns) if iv.p99_ns is not None else "unavailable"
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
        elif e.saturated_s:
            outside = fmt_ns(e.p99_outside_ns) if e.p99_outside_ns else "unavailable"
            episodes = f" saturated {len(e.saturated_s)} s ({soak_mod.spans_text(e.saturated_s)}) p99 outside {outside}"
        else:
            episodes = " saturated 0 s"
        console.print(
            f"{s.model} #{iv.index}: {iv.achieved_per_s:.0f}/s of {iv.requested_per_s:.0f}/s "
            f"p50 {p50} p99 {p99} errors {iv.errors} cpu/req {cpu}{machine}{episodes} | {procs}"
        )

    def on_model(s: soak_mod.ModelSoak) -> None:
        console.print(f"[bold]{s.model}[/]: ceiling {s.ceiling_per_s:.0f}/s, held at {s.rate_per_s:.0f}/s")
        for v in s.verdicts:
            console.print(f"  {v}")

    try:
        results = soak_mod.run_soak(
            minutes, chosen, interval_s=interval_s, fraction=fraction, on_interval=on_interval, on_model=on_model
        )
    except EngineError as e:
        _fail(e)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted: the graph was stopped[/]")
        sys.exit(130)
    if out_path is not None:
        write_text_atomic(out_path, soak_mod.to_json(results))
        console.print(f"written: {out_path}")


@main.group()
def hosts() -> None:
    """Lab hosts: network namespaces on one bridge, addresses from 198.18.0.0/15 (docs/lab-hosts.md)."""


def _lab_failure(e: Exception) -> NoReturn:
    _fail(e, getattr(e, "exit_code", 1))


lab_prefix_option = click.option(
    "--prefix", default="ts", show_default=True, help="Name prefix of every lab object (PREFIX-hN, PREFIX-br0)."
)


@hosts.command("up")
@click.option("--hosts", "count", type=int, default=2, show_default=True, help="Number of lab hosts, 1 … 64.")
@click.option("--subnet", default="198.18.0.0/24", show_default=True, help="Addresses, inside 198.18.0.0/15.")
@lab_prefix_option
def hosts_up(count: int, subnet: str, prefix: str) -> None:
    """Create the lab hosts (idempotent: the same lab twice is a no-op)."""
    from tailscope.lab import labhosts

    try:
        config = labhosts.validate(count, subnet, prefix)
        lab = labhosts.up(config, log=lambda m: console.print(m))
    except labhosts.LabError as e:
        _lab_failure(e)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted: what `hosts up` had made was removed[/]")
        sys.exit(130)
    console.print(f"lab {prefix}: {len(lab.hosts)} hosts on {subnet}, bridge {prefix}-br0")


@hosts.command("down")
@click.option("--stop", "stop_processes", is_flag=True, help="Terminate processes still running inside lab hosts.")
@lab_prefix_option
def hosts_down(stop_processes: bool, prefix: str) -> None:
    """Remove every lab object of PREFIX (and nothing else); refuses while processes run inside unless --stop."""
    from tailscope.lab import labhosts

    try:
        labhosts.validate(1, labhosts.DEFAULT_SUBNET, prefix)
        removed = labhosts.down(prefix, stop_processes=stop_processes, log=lambda m: console.print(m))
    except labhosts.LabError as e:
        _lab_failure(e)
    console.print(f"lab {prefix}: removed {len(removed)} objects" if removed else f"lab {prefix}: nothing to remove")


@hosts.command("list")
@lab_prefix_option
def hosts_list(prefix: str) -> None:
    """Show the lab hosts as the kernel holds them: addresses and processes inside."""
    from tailscope.lab import labhosts

    try:
        labhosts.validate(1, labhosts.DEFAULT_SUBNET, prefix)
        lab = labhosts.state(prefix)
    except labhosts.LabError as e:
        _lab_failure(e)
    shape = f"{lab.config.hosts} hosts on {lab.config.subnet}" if lab.config else "no state file"
    console.print(f"lab {prefix}: {lab.status} ({shape})")
    if not lab.hosts:
        return
    t = RichTable()
    for col in ("host", "address", "link", "processes"):
        t.add_column(col)
    for h in lab.hosts:
        t.add_row(h.name, h.address or "none", h.veth, ", ".join(map(str, h.pids)) or "none")
    console.print(t)


@main.group()
def deploy() -> None:
    """Hand a topology to a real cluster (docs/deploy.md)."""


@deploy.command("k8s")
@click.option("--topology", "topology_path", type=click.Path(path_type=Path), required=True, help="Topology YAML/JSON.")
@click.option(
    "--deployment",
    "deployment_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Host groups, CPUs and memory per service (docs/lab-hosts.md).",
)
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True, help="New folder for the manifests.")
@click.option("--namespace", default="tailscope", show_default=True)
@click.option(
    "--image", default="tailscope:dev", show_default=True, help="Image built from the repository's Dockerfile."
)
@click.option(
    "--model",
    default="coroutine",
    show_default=True,
    type=click.Choice(["std-async", "std-thread", "pool-blocking", "pool-callback", "coroutine"]),
)
@click.option(
    "--otlp-endpoint",
    default="http://127.0.0.1:4318",
    show_default=True,
    help="Where services send spans (a collector agent in the pod's network namespace).",
)
@click.option("--trace-sample", type=click.FloatRange(0.0, 1.0), default=0.01, show_default=True)
@click.option(
    "--rate",
    "rate_per_s",
    type=click.IntRange(1, 10_000_000),
    default=100,
    show_default=True,
    help="The load Job's request rate per second.",
)
@click.option(
    "--duration-s",
    type=click.IntRange(1, 86400),
    default=60,
    show_default=True,
    help="The load Job's measured duration.",
)
def deploy_k8s(
    topology_path: Path,
    deployment_path: Path | None,
    out_dir: Path,
    namespace: str,
    image: str,
    model: str,
    otlp_endpoint: str,
    trace_sample: float,
    rate_per_s: int,
    duration_s: int,
) -> None:
    """Write Kubernetes manifests for TOPOLOGY: Namespace, ConfigMap, Deployment + Service per service, a load Job."""
    from tailscope.lab import k8s
    from tailscope.lab import topology as topo
    from tailscope.lab.engines import EngineError

    try:
        check_base_url(otlp_endpoint, "--otlp-endpoint")
        doc = topo.load(topology_path)
        plan = k8s.load_deployment(deployment_path, topo.services(doc)) if deployment_path else None
        objs = k8s.manifests(
            doc,
            plan,
            namespace=namespace,
            image=image,
            model=model,
            otlp_endpoint=otlp_endpoint,
            trace_sample=trace_sample,
            load_rate_per_s=rate_per_s,
            load_duration_s=duration_s,
        )
        paths = k8s.write(objs, out_dir)
    except (k8s.DeployError, topo.TopologyError, ValueError, EngineError) as e:
        _fail(e)
    for p in paths:
        console.print(str(p))


# ---- from traces to a runnable twin (docs/twin.md) ----------------------------------------------


def _progress(message: str) -> None:
    err_console.print(message, markup=False)


def _require_traces(files: tuple[Path, ...], jaeger_urls: tuple[str, ...]) -> None:
    if not files and not jaeger_urls:
        _fail("give trace FILES or --jaeger URL")


def _check_model(flag: str, model: str) -> None:
    """Exit 2 naming `flag` unless `model` is one tailscope-svc runs."""
    from tailscope.lab.graph import MODELS

    if model not in MODELS:
        _fail(f"{flag}: unknown model {model} (known: {', '.join(MODELS)})")


def _fail_unmarked(e: Exception, exit_code: int) -> NoReturn:
    """The red `error:` line for messages that may hold brackets (paths, JSON): the message is
    plain text, never read as markup (with markup off for the whole line the prefix printed as
    the literal `[red]error:[/]`)."""
    err_console.print(Text.assemble(("error:", "red"), " ", str(e)), highlight=False)
    sys.exit(exit_code)


@contextmanager
def _twin_failures(
    input_errors: tuple[type[Exception], ...], *, engine_exit_1_is_input: bool, interrupted: str | None = None
) -> Iterator[None]:
    """How the twin commands end on an error: exit 1 when the traces or the topology cannot be used
    (`input_errors`; an engine that exited with 1 too where `engine_exit_1_is_input`), 2 for any
    other engine failure. With `interrupted`, SIGTERM and SIGHUP take Ctrl-C's path and an
    interrupt ends with `interrupted: <interrupted>`."""
    from tailscope.lab.engines import EngineError

    try:
        if interrupted is None:
            yield
        else:
            with lifetime.terminate_as_interrupt():
                yield
    except input_errors as e:
        _fail_unmarked(e, 1)
    except EngineError as e:
        _fail_unmarked(e, 1 if engine_exit_1_is_input and "exited with 1" in str(e) else 2)
    except KeyboardInterrupt as e:
        if interrupted is None:
            raise
        err_console.print(f"[yellow]interrupted: {interrupted}[/]")
        sys.exit(lifetime.interrupt_exit_code(e))


def _write_document(path: Path, doc: dict) -> None:
    import json

    write_text_atomic(path, json.dumps(doc, indent=1, allow_nan=False) + "\n")
    console.print(f"written: {path}", markup=False)


@main.group()
def topology() -> None:
    """Topologies: infer one from a user's traces."""


@topology.command("from-traces")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@jaeger_fetch_options
@click.option(
    "-o", "--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Topology YAML to write."
)
@cpu_fraction_option("Share of a span's own time that is CPU (the rest is waiting); not in a trace.")
@click.option(
    "--deferred-gap-us",
    type=click.FloatRange(0.0, 1e6),
    default=20.0,
    show_default=True,
    help="A call starting within this many µs of its group's previous result being consumed is deferred.",
)
@click.option(
    "--min-traces",
    type=click.IntRange(1, 10**9),
    default=20,
    show_default=True,
    help="Endpoints seen in fewer traces are kept but flagged.",
)
@sampling_option("Fraction of requests that were traced (for the recorded rate).")
@max_traces_option("Read at most N traces (0 = all).")
@click.option("--name", default=None, help="The topology's name (default: the output file's stem).")
@click.option(
    "--calibrate",
    "calibrate_model",
    default=None,
    metavar="MODEL",
    help="Run the twin once under MODEL and take off each stage what tailscope's runtime adds (docs/twin.md).",
)
def topology_from_traces(
    files: tuple[Path, ...],
    jaeger_urls: tuple[str, ...],
    jaeger_service: str | None,
    jaeger_limit: int,
    jaeger_lookback: str,
    out: Path,
    cpu_fraction: float,
    deferred_gap_us: float,
    min_traces: int,
    sampling: float,
    max_traces: int,
    name: str | None,
    calibrate_model: str | None,
) -> None:
    """Infer a topology (services, endpoints, stages, distributions) from trace FILES; exit 1 when
    nothing can be inferred, 2 on usage errors."""
    import tempfile

    from tailscope.lab.topology import TopologyError
    from tailscope.twin.commands import from_traces, inference_lines, trace_inputs
    from tailscope.twin.infer import InferenceError, InferOptions

    _require_traces(files, jaeger_urls)
    if calibrate_model is not None:
        _check_model("--calibrate", calibrate_model)
    options = InferOptions(cpu_fraction, deferred_gap_us, min_traces, sampling, name or out.stem)
    with (
        tempfile.TemporaryDirectory(prefix="tailscope-jaeger-") as tmp,
        _twin_failures((OSError, ValueError, InferenceError, TopologyError), engine_exit_1_is_input=True),
    ):
        inputs = trace_inputs(
            files, jaeger_urls, Path(tmp), service=jaeger_service, limit=jaeger_limit, lookback=jaeger_lookback
        )
        _, report, _ = from_traces(
            inputs, out, options, max_traces=max_traces, calibrate_model=calibrate_model, progress=_progress
        )
    for line in inference_lines(report):
        console.print(line, markup=False, highlight=False)
    console.print(f"written: {out} and {out.name}.inference.json", markup=False)


@main.group()
def twin() -> None:
    """Run an inferred topology (a twin) and compare it with the traces it came from."""


@twin.command("validate")
@click.option(
    "--topology", "topology_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True
)
@click.option(
    "--traces",
    "trace_files",
    multiple=True,
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The original traces (repeatable).",
)
@traced_model_option("Concurrency model the traced system ran (tailscope-svc --model).")
@click.option(
    "--rate-per-s",
    type=click.FloatRange(0.1, 1e6),
    default=None,
    help="Offered rate (default: from the trace timestamps ÷ --sampling).",
)
@sampling_option("Fraction of requests that were traced.")
@twin_duration_option(5.0, "Measured time of the twin run.")
@json_out_option("--out", "out_path", "Also write the validation document (JSON) here.")
def twin_validate(
    topology_path: Path,
    trace_files: tuple[Path, ...],
    model: str,
    rate_per_s: float | None,
    sampling: float,
    duration_s: float,
    out_path: Path | None,
) -> None:
    """Run the twin under MODEL at the traces' rate; compare p50/p90/p99 and KS distance per service."""
    from tailscope.lab.topology import TopologyError
    from tailscope.twin.commands import VALIDATION_COLUMNS, validation_rows, validation_verdict
    from tailscope.twin.validate import validate

    _check_model("--model", model)
    with _twin_failures(
        (TopologyError, ValueError), engine_exit_1_is_input=False, interrupted="the twin was stopped, nothing written"
    ):
        doc = validate(
            topology_path,
            list(trace_files),
            model,
            rate_per_s=rate_per_s,
            sampling=sampling,
            duration_s=duration_s,
            progress=_progress,
        )
    t = RichTable(title=f"twin of {topology_path.name} vs its traces")
    for col in VALIDATION_COLUMNS:
        t.add_column(col)
    for row in validation_rows(doc):
        t.add_row(*row)
    console.print(t)
    console.print(validation_verdict(doc), markup=False, highlight=False)
    if out_path is not None:
        _write_document(out_path, doc)


@main.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@jaeger_urls_option()
@click.option(
    "--objective-ms",
    type=click.FloatRange(0.001, 600_000.0),
    default=50.0,
    show_default=True,
    help="p99 objective for the max rate (ms).",
)
@traced_model_option("Concurrency model the traced system ran (validated).")
@click.option(
    "--quick", is_flag=True, help="3 alternatives, rates × 1 and 4 (default: every alternative, rates × 1, 2, 4, 8)."
)
@json_out_option("--json", "json_out", "Write the advice document (tailscope.twin.advice/1) here.")
@cpu_fraction_option("Share of a span's own time that is CPU (varied ±50 % for the leader).")
@sampling_option("Fraction of requests that were traced (for the recorded rate).")
@twin_duration_option(3.0, "Measured time of each twin run.")
def advise(
    files: tuple[Path, ...],
    jaeger_urls: tuple[str, ...],
    objective_ms: float,
    model: str,
    quick: bool,
    json_out: Path | None,
    cpu_fraction: float,
    sampling: float,
    duration_s: float,
) -> None:
    """Infer the twin of trace FILES, validate it, run it under the alternatives (models, pool
    sizes, placements) and rank them; exit 1 when nothing can be inferred, 2 on usage errors."""
    import tempfile

    from tailscope.lab.topology import TopologyError
    from tailscope.twin.advise import advice_lines
    from tailscope.twin.advise import advise as run_advise
    from tailscope.twin.commands import trace_inputs
    from tailscope.twin.infer import InferenceError, InferOptions
    from tailscope.twin.spans import read_traces

    _require_traces(files, jaeger_urls)
    _check_model("--model", model)
    with (
        _twin_failures(
            (OSError, ValueError, InferenceError, TopologyError),
            engine_exit_1_is_input=True,
            interrupted="every twin was stopped, nothing written",
        ),
        tempfile.TemporaryDirectory(prefix="tailscope-jaeger-") as tmp,
    ):
        inputs = trace_inputs(
            files, jaeger_urls, Path(tmp), service=None, limit=JAEGER_FETCH_LIMIT, lookback=JAEGER_FETCH_LOOKBACK
        )
        doc = run_advise(
            read_traces(inputs),
            model,
            objective_ms=objective_ms,
            options=InferOptions(cpu_fraction=cpu_fraction, sampling=sampling, name="advise-twin"),
            duration_s=duration_s,
            quick=quick,
            progress=_progress,
        )
    for line in advice_lines(doc):
        console.print(line, markup=False, highlight=False)
    if json_out is not None:
        _write_document(json_out, doc)


if __name__ == "__main__":
    main()
