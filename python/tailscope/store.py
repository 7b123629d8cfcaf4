"""The DuckDB results store (schema in docs/formats.md).

One run is written in one transaction: a crash or Ctrl-C before COMMIT leaves
the database exactly as it was. Engine documents are kept whole (JSON) beside
the flattened tables the report and notebooks query.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from tailscope import __version__

SCHEMA_VERSION = 1
# Below this many free bytes a failed DuckDB write is taken to be the full disk's doing.
LOW_SPACE_BYTES = 16 * 2**20

PERCENTILE_COLUMNS = {"50": "p50_ns", "90": "p90_ns", "99": "p99_ns", "99.9": "p999_ns", "99.99": "p9999_ns"}

_DDL = [
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY, started_at TIMESTAMP, finished_at TIMESTAMP,
        form VARCHAR, studies VARCHAR[], status VARCHAR, tailscope_version VARCHAR,
        machine JSON, command VARCHAR)""",
    # Added after schema 1 shipped: each study's wall time (s), in the order they ran.
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS study_wall_s JSON",
    """CREATE TABLE IF NOT EXISTS documents (
        run_id VARCHAR, study VARCHAR, engine VARCHAR, point VARCHAR, document JSON)""",
    """CREATE TABLE IF NOT EXISTS measurements (
        run_id VARCHAR, study VARCHAR, engine VARCHAR, point VARCHAR, name VARCHAR, variant VARCHAR,
        unit VARCHAR, samples BIGINT, min_ns DOUBLE, mean_ns DOUBLE, stddev_ns DOUBLE, max_ns DOUBLE,
        p50_ns DOUBLE, p90_ns DOUBLE, p99_ns DOUBLE, p999_ns DOUBLE, p9999_ns DOUBLE,
        low_confidence VARCHAR[], pinning JSON, observed JSON)""",
    """CREATE TABLE IF NOT EXISTS cdf_points (
        run_id VARCHAR, study VARCHAR, name VARCHAR, variant VARCHAR, point VARCHAR,
        value_ns DOUBLE, percentile DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS unavailable (
        run_id VARCHAR, study VARCHAR, name VARCHAR, variant VARCHAR, reason VARCHAR)""",
]


class StoreError(RuntimeError):
    pass


class StoreDamaged(StoreError):
    """The database file is truncated or corrupted: nothing is read from or written to it."""

    def __init__(self, path: Path, detail: str):
        super().__init__(
            f"results database {path} is damaged ({detail}). Nothing was read or written. Move it aside "
            f"(mv {path} {path}.damaged) to start a new database on the next run; the reports under "
            f"{path.parent}/<run-id>/ do not need it."
        )
        self.path = path


class StoreLocked(StoreError):
    """Another process holds the database file (DuckDB allows one writer, or readers only): the
    file is healthy, only busy."""

    def __init__(self, path: Path, pid: int | None, holder: str):
        who = f"PID {pid} ({holder})" if pid is not None else holder
        super().__init__(f"results database {path} is in use by {who}; the file is not damaged")
        self.path, self.pid, self.holder = path, pid, holder


class StoreFull(StoreError):
    """The disk holding the database has too little space for the write: nothing was stored."""


_LOCK_PID = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")


def _lock_holder(e: Exception) -> tuple[int | None, str] | None:
    """(PID, what it runs) when `e` is DuckDB's "could not set lock" error, else None."""
    text = str(e)
    if "Could not set lock" not in text and "Conflicting lock" not in text:
        return None
    m = _LOCK_PID.search(text)
    if m is None:
        return None, "another process"
    pid = int(m.group(2))
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        words = [w.decode(errors="replace") for w in argv if w]
    except OSError:
        words = [m.group(1)]
    holder = " ".join(words)[:160] or m.group(1)
    if any("tailscope" in w for w in words):
        holder = f"another tailscope: {holder}"
    return pid, holder


