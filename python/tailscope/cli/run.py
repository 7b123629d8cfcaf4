"""The run commands: doctor, run, bench, runs, report, export."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import duckdb
from rich.table import Table as RichTable

from tailscope.cli.common import (
    DEPLOY_MODELS,
    VERDICT_STYLE,
    _fail,
    _results,
    _store_failure,
    console,
    err_console,
    results_option,
    stacked,
    study_run_options,
    whole,
)
from tailscope.lab import lifetime, machine
from tailscope.lab.stores import DEFAULT_STORE_MODE
from tailscope.runner import DB_NAME, RunError, RunOutcome, run_studies, write_report
from tailscope.store import Store, StoreError
from tailscope.studies.registry import all_studies, default_studies, study_by_name
from tailscope.studies.socialnet.tracing import TRACING_SAMPLES
from tailscope.studies.tracing import MAX_PAIRS
from tailscope.traces.jaeger import JaegerQueryError


@click.command()
def doctor() -> None:
    """Check what this machine can measure (cores, perf counters, io_uring, limits)."""
    t = RichTable(title="tailscope doctor", show_lines=False)
    for col in ("check", "verdict", "value", "detail"):
        t.add_column(col)
    from tailscope.lab.labhosts import qdisc_checks

    for c in [*machine.doctor_checks(), *qdisc_checks()]:
        t.add_row(c.name, f"[{VERDICT_STYLE[c.verdict]}]{c.verdict}[/]", c.value, c.detail)
    console.print(t)


def run_and_report(
    study_names: list[str],
    full: bool,
    results_dir: Path | None,
    options: dict,
    form: str | None = None,
    studies_given: list | None = None,
    wait_for_store_s: float = 0.0,
) -> RunOutcome:
    try:
        studies = studies_given or ([study_by_name(n) for n in study_names] if study_names else default_studies())
    except KeyError as e:
        _fail(e.args[0])
    results = _results(results_dir)
    try:
        # SIGTERM and SIGHUP take Ctrl-C's path: engines stopped, staging removed, nothing stored.
        with lifetime.terminate_as_interrupt():
            outcome = run_studies(
                studies,
                form=form or ("full" if full else "quick"),
                results_dir=results,
                options=options,
                console=err_console,
                wait_for_store_s=wait_for_store_s,
            )
    except (RunError, JaegerQueryError, StoreError, duckdb.Error, OSError) as e:  # OSError: a full disk mid-run
        _store_failure(e)
    except KeyboardInterrupt as e:
        what = "interrupted" if not isinstance(e, lifetime.Terminated) else f"stopped by {e}"
        err_console.print(f"[yellow]{what}: nothing was stored, no files were left behind[/]")
        sys.exit(lifetime.interrupt_exit_code(e))
    for study, why in outcome.failures:
        err_console.print(f"[red]study {study} failed:[/] {why}")
    console.print(f"run [bold]{outcome.run_id}[/] stored in {outcome.database}")
    console.print(f"report: {outcome.report}")
    if outcome.failures:
        sys.exit(1)
    return outcome


@click.command()
@click.option("--study", "study_names", multiple=True, help="Run only these studies (repeatable).")
@study_run_options
def run(study_names: tuple[str, ...], **given: object) -> None:
    """The main job: run every available study (tracing only when named), store the results, write the report."""
    _run_given(list(study_names), given)


def _run_given(study_names: list[str], given: dict, study_options: dict | None = None) -> None:
    """`_run` with the values of study_run_options (and a bench command's own, already study options)."""
    options = _options(
        given["cpus"],
        given["scale"],
        given["objective_ms"],
        given["load_pacing"],
        given["load_io"],
        str(given["stores"]),
    )
    run_and_report(
        study_names,
        bool(given["full"]),
        given["results_dir"],
        options | (study_options or {}),
        wait_for_store_s=float(given["wait_for_store_s"]),
    )


def _options(
    cpus: str | None,
    scale: float | None,
    objective_ms: float | None = None,
    load_pacing: str | None = None,
    load_io: str | None = None,
    stores: str = DEFAULT_STORE_MODE,
) -> dict:
    # Always set, so every study reads the same requested mode (studies/common.requested_stores).
    opts: dict = {"stores": stores}
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


@click.group()
def bench() -> None:
    """Run one study on its own (stored and reported like `tailscope run`)."""


# Sampling choices as a user types them, in percent ("100", "1"), to the study's fractions.
_SAMPLING_PCT = {f"{s * 100:g}": s for s in TRACING_SAMPLES}


def _sampling_fractions(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> tuple[float, ...]:
    """--sampling's percent choices (already checked by click.Choice) as the study's fractions."""
    return tuple(_SAMPLING_PCT[v] for v in value)


# The options one study's bench command takes beyond study_run_options, each the name of the study
# option it sets. `bench tracing` reruns one row of the tracing-cost table alone, for longer: a row a
# run left undecided needs about (width ÷ wanted width)² times its pairs, and the other nine need not
# run again.
_BENCH_OPTIONS: dict[str, dict[str, object]] = {
    "tracing": {
        "tracing_models": click.option(
            "--model",
            "tracing_models",
            multiple=True,
            type=click.Choice(DEPLOY_MODELS),
            help="Only this concurrency model (repeatable; default: every model).",
        ),
        "tracing_samplings": click.option(
            "--sampling",
            "tracing_samplings",
            multiple=True,
            type=click.Choice(list(_SAMPLING_PCT)),
            callback=_sampling_fractions,
            help="Only this sampling, in percent (repeatable; default: both).",
        ),
        "tracing_pairs": click.option(
            "--pairs",
            "tracing_pairs",
            type=whole(1, MAX_PAIRS),
            default=None,
            help="Off/on pairs per row (a 2.5 s stretch of the run each); overrides the form and --scale.",
        ),
    },
}


def _bench_study_options(name: str, given: dict) -> dict:
    """Pop `name`'s own bench options from `given` into study options (unset ones left out)."""
    out: dict = {}
    for key in _BENCH_OPTIONS.get(name, {}):
        value = given.pop(key, None)
        if value is None or value == ():
            continue
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


def _make_bench_command(name: str, title: str):
    @stacked(*_BENCH_OPTIONS.get(name, {}).values())
    @study_run_options
    def cmd(**given: object) -> None:
        own = _bench_study_options(name, given)
        _run_given([name], given, own)

    cmd.__doc__ = title
    return click.command(name=name)(cmd)


for _study in all_studies():
    if _study.name == "analyze":  # needs trace files: `tailscope analyze FILE...`
        continue
    bench.add_command(_make_bench_command(_study.name, _study.title))


@click.command()
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


@click.command()
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


@click.command()
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
