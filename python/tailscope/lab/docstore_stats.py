"""What the document store (PostgreSQL in DeathStarBench's MongoDB roles) did on its own during a run:
autovacuum and autoanalyze passes, checkpoints, and how many rows its tables hold.

A soak holds a constant rate for many minutes while compose-post inserts a post per request, so the
tables grow and PostgreSQL's maintenance runs inside the measured windows: autovacuum's launcher wakes
every `autovacuum_naptime` (60 s by default) and a checkpoint starts every `checkpoint_timeout`
(5 min). Read at each interval's edges, these counters say which maintenance fell inside which
interval and when, so a p99 excursion can be set beside it instead of being left unexplained.

Read with `psql` (Debian's postgresql-client, installed with the server) from the statistics views:
`pg_stat_user_tables` (autovacuum_count, autoanalyze_count, last_autovacuum, last_autoanalyze,
n_live_tup, n_dead_tup), `pg_stat_bgwriter` (checkpoints_timed + checkpoints_req) and
`pg_control_checkpoint()` (the last checkpoint's time). The statistics views are updated by each
backend at the end of a transaction, at most every 1 s (PostgreSQL 15's stats in shared memory), so a
reading is that fresh. Every failure gives None with the reason, never zeros.

A soak can also hold that maintenance to moments it chooses (`hold_maintenance`, then
`run_maintenance` between its intervals): autovacuum off and checkpoints only on request, then a
`VACUUM (ANALYZE)` and a `CHECKPOINT` while no load runs — the way an operator schedules maintenance
for quiet hours — so an interval's p99 is the graph's and not a pass that happened to land in it.
The settings go through `ALTER SYSTEM` into the data dir's postgresql.auto.conf, which is deleted
with the run's data dir.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field

# The database and user the engine's document store creates (native/svc/stores/docstore_client.h).
DATABASE = "tailscope"
USER = "postgres"
PSQL_FALLBACK = "/usr/lib/postgresql/15/bin/psql"
READ_TIMEOUT_S = 10.0

# One row per user table, then one line for the bgwriter and the control file. Unit separator (\x1f)
# between fields: table names cannot contain it.
_TABLES_SQL = (
    "SELECT relname, autovacuum_count, autoanalyze_count, n_live_tup, n_dead_tup, "
    "coalesce(extract(epoch FROM last_autovacuum)::text, ''), "
    "coalesce(extract(epoch FROM last_autoanalyze)::text, '') FROM pg_stat_user_tables ORDER BY relname"
)
_SERVER_SQL = (
    "SELECT (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter), "
    "coalesce(extract(epoch FROM (pg_control_checkpoint()).checkpoint_time)::text, '')"
)
# What the server's work per request is made of, beside its CPU: blocks it had to read from outside
# its shared buffers (the OS page cache or the disk: a pread each), blocks found in them, buffers a
# backend had to write itself to free one (no clean buffer left: the bgwriter and checkpointer fell
# behind), WAL bytes written, and the database's size against shared_buffers. PostgreSQL 15's
# pg_stat_database, pg_stat_bgwriter, pg_current_wal_lsn(), pg_database_size(). A separate query, so a
# server whose views differ still gives its maintenance counters.
_IO_SQL = (
    "SELECT d.blks_read, d.blks_hit, d.tup_inserted + d.tup_updated, b.buffers_backend, b.buffers_alloc, "
    "pg_current_wal_lsn() - '0/0'::pg_lsn, pg_database_size(current_database()), "
    "pg_size_bytes(current_setting('shared_buffers')) "
    "FROM pg_stat_database d, pg_stat_bgwriter b WHERE d.datname = current_database()"
)


@dataclass(frozen=True)
class TableMark:
    autovacuums: int
    autoanalyzes: int
    live_rows: int
    dead_rows: int
    last_autovacuum_epoch_s: float | None
    last_autoanalyze_epoch_s: float | None


@dataclass(frozen=True)
class IoMark:
    """The server's cumulative I/O counters at one moment (_IO_SQL), and its sizes then."""

    blocks_read: int
    blocks_hit: int
    rows_written: int  # inserted + updated
    backend_writes: int  # buffers written by a backend to free one
    buffers_allocated: int
    wal_bytes: int
    database_bytes: int
    shared_buffers_bytes: int


