"""The `tailscope` command."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table as RichTable

from . import machine
from .runner import DB_NAME, RunError, default_results_dir, run_studies
from .store import Store, StoreError
from .studies import all_studies, study_by_name

console = Console()
err_console = Console(stderr=True)

VERDICT_STYLE = {machine.OK: "green", machine.WARN: "yellow", machine.UNAVAILABLE: "red"}

objective_option = click.option(
    "--objective-ms", type=click.FloatRange(min=0.001), default=None,
    help="p99 objective of the thread-count study's recommendation (default 50 ms).")

results_option = click.option(
    "--results", "results_dir", type=click.Path(path_type=Path), default=None,
    help="Results folder (default: ./results or $TAILSCOPE_RESULTS).")


def _results(results_dir: Path | None) -> Path:
    return results_dir or default_results_dir()


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
    for c in machine.doctor_checks():
        t.add_row(c.name, f"[{VERDICT_STYLE[c.verdict]}]{c.verdict}[/]", c.value, c.detail)
    console.print(t)


def _run(study_names: list[str], full: bool, results_dir: Path | None, options: dict, form: str | None = None) -> None:
    try:
        studies = [study_by_name(n) for n in study_names] if study_names else all_studies()
    except KeyError as e:
        err_console.print(f"[red]error:[/] {e.args[0]}")
        sys.exit(2)
    results = _results(results_dir)
    try:
        run_id, report, failures = run_studies(studies, form=form or ("full" if full else "quick"), results_dir=results,
                                               options=options, console=err_console)
    except (RunError, StoreError) as e:
        err_console.print(f"[red]error:[/] {e}")
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted: nothing was stored, no files were left behind[/]")
        sys.exit(130)
    for study, why in failures:
        err_console.print(f"[red]study {study} failed:[/] {why}")
    console.print(f"run [bold]{run_id}[/] stored in {results / DB_NAME}")
    console.print(f"report: {report}")
    if failures:
        sys.exit(1)


@main.command()
@click.option("--full", is_flag=True, help="Long form of every study (quick form by default).")
@click.option("--study", "study_names", multiple=True, help="Run only these studies (repeatable).")
@click.option("--cpus", default=None, help="CLIENT,SERVER cpus for pinned measurements (default: first,last).")
@click.option("--scale", type=click.FloatRange(min=0.001), default=None,
              help="Multiply every sample count (e.g. 0.05 for a smoke run; figures get noisier).")
@objective_option
@results_option
def run(full: bool, study_names: tuple[str, ...], cpus: str | None, scale: float | None, objective_ms: float | None,
        results_dir: Path | None) -> None:
    """The main job: run every available study, store the results, write the report."""
    _run(list(study_names), full, results_dir, _options(cpus, scale, objective_ms))


def _options(cpus: str | None, scale: float | None, objective_ms: float | None = None) -> dict:
    opts: dict = {}
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
    @click.option("--full", is_flag=True, help="Long form.")
    @click.option("--cpus", default=None, help="CLIENT,SERVER cpus for pinned measurements.")
    @click.option("--scale", type=click.FloatRange(min=0.001), default=None, help="Multiply every sample count.")
    @objective_option
    @results_option
    def cmd(full: bool, cpus: str | None, scale: float | None, objective_ms: float | None,
            results_dir: Path | None) -> None:
        _run([name], full, results_dir, _options(cpus, scale, objective_ms))

    cmd.__doc__ = title
    return click.command(name=name)(cmd)


for _study in all_studies():
    if _study.name == "analyze":  # needs trace files: `tailscope analyze FILE...`
        continue
    bench.add_command(_make_bench_command(_study.name, _study.title))


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--algorithm", type=click.Choice(["capstone", "jaeger", "crisp"]), default="capstone",
              show_default=True, help="Critical-path rules (docs/critical-path.md).")
@click.option("--what-if", "what_if", multiple=True, metavar="SERVICE",
              help="Project end-to-end latency with SERVICE's own time removed (repeatable).")
@click.option("--what-if-no-delays", is_flag=True, help="Project latency with all scheduling/join delay removed.")
@click.option("--max-traces", type=click.IntRange(min=0), default=0, help="Stop after N traces (0 = all).")
@results_option
def analyze(files: tuple[Path, ...], algorithm: str, what_if: tuple[str, ...], what_if_no_delays: bool,
            max_traces: int, results_dir: Path | None) -> None:
    """Critical paths of trace FILES (Jaeger JSON, NDJSON, OTLP JSON, optionally .gz): stored and reported."""
    options = {"trace_files": [str(f.resolve()) for f in files], "algorithm": algorithm,
               "what_if": list(what_if), "what_if_no_delays": what_if_no_delays, "max_traces": max_traces}
    _run(["analyze"], False, results_dir, options, form="analyze")


@main.command()
@results_option
def runs(results_dir: Path | None) -> None:
    """List the stored runs."""
    path = _results(results_dir) / DB_NAME
    try:
        with Store(path, read_only=True) as store:
            rows = store.runs()
    except StoreError as e:
        err_console.print(f"[red]error:[/] {e}")
        sys.exit(2)
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
    from .report import render_report

    results = _results(results_dir)
    try:
        with Store(results / DB_NAME, read_only=True) as store:
            run_id = run_id or store.latest_run_id()
            if run_id is None:
                raise StoreError("the results database holds no runs yet (run `tailscope run`)")
            store.run(run_id)  # unknown run -> error listing the known ones
            out = render_report(store, run_id, results / run_id / "report.html")
    except StoreError as e:
        err_console.print(f"[red]error:[/] {e}")
        sys.exit(2)
    except OSError as e:
        err_console.print(f"[red]error:[/] cannot write the report: {e}")
        sys.exit(2)
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
    except StoreError as e:
        err_console.print(f"[red]error:[/] {e}")
        sys.exit(2)
    except OSError as e:
        err_console.print(f"[red]error:[/] cannot write the export: {e}")
        sys.exit(2)


if __name__ == "__main__":
    main()
