"""The DuckDB store: one transaction per run, nothing half-written."""

from __future__ import annotations

from datetime import datetime

import duckdb
import pytest

from conftest import big_store, stored_doc, stored_run
from tailscope.store import EngineDocument, RunRecord, Store, StoreError


def test_run_round_trips(tmp_path):
    db = tmp_path / "t.duckdb"
    with Store(db) as s:
        s.save_run(stored_run("r1", [stored_doc()], failures=[("echo", "engine missing")]))
    with Store(db, read_only=True) as s:
        assert [r["run_id"] for r in s.runs()] == ["r1"]
        m = s.measurements("r1", "baseline")
        assert len(m) == 1 and m.iloc[0]["p50_ns"] == 1000.0 and m.iloc[0]["samples"] == 100
        assert list(m.iloc[0]["low_confidence"]) == ["99.9", "99.99"]
        assert len(s.cdf("r1", "baseline")) == 3
        assert s.documents("r1")[0].document["engine"] == "tailscope-baseline"
        assert ("echo", "(study)", "", "engine missing") in s.unavailable("r1")
        assert s.run("r1")["machine"] == {"kernel": "x"}


def test_failed_insert_rolls_back_whole_run(tmp_path):
    db = tmp_path / "t.duckdb"
    bad = stored_doc()
    bad["measurements"].append({"latency": {}})  # no name: KeyError mid-insert
    with Store(db) as s:
        s.save_run(stored_run("good", [stored_doc()]))
        with pytest.raises(KeyError):
            s.save_run(stored_run("bad", [stored_doc(), bad]))
    with Store(db, read_only=True) as s:
        assert [r["run_id"] for r in s.runs()] == ["good"]
        con = s.con
        for table in ("documents", "measurements", "cdf_points"):
            n = con.execute(f"SELECT count(*) FROM {table} WHERE run_id = 'bad'").fetchone()[0]
            assert n == 0, table


def test_cdf_points_of_every_document_are_stored_with_their_keys(tmp_path):
    # A run's CDF points are inserted in one statement after every document (store._CdfColumns).
    db = tmp_path / "t.duckdb"
    a, b = stored_doc(name="a", p50=100.0), stored_doc(name="b", p50=200.0)
    b["measurements"][0]["cdf"].append([None, 99.0])  # an unknown value is NULL, not 0
    docs = [EngineDocument("baseline", "e", a, point="p1"), EngineDocument("baseline", "e", b, point="p2")]
    now = datetime(2026, 1, 1)
    with Store(db) as s:
        s.save_run(RunRecord("r1", now, now, "quick", ["baseline"], {}, "test", docs))
        rows = s.con.execute(
            "SELECT name, point, value_ns, percentile FROM cdf_points WHERE run_id = 'r1' ORDER BY name, percentile"
        ).fetchall()
    assert rows == [
        ("a", "p1", 10.0, 0.0),
        ("a", "p1", 100.0, 50.0),
        ("a", "p1", 9000.0, 100.0),
        ("b", "p2", 10.0, 0.0),
        ("b", "p2", 200.0, 50.0),
        ("b", "p2", None, 99.0),
        ("b", "p2", 9000.0, 100.0),
    ]


def test_a_cdf_point_that_is_not_a_number_rolls_back_the_run(tmp_path):
    db = tmp_path / "t.duckdb"
    bad = stored_doc()
    bad["measurements"][0]["cdf"].append(["fast", 99.0])
    with Store(db) as s:
        with pytest.raises(StoreError, match="not a number"):
            s.save_run(stored_run("bad", [stored_doc(), bad]))
        for table in ("runs", "documents", "measurements", "cdf_points"):
            assert s.con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table


def test_duplicate_run_id_is_rejected_and_first_kept(tmp_path):
    db = tmp_path / "t.duckdb"
    with Store(db) as s:
        s.save_run(stored_run("r1", [stored_doc(p50=1.0)]))
        with pytest.raises(duckdb.Error):
            s.save_run(stored_run("r1", [stored_doc(p50=2.0)]))
        assert s.measurements("r1").iloc[0]["p50_ns"] == 1.0


def test_unknown_run_lists_known_runs(tmp_path):
    with Store(tmp_path / "t.duckdb") as s:
        s.save_run(stored_run("r1", [stored_doc()]))
        with pytest.raises(StoreError, match="unknown run 'nope'.*r1"):
            s.run("nope")