def _is_disk_full(e: BaseException) -> bool:
    text = str(e)
    return (isinstance(e, OSError) and e.errno == 28) or "No space left on device" in text or "disk is full" in text


def free_bytes(path: Path) -> int:
    """Free bytes on the filesystem holding `path` (or its nearest existing parent)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


# DuckDB's file begins with three 4 KiB headers, then the blocks.
_HEADER_BYTES = 3 * 4096


def check_database(path: Path) -> None:
    """Raises StoreDamaged unless `path` (if it exists) is a whole, readable database.

    Opened read-only, so a damaged file is never written to. Two checks: the file
    holds every block the database uses (a truncated file fails here even where
    the missing blocks are not read yet), and every row of every table reads
    back (DuckDB verifies each block's checksum on read)."""
    path = Path(path)
    if not path.exists():
        return
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as e:
        held = _lock_holder(e)
        if held is not None:
            raise StoreLocked(path, *held) from e
        raise StoreDamaged(path, _first_line(e)) from e
    try:
        block_size, used_blocks = con.execute(
            "SELECT block_size, used_blocks FROM pragma_database_size()"
        ).fetchone() or (0, 0)
        tables = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
        ]
        # Not total_blocks: it counts free blocks, and a checkpoint that frees the blocks at the
        # end of the file shrinks the file (a dropped table, rewritten row groups), so a whole
        # file can be shorter than total_blocks. A whole file does hold every used block, and
        # every block a table's storage names.
        last_block = -1
        for table in tables:
            (m,) = con.execute(
                "SELECT max(block_id) FROM pragma_storage_info(?) WHERE block_id >= 0", [table]
            ).fetchone() or (None,)
            if m is not None:
                last_block = max(last_block, int(m))
        needed = _HEADER_BYTES + max(int(used_blocks), last_block + 1) * int(block_size)
        size_bytes = path.stat().st_size
        if size_bytes < needed:
            raise StoreDamaged(
                path,
                f"the file is {size_bytes} bytes, shorter than the {needed} bytes its "
                f"{used_blocks} used blocks of {block_size} bytes need: truncated",
            )
        for table in tables:
            # hash() of the whole row makes DuckDB read every column of every block.
            con.execute(f'SELECT count(*), bit_xor(hash(t)) FROM "{table}" t').fetchone()
    except duckdb.Error as e:
        raise StoreDamaged(path, _first_line(e)) from e
    finally:
        con.close()


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


@dataclass
class EngineDocument:
    study: str
    engine: str
    document: dict
    point: str = ""  # which point of a sweep ("" for single-run studies)


@dataclass
class RunRecord:
    run_id: str
    started_at: datetime
    finished_at: datetime
    form: str
    studies: list[str]
    machine: dict
    command: str
    documents: list[EngineDocument] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (study, why it failed)
    status: str = "complete"
    study_wall_s: dict[str, float] = field(default_factory=dict)  # study → wall time, in run order


