"""`tailscope run`: run studies, store the run in one transaction, write the report.

Nothing half-written: artifacts go to a hidden staging folder that is renamed
to results/<run-id> only when the run is stored and its report rendered; on a
crash, Ctrl-C, SIGTERM or SIGHUP the staging folder is removed and the database
is untouched. A staging folder whose run was killed outright is removed by the
next run (its name carries the owner's PID).
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from tailscope.lab import lifetime, machine
from tailscope.lab.engines import EngineError, remove_stale_temp
from tailscope.report import render_report, report_sections
from tailscope.store import EngineDocument, RunRecord, Store, check_database
from tailscope.studies.base import RunContext, Study
from tailscope.studies.registry import all_studies

DB_NAME = "tailscope.duckdb"
# results/.staging-<run-id>-pid<PID>: the owner's PID tells a later run whether it is stale.
STAGING_PREFIX = ".staging-"


class RunError(RuntimeError):
    pass


def default_results_dir() -> Path:
    return Path(os.environ.get("TAILSCOPE_RESULTS", "results"))


def check_writable(results_dir: Path) -> None:
    probe = results_dir / f".write-test-{os.getpid()}"
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        probe.write_text("ok")
    except OSError as e:
        raise RunError(f"results folder {results_dir} is not writable: {e.strerror or e}") from e
    finally:
        # A full disk creates the file and then fails the write: the probe must go either way.
        try:
            probe.unlink(missing_ok=True)
        except OSError:
            pass


def remove_stale_leftovers(results_dir: Path) -> None:
    """Staging folders and engine temp folders of runs whose process died
    (SIGKILL, power loss): nothing else would ever remove them."""
    lifetime.remove_stale(results_dir, STAGING_PREFIX, unowned_is_stale=True)
    remove_stale_temp()


def new_run_id(now: datetime) -> str:
    return now.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def point_latest(results_dir: Path, run_id: str) -> None:
    """results/latest -> <run-id>, replaced atomically (symlink + rename)."""
    link = results_dir / "latest"
    tmp = results_dir / f".latest-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(run_id, tmp)
    os.replace(tmp, link)


def format_wall_s(seconds: float) -> str:
    minutes, sec = divmod(round(seconds), 60)
    return f"{minutes} min {sec:02d} s" if minutes else f"{sec} s"


def print_wall_times(console: Console, wall_s: dict[str, float]) -> None:
    """The per-study wall times, so a run that outgrows its coffee break says where."""
    if not wall_s:
        return
    parts = ", ".join(f"{name} {format_wall_s(s)}" for name, s in wall_s.items())
    console.print(f"wall time per study: {parts}; total {format_wall_s(sum(wall_s.values()))}")


def write_report(store: Store, run_id: str, out_path: Path) -> Path:
    """The run's report, regenerated from the store: each study of the run renders its section."""
    run = store.run(run_id)
    names = list(run["studies"] or [])
    sections = [s.section(store, run_id) for s in all_studies() if s.name in names]
    failed = [(s, r) for s, n, _, r in store.unavailable(run_id) if n == "(study)"]
    return render_report(run, report_sections(sections, failed), out_path)


def run_studies(
    studies: list[Study], *, form: str, results_dir: Path, options: dict | None = None, console: Console | None = None
) -> tuple[str, Path, list[tuple[str, str]]]:
    console = console or Console(stderr=True)
    options = options or {}
    check_writable(results_dir)
    # Before any study runs: a damaged database fails the run here, with nothing written.
    check_database(results_dir / DB_NAME)
    remove_stale_leftovers(results_dir)
    started = datetime.now(UTC)
    run_id = new_run_id(started)
    staging = results_dir / lifetime.owned_name(f"{STAGING_PREFIX}{run_id}-")
    staging.mkdir()
    failures: list[tuple[str, str]] = []
    try:
        facts = machine.facts()
        perf, uring = machine.check_perf(), machine.check_io_uring()
        facts["perf"] = f"{perf.verdict}: {perf.value}"
        facts["io_uring"] = f"{uring.verdict}: {uring.value}"
        docs: list[EngineDocument] = []
        wall_s: dict[str, float] = {}
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as bar:
            for study in studies:
                task = bar.add_task(study.name, total=1.0)

                def progress(desc: str, frac: float, task=task) -> None:
                    bar.update(task, description=desc[:60], completed=min(max(frac, 0.0), 1.0))

                ctx = RunContext(form=form, artifacts_dir=staging / "artifacts", progress=progress, options=options)
                ctx.artifacts_dir.mkdir(exist_ok=True)
                study_start = time.monotonic()
                try:
                    docs += study.run(ctx)
                    bar.update(task, description=f"{study.name}: done", completed=1.0)
                except EngineError as e:
                    failures.append((study.name, str(e)))
                    bar.update(task, description=f"{study.name}: FAILED")
                finally:
                    wall_s[study.name] = time.monotonic() - study_start
        finished = datetime.now(UTC)
        record = RunRecord(
            run_id=run_id,
            started_at=started.replace(tzinfo=None),
            finished_at=finished.replace(tzinfo=None),
            form=form,
            studies=[s.name for s in studies],
            machine=facts,
            command=" ".join(sys.argv),
            documents=docs,
            failures=failures,
            status="complete" if not failures else "incomplete",
            study_wall_s=wall_s,
        )
        with Store(results_dir / DB_NAME) as store:
            store.save_run(record)
            write_report(store, run_id, staging / "report.html")
        final = results_dir / run_id
        os.replace(staging, final)
        point_latest(results_dir, run_id)
        print_wall_times(console, wall_s)
        return run_id, final / "report.html", failures
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