def test_missing_database_read_only_is_clear(tmp_path):
    with pytest.raises(StoreError, match="no results database"):
        Store(tmp_path / "absent.duckdb", read_only=True)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_writes_one_file_per_table_with_only_that_run(tmp_path, fmt):
    with Store(tmp_path / "t.duckdb") as s:
        s.save_run(stored_run("r1", [stored_doc(p50=1.0)]))
        s.save_run(stored_run("r2", [stored_doc(p50=2.0)]))
        files = s.export("r2", tmp_path / "out", fmt)
    assert {f.name for f in files} == {f"{t}.{fmt}" for t in Store.TABLES}
    reader = "read_parquet" if fmt == "parquet" else "read_csv_auto"
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT run_id, p50_ns FROM {reader}('{tmp_path / 'out' / ('measurements.' + fmt)}')"
    ).fetchall()
    assert rows == [("r2", 2.0)]
    assert not list((tmp_path / "out").glob(".*.tmp"))
    with pytest.raises(StoreError, match="unknown export format"):
        Store(tmp_path / "t.duckdb").export("r2", tmp_path / "out", "xlsx")


# ---- a damaged database file: refused on open, never written to -----------------------------------


@pytest.mark.parametrize("damage", ["truncated", "garbage-in-a-block", "garbage-header", "empty"])
def test_damaged_database_is_refused_on_open_and_left_as_it_was(tmp_path, damage):
    from tailscope.store import StoreDamaged

    db = big_store(tmp_path / "tailscope.duckdb")
    size = db.stat().st_size
    con = duckdb.connect(str(db), read_only=True)
    # A block that holds rows of `documents`: DuckDB's file is 3 headers of 4 KiB, then the blocks.
    block_id, block_size = con.execute(
        "SELECT max(block_id), (SELECT block_size FROM pragma_database_size()) FROM pragma_storage_info('documents') "
        "WHERE block_id >= 0"
    ).fetchone()
    con.close()
    with open(db, "r+b") as f:
        if damage == "truncated":
            f.truncate(int(size * 0.9))  # the tables still read; blocks at the end are missing
        elif damage == "empty":
            f.truncate(0)
        else:
            f.seek(0 if damage == "garbage-header" else 3 * 4096 + block_id * block_size + 1024)
            f.write(bytes(range(256)) * 8)
    before = db.read_bytes()
    for read_only in (True, False):
        with pytest.raises(StoreDamaged) as info:
            Store(db, read_only=read_only)
        assert str(db) in str(info.value) and "damaged" in str(info.value) and "mv " in str(info.value)
    assert db.read_bytes() == before  # nothing written, not even a checkpoint


def test_a_file_duckdb_shrank_after_freeing_its_last_blocks_is_whole_not_damaged(tmp_path):
    # A checkpoint that frees the blocks at the end of the file shrinks it, while the header still
    # counts them (as free) in total_blocks: a whole database, once mistaken for a truncated one.
    db = big_store(tmp_path / "tailscope.duckdb")
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE scratch AS SELECT range AS i, random() AS r FROM range(3000000)")
    con.execute("CHECKPOINT")
    grown = db.stat().st_size
    con.execute("DROP TABLE scratch")
    con.execute("CHECKPOINT")
    con.close()
    con = duckdb.connect(str(db), read_only=True)
    block_size, total_blocks = con.execute("SELECT block_size, total_blocks FROM pragma_database_size()").fetchone()
    con.close()
    assert db.stat().st_size < grown
    assert db.stat().st_size < block_size * total_blocks  # what the old check called truncated
    with Store(db, read_only=True) as s:
        assert [r["run_id"] for r in s.runs()]


def test_study_wall_times_round_trip_and_old_databases_gain_the_column(tmp_path):
    db = tmp_path / "t.duckdb"
    # A database written before study_wall_s existed: the runs table without the column.
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE runs (run_id VARCHAR PRIMARY KEY, started_at TIMESTAMP, finished_at TIMESTAMP, "
        "form VARCHAR, studies VARCHAR[], status VARCHAR, tailscope_version VARCHAR, machine JSON, command VARCHAR)"
    )
    con.execute("INSERT INTO runs VALUES ('old', now(), now(), 'quick', ['baseline'], 'complete', '0', '{}', 'x')")
    con.close()
    run = stored_run("new", [stored_doc()])
    run.study_wall_s = {"baseline": 24.5, "echo": 85.0}
    with Store(db) as s:
        s.save_run(run)
    with Store(db, read_only=True) as s:
        assert s.run("new")["study_wall_s"] == {"baseline": 24.5, "echo": 85.0}
        assert s.run("old")["study_wall_s"] == {}