@dataclass(frozen=True)
class IoActivity:
    """The I/O between two marks; sizes at the end."""

    blocks_read: int
    blocks_hit: int
    rows_written: int
    backend_writes: int
    buffers_allocated: int
    wal_bytes: int
    database_bytes: int
    shared_buffers_bytes: int


def io_between(before: IoMark, after: IoMark) -> IoActivity:
    return IoActivity(
        after.blocks_read - before.blocks_read,
        after.blocks_hit - before.blocks_hit,
        after.rows_written - before.rows_written,
        after.backend_writes - before.backend_writes,
        after.buffers_allocated - before.buffers_allocated,
        after.wal_bytes - before.wal_bytes,
        after.database_bytes,
        after.shared_buffers_bytes,
    )


@dataclass(frozen=True)
class DocstoreMark:
    """The cumulative maintenance counters at one moment."""

    tables: dict[str, TableMark]
    checkpoints: int
    last_checkpoint_epoch_s: float | None
    io: IoMark | None = None  # None with io_reason when _IO_SQL could not be read
    io_reason: str = ""


@dataclass(frozen=True)
class MaintenanceEvent:
    kind: str  # autovacuum | autoanalyze | checkpoint
    table: str | None  # None for a checkpoint
    at_epoch_s: float


@dataclass
class DocstoreActivity:
    """What happened between two marks: counts, and the events whose time the views keep (the last
    pass per table and the last checkpoint: with a 60 s launcher nap, one per table per minute)."""

    autovacuums: int
    autoanalyzes: int
    checkpoints: int
    live_rows: int  # at the end
    dead_rows: int  # at the end
    events: list[MaintenanceEvent] = field(default_factory=list)
    io: IoActivity | None = None  # None with io_reason when either mark had no I/O reading
    io_reason: str = ""


def psql_binary() -> str | None:
    return shutil.which("psql") or (PSQL_FALLBACK if os.access(PSQL_FALLBACK, os.X_OK) else None)


def _epoch(text: str) -> float | None:
    return float(text) if text else None


