"""Nothing lost at the store step: a database held by another process is called busy (with its
PID), never damaged; a run waits for it or stores into a database of its own; runs started
together into one folder each store; a full disk stores nothing and leaves no folder."""

from __future__ import annotations

import errno
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tailscope import runner
from tailscope.cli import main
from tailscope.report.blocks import Section
from tailscope.runner import DB_NAME, run_studies
from tailscope.store import EngineDocument, Store, StoreFull, StoreLocked, check_database


class TinyStudy:
    """A study that runs no engine: one document, optionally after a pause."""

    name = "tiny"
    title = "Tiny"

    def __init__(self, pause_s: float = 0.0):
        self.pause_s = pause_s
        self.ran = 0

    def run(self, ctx):
        self.ran += 1
        time.sleep(self.pause_s)
        doc = {"schema": "tailscope.result/1", "engine": "none", "machine": {}, "unavailable": [], "measurements": []}
        return [EngineDocument(self.name, "none", doc, "p")]

    def section(self, store, run_id):
        return Section(self.name, self.title, "")


def _hold(db: Path, read_only: bool) -> subprocess.Popen:
    """Another process holding `db` open until its stdin closes (a notebook's connection)."""
    code = textwrap.dedent(
        f"""
        import duckdb, sys
        con = duckdb.connect({str(db)!r}, read_only={read_only})
        print("held", flush=True)
        sys.stdin.read()
        """
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _release(p: subprocess.Popen) -> None:
    assert p.stdin is not None
    p.stdin.close()
    p.wait(timeout=30)


def _stored_runs(db: Path) -> list[str]:
    with Store(db, read_only=True) as s:
        return [r["run_id"] for r in s.runs()]


@pytest.fixture
def results(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    run_studies([TinyStudy()], form="quick", results_dir=out)  # a database with one run in it
    return out


def test_a_held_database_is_busy_with_its_pid_not_damaged(results: Path):
    db = results / DB_NAME
    holder = _hold(db, read_only=False)
    try:
        with pytest.raises(StoreLocked, match=f"in use by PID {holder.pid}") as e:
            check_database(db)
        assert "is damaged" not in str(e.value)
        r = CliRunner().invoke(main, ["runs", "--results", str(results)])
        assert r.exit_code == 2 and f"PID {holder.pid}" in r.output and "is damaged" not in r.output, r.output
    finally:
        _release(holder)
    assert len(_stored_runs(db)) == 1  # healthy once let go


def test_a_run_goes_ahead_and_stores_into_its_own_database_while_a_reader_holds_the_shared_one(results: Path):
    db = results / DB_NAME
    before = _stored_runs(db)
    holder = _hold(db, read_only=True)
    try:
        study = TinyStudy()
        outcome = run_studies([study], form="quick", results_dir=results, wait_for_store_s=0.0)
    finally:
        _release(holder)
    assert study.ran == 1
    assert outcome.database == results / outcome.run_id / DB_NAME
    assert _stored_runs(outcome.database) == [outcome.run_id]  # nothing measured is lost
    assert _stored_runs(db) == before  # the shared database untouched
    assert outcome.report.exists()


def test_a_run_waits_for_the_database_when_asked(results: Path):
    db = results / DB_NAME
    holder = _hold(db, read_only=True)
    # The holder lets go while the run waits at its store step.
    timer = threading.Timer(1.0, _release, [holder])
    timer.start()
    try:
        outcome = run_studies([TinyStudy()], form="quick", results_dir=results, wait_for_store_s=60.0)
    finally:
        timer.join()
    assert outcome.database == db
    assert outcome.run_id in _stored_runs(db)


def test_two_runs_started_together_into_one_folder_both_store(tmp_path: Path):
    results = tmp_path / "results"
    code = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_store_safety import TinyStudy
        from tailscope.runner import run_studies
        o = run_studies([TinyStudy(pause_s=0.5)], form="quick", results_dir=__import__("pathlib").Path({str(results)!r}))
        print(o.run_id, o.database)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    ids = [o[0].split()[0] for o in outs]
    assert all(o[0].split()[1] == str(results / DB_NAME) for o in outs), outs
    assert sorted(_stored_runs(results / DB_NAME)) == sorted(ids)


def test_a_full_disk_at_the_report_stores_nothing_and_leaves_no_folder(results: Path, monkeypatch):
    db = results / DB_NAME
    before = _stored_runs(db)

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runner, "write_report", full)
    with pytest.raises(StoreFull, match="Nothing of this run was stored"):
        run_studies([TinyStudy()], form="quick", results_dir=results)
    assert _stored_runs(db) == before
    assert sorted(p.name for p in results.iterdir()) == sorted([DB_NAME, "latest", *before])


def test_too_little_space_refuses_the_run_before_any_study(results: Path, monkeypatch):
    monkeypatch.setattr(runner, "free_bytes", lambda _p: 10 * 2**20)
    study = TinyStudy()
    with pytest.raises(runner.RunError, match="not enough free space .* to start a quick run"):
        run_studies([study], form="quick", results_dir=results)
    assert study.ran == 0


def test_too_little_space_for_the_store_step_keeps_the_database_as_it_was(results: Path, monkeypatch):
    db = results / DB_NAME
    before = _stored_runs(db)
    monkeypatch.setattr(runner, "store_need_bytes", lambda _docs: 1 << 60)
    with pytest.raises(runner.RunError, match="to store the run"):
        run_studies([TinyStudy()], form="quick", results_dir=results)
    assert _stored_runs(db) == before
    assert not [p for p in results.iterdir() if p.name.startswith(".staging")]
