"""`tailscope` end to end in a temporary folder: run, runs, report, faults."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from conftest import REPO, TAILSCOPE, big_store, needs_engine, start_tailscope, tailscope_env


@needs_engine("tailscope-baseline")
def test_run_writes_store_report_and_latest(results_dir):
    # What this tests is `run`'s plumbing (every study stored, the report, `latest`), so the graphs run
    # on simulated stores: since every model reaches the real stores, each graph start of every study
    # also starts memcached, Redis and PostgreSQL (initdb and the preload included), and the whole run
    # passed the 600 s limit on the clean-clone CI of 2026-11-27. Real stores have tests of their own
    # (tests/e2e/test_graph_stores.py, the studies' tiny forms).
    r = subprocess.run(
        [*TAILSCOPE, "run", "--scale", "0.05", "--stores", "simulated"],
        capture_output=True,
        text=True,
        env=tailscope_env(results_dir),
        timeout=900,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stderr + r.stdout
    latest = results_dir / "latest"
    assert latest.is_symlink()
    run_id = os.readlink(latest)
    report = results_dir / run_id / "report.html"
    assert str(report) in r.stdout.replace("\n", "")
    html = report.read_text()
    assert "Physical references of this machine" in html and "<svg" in html
    assert "condvar hand-off" in html and "Kernel".lower() in html.lower()
    assert not list(results_dir.glob(".staging-*"))
    con = duckdb.connect(str(results_dir / "tailscope.duckdb"), read_only=True)
    n = con.execute(
        "SELECT count(*) FROM measurements WHERE run_id = ? AND study = 'baseline' AND engine = 'tailscope-baseline'",
        [run_id],
    ).fetchone()[0]
    assert n == 12  # 6 references x pinned/unpinned
    studies = {r[0] for r in con.execute("SELECT DISTINCT study FROM documents WHERE run_id = ?", [run_id]).fetchall()}
    from tailscope.studies.registry import default_studies

    assert studies == {s.name for s in default_studies()}  # every default study ran, none failed
    assert con.execute("SELECT status FROM runs WHERE run_id = ?", [run_id]).fetchone()[0] == "complete"
    con.close()

    # runs lists it; report regenerates it; an unknown run lists the known ones.
    r = subprocess.run(
        [*TAILSCOPE, "runs"], capture_output=True, text=True, env=tailscope_env(results_dir), cwd=REPO, timeout=120
    )
    assert r.returncode == 0 and run_id in r.stdout
    report.unlink()
    r = subprocess.run(
        [*TAILSCOPE, "report", run_id],
        capture_output=True,
        text=True,
        env=tailscope_env(results_dir),
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0 and report.exists()
    r = subprocess.run(
        [*TAILSCOPE, "report", "no-such-run"],
        capture_output=True,
        text=True,
        env=tailscope_env(results_dir),
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 2 and "unknown run" in r.stderr and run_id in r.stderr


def test_unwritable_results_folder_is_a_clear_error(tmp_path):
    blocker = tmp_path / "plain-file"
    blocker.write_text("x")
    r = subprocess.run(
        [*TAILSCOPE, "run", "--scale", "0.01"],
        capture_output=True,
        text=True,
        env=tailscope_env(blocker / "results"),
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 2
    assert "not writable" in r.stderr


def test_report_without_database_is_a_clear_error(results_dir):
    r = subprocess.run(
        [*TAILSCOPE, "report"], capture_output=True, text=True, env=tailscope_env(results_dir), cwd=REPO, timeout=120
    )
    assert r.returncode == 2 and "no results database" in r.stderr


@needs_engine("tailscope-baseline")
def test_ctrl_c_mid_run_leaves_database_consistent_and_no_files(results_dir):
    env = tailscope_env(results_dir)
    # A first, complete run so there is a database to keep consistent. One short study is enough
    # for that (the complete run of every study is test_run_writes_store_report_and_latest's).
    first = subprocess.run(
        [*TAILSCOPE, "run", "--study", "baseline", "--scale", "0.02"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    assert first.returncode == 0, first.stderr
    proc = start_tailscope("run", "--scale", "1", env=env)
    deadline = time.monotonic() + 60
    while not list(results_dir.glob(".staging-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # the engine is now measuring
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not list(results_dir.glob(".staging-*"))
    con = duckdb.connect(str(results_dir / "tailscope.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    run_ids = {r[0] for r in con.execute("SELECT DISTINCT run_id FROM measurements").fetchall()}
    assert len(run_ids) == 1
    con.close()
    # And no engine was left running.
    leftover = subprocess.run(
        ["pgrep", "-f", "tailscope-baseline --artifacts " + str(results_dir)], capture_output=True, text=True
    )
    assert leftover.stdout.strip() == ""


def test_doctor_gives_a_verdict_per_line():
    r = subprocess.run(
        [*TAILSCOPE, "doctor"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 0, r.stderr
    for check in ("cores", "CPU model", "kernel", "perf counters", "io_uring", "RLIMIT_NOFILE", "frequency governor"):
        line = next((ln for ln in r.stdout.splitlines() if check in ln), None)
        assert line is not None, check
        assert any(v in line for v in ("ok", "warn", "unavailable")), line


def test_damaged_database_is_a_clear_error_and_nothing_is_written(tmp_path):

    results = tmp_path / "results"
    results.mkdir()
    db = big_store(results / "tailscope.duckdb")
    with open(db, "r+b") as f:
        f.truncate(int(db.stat().st_size * 0.9))
    before = db.read_bytes()
    trace = tmp_path / "trace.json"
    trace.write_text('{"data": []}')
    for args in (
        ["runs"],
        ["report"],
        ["report", "r1"],
        ["export", "--to", str(tmp_path / "x")],
        ["analyze", str(trace)],
    ):
        r = subprocess.run(
            [*TAILSCOPE, *args],
            capture_output=True,
            text=True,
            env={**tailscope_env(results), "COLUMNS": "1000"},
            cwd=REPO,
            timeout=120,
        )
        assert r.returncode == 2, (args, r.stderr)
        assert "Traceback" not in r.stderr, (args, r.stderr)
        assert "damaged" in r.stderr and "tailscope.duckdb" in r.stderr, (args, r.stderr)
    assert db.read_bytes() == before
    assert sorted(p.name for p in results.iterdir()) == ["tailscope.duckdb"]  # no run folder, no staging


def test_full_disk_leaves_no_write_probe(tmp_path, monkeypatch):
    import errno

    from tailscope import runner

    real_write_text = Path.write_text

    def full_disk(self, *args, **kwargs):
        if self.name.startswith(".write-test-"):
            real_write_text(self, "")  # the file is created, then the write fails
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(runner.RunError, match="not writable: No space left on device"):
        runner.check_writable(tmp_path)
    assert list(tmp_path.iterdir()) == []