def _query(address: str, sql: str | list[str], timeout_s: float = READ_TIMEOUT_S) -> tuple[list[list[str]] | None, str]:
    """Rows of `sql`; a list runs each statement on its own (`-c` each: psql sends one `-c` as one
    query string, an implicit transaction, inside which VACUUM and ALTER SYSTEM refuse to run)."""
    psql = psql_binary()
    if psql is None:
        return None, "psql not found (install the Debian package postgresql-client)"
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        r = subprocess.run(
            [
                psql,
                "-X",
                "-h",
                host,
                "-p",
                port,
                "-U",
                USER,
                "-d",
                DATABASE,
                "-At",
                "-F",
                "\x1f",
                "-v",
                "ON_ERROR_STOP=1",
            ]
            + [arg for one in ([sql] if isinstance(sql, str) else sql) for arg in ("-c", one)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={"PGCONNECT_TIMEOUT": "5", "PATH": "/usr/bin:/bin"},
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"psql failed: {e}"
    if r.returncode != 0:
        return None, f"psql exited {r.returncode}: {r.stderr.strip()[:200]}"
    return [line.split("\x1f") for line in r.stdout.splitlines() if line], ""


def read_mark(address: str) -> tuple[DocstoreMark | None, str]:
    """The counters now, or (None, why)."""
    tables, why = _query(address, _TABLES_SQL)
    if tables is None:
        return None, why
    server, why = _query(address, _SERVER_SQL)
    if server is None:
        return None, why
    try:
        marks = {
            row[0]: TableMark(int(row[1]), int(row[2]), int(row[3]), int(row[4]), _epoch(row[5]), _epoch(row[6]))
            for row in tables
        }
        checkpoints, last = int(server[0][0]), _epoch(server[0][1])
    except (IndexError, ValueError) as e:
        return None, f"unexpected psql output ({e})"
    io, io_reason = read_io(address)
    return DocstoreMark(marks, checkpoints, last, io, io_reason), ""


def read_io(address: str) -> tuple[IoMark | None, str]:
    rows, why = _query(address, _IO_SQL)
    if rows is None:
        return None, why
    try:
        return IoMark(*(int(x) for x in rows[0][:8])), ""
    except (IndexError, ValueError, TypeError) as e:
        return None, f"unexpected psql output for the I/O counters ({e})"


def activity(before: DocstoreMark, after: DocstoreMark, start_epoch_s: float, end_epoch_s: float) -> DocstoreActivity:
    """The maintenance between two marks; events are those whose recorded time lies in [start, end]."""

    def within(t: float | None) -> bool:
        return t is not None and start_epoch_s <= t <= end_epoch_s

    events: list[MaintenanceEvent] = []
    vac = ana = 0
    for name, a in after.tables.items():
        b = before.tables.get(name)
        vac += a.autovacuums - (b.autovacuums if b else 0)
        ana += a.autoanalyzes - (b.autoanalyzes if b else 0)
        if within(a.last_autovacuum_epoch_s):
            events.append(MaintenanceEvent("autovacuum", name, a.last_autovacuum_epoch_s or 0.0))
        if within(a.last_autoanalyze_epoch_s):
            events.append(MaintenanceEvent("autoanalyze", name, a.last_autoanalyze_epoch_s or 0.0))
    if within(after.last_checkpoint_epoch_s):
        events.append(MaintenanceEvent("checkpoint", None, after.last_checkpoint_epoch_s or 0.0))
    events.sort(key=lambda e: e.at_epoch_s)
    return DocstoreActivity(
        vac,
        ana,
        after.checkpoints - before.checkpoints,
        sum(t.live_rows for t in after.tables.values()),
        sum(t.dead_rows for t in after.tables.values()),
        events,
        io_between(before.io, after.io) if before.io and after.io else None,
        before.io_reason or after.io_reason if not (before.io and after.io) else "",
    )


# Maintenance held to chosen moments (module docstring). checkpoint_timeout's largest value is one day;
# max_wal_size large enough that the WAL of a soak (a post per request) never requests a checkpoint.
_HOLD_SQL = [
    "ALTER SYSTEM SET autovacuum = off",
    "ALTER SYSTEM SET checkpoint_timeout = '1d'",
    "ALTER SYSTEM SET max_wal_size = '16GB'",
    "SELECT pg_reload_conf()",
]
_SETTINGS_SQL = "SELECT name, setting FROM pg_settings WHERE name IN ('autovacuum', 'checkpoint_timeout')"
_MAINTAIN_SQL = ["VACUUM (ANALYZE)", "CHECKPOINT"]
MAINTAIN_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class MaintenancePass:
    """One scheduled pass: how long VACUUM (ANALYZE) + CHECKPOINT took and the dead rows it found."""

    seconds: float
    dead_rows_before: int


def hold_maintenance(address: str) -> str:
    """Turns autovacuum and timed checkpoints off on the running server; "" once the server reports
    both settings in force, else why not (the soak then says its maintenance was not held)."""
    _, why = _query(address, _HOLD_SQL)
    if why:
        return why
    rows, why = _query(address, _SETTINGS_SQL)
    if rows is None:
        return why
    settings = {r[0]: r[1] for r in rows if len(r) == 2}
    # pg_reload_conf() signals the postmaster; a backend reads the new file at its next command.
    if settings.get("autovacuum") != "off" or settings.get("checkpoint_timeout") != "86400":
        return f"the server did not take the settings (now {settings})"
    return ""


def run_maintenance(address: str) -> tuple[MaintenancePass | None, str]:
    """VACUUM (ANALYZE) every table, then CHECKPOINT, timed; (None, why) on any failure."""
    mark, why = read_mark(address)
    if mark is None:
        return None, why
    t0 = time.monotonic()
    _, why = _query(address, _MAINTAIN_SQL, timeout_s=MAINTAIN_TIMEOUT_S)
    if why:
        return None, why
    return MaintenancePass(time.monotonic() - t0, sum(t.dead_rows for t in mark.tables.values())), ""