class _CdfColumns:
    """A run's CDF points gathered column by column and inserted in one statement.

    A quick run has ~140 000 points; DuckDB's executemany runs one prepared insert per row
    (~0.35 ms each, 50 s a run), a scan of one DataFrame takes well under a second.
    """

    NAMES = ("run_id", "study", "name", "variant", "point", "value_ns", "percentile")

    def __init__(self) -> None:
        self.cols: dict[str, list] = {n: [] for n in self.NAMES}

    def add(self, run_id: str, study: str, name: str, variant: str, point: str, points: Iterable) -> None:
        c = self.cols
        for value, percentile in points:
            c["run_id"].append(run_id)
            c["study"].append(study)
            c["name"].append(name)
            c["variant"].append(variant)
            c["point"].append(point)
            c["value_ns"].append(value)
            c["percentile"].append(percentile)

    def insert(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self.cols["run_id"]:
            return
        import pandas as pd  # only a run's save needs it (a 0.3 s import)

        try:
            frame = pd.DataFrame(
                {
                    n: pd.Series(v, dtype="float64" if n in ("value_ns", "percentile") else "object")
                    for n, v in self.cols.items()
                }
            )
        except (ValueError, TypeError) as e:  # an engine wrote a point that is not a number
            raise StoreError(f"a CDF point is not a number ({e}); nothing of this run was stored") from e
        con.register("tailscope_cdf_rows", frame)
        try:
            con.execute(f"INSERT INTO cdf_points SELECT {', '.join(self.NAMES)} FROM tailscope_cdf_rows")
        finally:
            con.unregister("tailscope_cdf_rows")


class Store:
    def __init__(self, path: Path, read_only: bool = False):
        self.path = Path(path)
        if read_only and not self.path.exists():
            raise StoreError(f"no results database at {self.path} (run `tailscope run` first)")
        check_database(self.path)
        try:
            if not read_only:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except (OSError, duckdb.Error) as e:
            held = _lock_holder(e)
            if held is not None:
                raise StoreLocked(self.path, *held) from e
            raise StoreError(f"cannot open results database {self.path}: {e}") from e
        if not read_only:
            for ddl in _DDL:
                self.con.execute(ddl)
            self.con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- writing -------------------------------------------------------------
    def save_run(self, run: RunRecord, before_commit: Callable[[], None] | None = None) -> None:
        """Writes the whole run in one transaction (all or nothing). `before_commit` runs inside the
        transaction, after the rows are in and before COMMIT (it sees them): the runner writes the
        run's report and syncs its folder there, so a failure of either leaves no stored run."""
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    run.run_id,
                    run.started_at,
                    run.finished_at,
                    run.form,
                    run.studies,
                    run.status,
                    _version(),
                    json.dumps(run.machine),
                    run.command,
                    json.dumps(run.study_wall_s),
                ],
            )
            cdf = _CdfColumns()
            for d in run.documents:
                self._insert_document(run.run_id, d, cdf)
            cdf.insert(con)
            for study, reason in run.failures:
                con.execute("INSERT INTO unavailable VALUES (?, ?, '(study)', '', ?)", [run.run_id, study, reason])
            if before_commit is not None:
                before_commit()
            con.execute("COMMIT")
        except BaseException as e:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:
                pass  # a failed COMMIT has already ended the transaction
            # DuckDB reports a WAL write that hit a full disk as a failed transaction, not as ENOSPC.
            if _is_disk_full(e) or (isinstance(e, duckdb.Error) and free_bytes(self.path) < LOW_SPACE_BYTES):
                raise StoreFull(
                    f"run {run.run_id} could not be stored in {self.path}: the disk has "
                    f"{free_bytes(self.path) // 1024} KiB free ({_first_line(e)}). Nothing of this run was "
                    "stored; the database is as it was before the run"
                ) from e
            raise

    def delete_run(self, run_id: str) -> None:
        """Removes every row of one run (one transaction): undoes a run whose folder could not be kept."""
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            for table in self.TABLES:
                con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def _insert_document(self, run_id: str, d: EngineDocument, cdf: _CdfColumns) -> None:
        con = self.con
        con.execute(
            "INSERT INTO documents VALUES (?, ?, ?, ?, ?)", [run_id, d.study, d.engine, d.point, json.dumps(d.document)]
        )
        rows = []
        for m in d.document.get("measurements", []):
            lat = m.get("latency", {})
            pct = lat.get("percentiles", {})
            rows.append(
                [
                    run_id,
                    d.study,
                    d.engine,
                    d.point,
                    m["name"],
                    m.get("variant", ""),
                    lat.get("unit", "ns"),
                    lat.get("count", 0),
                    lat.get("min"),
                    lat.get("mean"),
                    lat.get("stddev"),
                    lat.get("max"),
                    *[pct.get(k) for k in PERCENTILE_COLUMNS],
                    lat.get("low_confidence", []),
                    json.dumps(m.get("pinning", {})),
                    json.dumps(m.get("observed", {})),
                ]
            )
            cdf.add(run_id, d.study, m["name"], m.get("variant", ""), d.point, m.get("cdf", []))
        if rows:
            con.executemany("INSERT INTO measurements VALUES (" + ",".join(["?"] * 20) + ")", rows)
        for u in d.document.get("unavailable", []):
            con.execute(
                "INSERT INTO unavailable VALUES (?, ?, ?, ?, ?)",
                [run_id, d.study, u.get("name", ""), u.get("variant", ""), u.get("reason", "")],
            )

    # ---- reading -------------------------------------------------------------
    def runs(self) -> list[dict]:
        cur = self.con.execute(
            "SELECT run_id, started_at, finished_at, form, studies, status FROM runs ORDER BY started_at DESC, run_id DESC"
        )
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def run(self, run_id: str) -> dict:
        cur = self.con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
        row = cur.fetchone()
        if row is None:
            known = [r["run_id"] for r in self.runs()]
            listing = ", ".join(known[:20]) if known else "none yet"
            raise StoreError(f"unknown run '{run_id}'. Known runs: {listing}")
        cols = [c[0] for c in cur.description]
        rec = dict(zip(cols, row))
        rec["machine"] = json.loads(rec["machine"]) if rec["machine"] else {}
        rec["study_wall_s"] = json.loads(rec["study_wall_s"]) if rec.get("study_wall_s") else {}
        return rec

    def measurements(self, run_id: str, study: str | None = None):
        q = "SELECT * FROM measurements WHERE run_id = ?"
        args: list[Any] = [run_id]
        if study:
            q += " AND study = ?"
            args.append(study)
        return self.con.execute(q, args).df()

    def cdf(self, run_id: str, study: str):
        return self.con.execute(
            "SELECT * FROM cdf_points WHERE run_id = ? AND study = ? ORDER BY name, variant, point, percentile",
            [run_id, study],
        ).df()

    def documents(self, run_id: str, study: str | None = None) -> list[EngineDocument]:
        q = "SELECT study, engine, document, point FROM documents WHERE run_id = ?"
        args: list[Any] = [run_id]
        if study:
            q += " AND study = ?"
            args.append(study)
        return [EngineDocument(s, e, json.loads(doc), p) for s, e, doc, p in self.con.execute(q, args).fetchall()]

    def unavailable(self, run_id: str) -> Iterable[tuple]:
        return self.con.execute(
            "SELECT study, name, variant, reason FROM unavailable WHERE run_id = ?", [run_id]
        ).fetchall()

    TABLES = ("runs", "documents", "measurements", "cdf_points", "unavailable")

    def export(self, run_id: str, out_dir: Path, fmt: str) -> list[Path]:
        """Writes each table's rows of one run to out_dir/<table>.<fmt> (parquet or csv)."""
        if fmt not in ("parquet", "csv"):
            raise StoreError(f"unknown export format '{fmt}' (parquet or csv)")
        self.run(run_id)  # unknown run -> StoreError listing the known ones
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for table in self.TABLES:
            target = out_dir / f"{table}.{fmt}"
            tmp = out_dir / f".{table}.{fmt}.tmp"
            options = "FORMAT parquet" if fmt == "parquet" else "FORMAT csv, HEADER true"
            # COPY takes no bound parameters; run_id has been checked against the runs table above
            # and quotes are doubled, so the literal is safe.
            literal = run_id.replace("'", "''")
            self.con.execute(f"COPY (SELECT * FROM {table} WHERE run_id = '{literal}') TO '{tmp}' ({options})")
            tmp.replace(target)
            written.append(target)
        return written

    def latest_run_id(self) -> str | None:
        runs = self.runs()
        return runs[0]["run_id"] if runs else None


def _version() -> str:
    return __version__
