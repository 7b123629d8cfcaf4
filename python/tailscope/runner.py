"""`tailscope run`: run studies, store the run in one transaction, write the report.

Nothing half-written: artifacts go to a hidden staging folder; at the end, inside the run's one
database transaction, the report is rendered into it and the folder synced to disk, then the
transaction commits, then the folder is renamed to results/<run-id>. A failure at any step (a
full disk, Ctrl-C, SIGTERM, SIGHUP) leaves the database as it was and no folder. A staging
folder whose run was killed outright is removed by the next run (its name carries the owner's
PID).

The store step is serialised between tailscope processes by a flock on the results folder, so runs started together into one folder each store in turn. A database held by another program
(a notebook's DuckDB connection) is named as such — never called damaged: the run waits for it up
to --wait-for-store seconds, then stores into a database of its own inside its run folder, so
nothing measured is lost.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from tailscope.lab import lifetime, machine
from tailscope.lab.engines import EngineError, remove_stale_temp
from tailscope.report import render_report, report_sections
from tailscope.store import EngineDocument, RunRecord, Store, StoreLocked, check_database, free_bytes
from tailscope.studies.base import RunContext, Study
from tailscope.studies.registry import all_studies

DB_NAME = "tailscope.duckdb"
# results/.staging-<run-id>-pid<PID>: the owner's PID tells a later run whether it is stale.
STAGING_PREFIX = ".staging-"


# How long a run waits for another tailscope's store step (seconds: a run stores in seconds).
TAILSCOPE_STORE_WAIT_S = 600.0
# Free space a run needs before it starts, by form: its artifacts (traces, .hlog logs), its report
# and the store's growth. A quick `make run` writes ~100 MB of artifacts here.
START_FREE_BYTES = {"quick": 512 * 2**20, "full": 4 * 2**30, "analyze": 64 * 2**20}
# The store step's need beyond the documents' own size (DuckDB's WAL and block allocation).
STORE_MARGIN_BYTES = 32 * 2**20


class RunError(RuntimeError):
    pass


class RunOutcome(NamedTuple):
    run_id: str
    report: Path
    failures: list[tuple[str, str]]
    database: Path  # where the run was stored (the shared database, or the run's own)


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


def check_free_space(results_dir: Path, need_bytes: int, what: str) -> None:
    free = free_bytes(results_dir)
    if free < need_bytes:
        raise RunError(
            f"not enough free space in {results_dir} to {what}: {free // 2**20} MiB free, "
            f"{need_bytes // 2**20} MiB needed. Nothing was stored"
        )


@contextmanager
def store_lock(results_dir: Path, wait_s: float = TAILSCOPE_STORE_WAIT_S) -> Iterator[None]:
    """Holds an exclusive flock on the results folder itself: one tailscope at a time opens the
    database to check or store (a lock on the folder leaves no lock file behind)."""
    fd = os.open(results_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise RunError(
                        f"another tailscope has been storing into {results_dir} for {wait_s:.0f} s; nothing was stored"
                    ) from None
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def open_store(path: Path, wait_s: float) -> Store:
    """The database at `path`, waiting up to `wait_s` for another program to let go of it."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return Store(path)
        except StoreLocked:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def sync_tree(folder: Path) -> None:
    """fsync every file and folder under `folder`: its contents are on disk before the commit."""
    for root, _dirs, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def store_need_bytes(docs: list[EngineDocument]) -> int:
    """What storing these documents may take: each document whole, its measurements and CDF points
    flattened beside it, and DuckDB's WAL of all of it."""
    return 3 * sum(len(json.dumps(d.document)) for d in docs) + STORE_MARGIN_BYTES


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
    studies: list[Study],
    *,
    form: str,
    results_dir: Path,
    options: dict | None = None,
    console: Console | None = None,
    wait_for_store_s: float = 0.0,
) -> RunOutcome:
    console = console or Console(stderr=True)
    options = options or {}
    check_writable(results_dir)
    check_free_space(results_dir, START_FREE_BYTES.get(form, START_FREE_BYTES["quick"]), f"start a {form} run")
    # Before any study runs: a damaged database fails the run here, with nothing written. One that
    # another program holds is only busy: the run goes ahead and says what it will do at the end.
    with store_lock(results_dir):
        try:
            check_database(results_dir / DB_NAME)
        except StoreLocked as e:
            console.print(
                f"[yellow]{e}.[/] The run goes ahead; at the end it waits up to {wait_for_store_s:.0f} s "
                "(--wait-for-store) for the database, then stores into a database of its own in its run folder."
            )
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
        final = results_dir / run_id
        database = _store(record, staging, results_dir, wait_for_store_s, console)
        point_latest(results_dir, run_id)
        print_wall_times(console, wall_s)
        stored_in = final / DB_NAME if database == staging / DB_NAME else database
        return RunOutcome(run_id, final / "report.html", failures, stored_in)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _store(record: RunRecord, staging: Path, results_dir: Path, wait_s: float, console: Console) -> Path:
    """Stores the run and moves its folder into place, all or nothing; returns the database used."""
    check_free_space(results_dir, store_need_bytes(record.documents), "store the run")
    final = results_dir / record.run_id
    with store_lock(results_dir):
        database = results_dir / DB_NAME
        try:
            store = open_store(database, wait_s)
        except StoreLocked as e:
            database = staging / DB_NAME
            console.print(f"[yellow]{e}: this run is stored in its own database, {final / DB_NAME}[/]")
            store = Store(database)
        with store:

            def report_and_sync() -> None:
                write_report(store, record.run_id, staging / "report.html")
                sync_tree(staging)

            store.save_run(record, before_commit=report_and_sync)
            try:
                os.replace(staging, final)
            except BaseException:
                # Committed but the folder could not be moved into place: undo the rows too.
                if database == results_dir / DB_NAME:
                    store.delete_run(record.run_id)
                raise
    return database
