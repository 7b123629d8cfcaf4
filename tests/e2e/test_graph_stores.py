"""The driver against a real-store graph (issue 27): graph() passes --stores, reads the ready line's
store servers, samples them beside the services, and every store process is gone after the graph
stops; the merged document's CPU per store feeds the socialnet CPU split; every concurrency model (the
thread models' blocking clients, the event-loop models' clients on their own loops) serves the graph on
real stores; a store killed mid-run under an event-loop model gives counted `unavailable` errors, not a
hang; `--stores simulated` starts no server. Skipped (saying what is missing) without the engine or the Debian servers. The parsing itself is tested without engines in tests/unit/test_stores.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from conftest import needs_engine
from tailscope.lab import redis_stats, topology
from tailscope.lab.graph import graph, run_point, store_pids
from tailscope.lab.stores import stores_of
from tailscope.studies.socialnet import analysis

POSTGRES = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
MISSING = [n for n in ("memcached", "redis-server") if shutil.which(n) is None] + ([] if POSTGRES else ["postgres"])

pytestmark = [
    needs_engine("tailscope-svc", "tailscope-load"),
    pytest.mark.skipif(bool(MISSING), reason=f"store servers not installed: {', '.join(MISSING)} (scripts/bootstrap)"),
]


@pytest.fixture(scope="module")
def topo_json(tmp_path_factory) -> Path:
    return topology.to_engine_json(topology.SOCIALNET, tmp_path_factory.mktemp("topo") / "socialnet.json")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes only once reaped: its /proc entry says so
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_real_stores_are_read_sampled_and_gone_after_the_graph(topo_json, tmp_path):
    out = tmp_path / "graph.json"
    with graph(topo_json, "std-thread", out, stores="real") as (port, ready):
        s = stores_of(ready)
        assert s.mode == "real", s.reason
        assert sorted(x.system for x in s.servers) == ["memcached", "mongodb", "redis"]
        pids = store_pids(ready)
        assert all(_alive(p) for p in pids.values())
        assert all(x.address.startswith("127.0.0.1:") for x in s.servers)
        doc, stats = run_point(port, "/wrk2-api/post/compose", 4, 0, 1.0, 0.2, [], tmp_path / "p.hlog", pids)
        assert doc["load"]["requests_completed"] > 0
        # every store process sampled over the window, as a service would be
        assert set(stats["processes"]) == set(pids)
        assert all("cpu_pct" in p for p in stats["processes"].values())
    assert not any(_alive(p) for p in pids.values()), "a store server outlived its graph"
    merged = json.loads(out.read_text())
    split = analysis.decompose(merged, None, None).split
    assert split.stores_mode == "real" and split.stores_unavailable is None
    # every server's CPU per request is measured (/proc's 10 ms ticks: a lightly used one may read 0)
    assert {x.system for x in split.stores} == {"memcached", "redis", "mongodb"}
    assert all(x.cpu_per_request_ns is not None for x in split.stores), split.stores
    assert sum(x.cpu_per_request_ns or 0 for x in split.stores) > 0, "the stores served the graph on no CPU"


def test_simulated_stores_start_no_server_and_say_so(topo_json, tmp_path):
    with graph(topo_json, "std-thread", tmp_path / "graph.json", stores="simulated") as (_, ready):
        s = stores_of(ready)
        assert s.mode == "simulated" and s.reason == "--stores simulated"
        assert store_pids(ready) == {}


MODELS = ("std-async", "std-thread", "pool-blocking", "pool-callback", "coroutine")


def _real_counters(merged: dict) -> dict:
    stores = merged["stores"]
    assert stores["mode"] == "real", stores["reason"]
    assert not stores.get("services_simulated"), stores["services_simulated"]
    return stores["systems"]


@pytest.mark.parametrize("model", MODELS)
def test_every_model_serves_the_graph_on_real_stores(topo_json, tmp_path, model):
    out = tmp_path / "graph.json"
    with graph(topo_json, model, out, stores="real") as (port, ready):
        assert stores_of(ready).mode == "real"
        doc, _ = run_point(port, "/wrk2-api/post/compose", 2, 0, 1.0, 0.2, [], tmp_path / "p.hlog", {})
        assert doc["load"]["requests_completed"] > 0
    merged = json.loads(out.read_text())
    systems = _real_counters(merged)
    for system in ("memcached", "redis", "mongodb"):
        assert systems[system]["ops"] > 0, (model, system, systems)
        assert systems[system]["errors_unavailable"] == 0, (model, system, systems)
    # every service of the graph recorded real stores (none fell back to the simulated waits)
    assert {s["stores"] for s in merged["services"].values()} == {"real"}


@pytest.mark.parametrize("model", ["coroutine", "pool-callback"])
def test_a_store_killed_mid_run_gives_counted_unavailable_errors_not_a_hang(topo_json, tmp_path, model):
    out = tmp_path / "graph.json"
    with graph(topo_json, model, out, stores="real") as (port, ready):
        redis = next(x for x in stores_of(ready).servers if x.system == "redis")
        os.killpg(redis.pid, signal.SIGKILL)  # its own process group (docs/stores.md)
        doc, _ = run_point(port, "/wrk2-api/post/compose", 2, 0, 1.0, 0.2, [], tmp_path / "p.hlog", {})
        # requests were answered, none hung until the load's 5 s timeout (compose-post writes the
        # timelines to redis: it answers 502 at once)
        assert doc["load"]["requests_sent"] > 0
        assert doc["load"]["errors"]["timeout"] == 0, doc["load"]["errors"]
    merged = json.loads(out.read_text())
    systems = _real_counters(merged)
    assert systems["redis"]["errors_unavailable"] > 0, systems
    assert merged["stores"]["flagged"], "the dead server was not recorded"


def test_the_document_stores_rows_maintenance_and_backend_cpu_are_read_under_an_event_loop_model(topo_json, tmp_path):
    """The soak's readings of PostgreSQL (lab/docstore_stats.py, procstat.group_cpu_ticks): an event-loop
    model keeps its backends connected, and those backends (setsid: groups of their own) must count."""
    from tailscope.lab.docstore_stats import activity, read_mark
    from tailscope.lab.procstat import group_cpu_ticks

    with graph(topo_json, "coroutine", tmp_path / "graph.json", stores="real") as (port, ready):
        pg = next(x for x in stores_of(ready).servers if x.system == "mongodb")
        before, why = read_mark(pg.address)
        assert before is not None, why
        ticks_before = group_cpu_ticks(pg.pid)
        doc, _ = run_point(port, "/wrk2-api/post/compose", 8, 0, 2.0, 0.2, [], tmp_path / "p.hlog", {})
        completed = doc["load"]["requests_completed"]
        assert completed > 0
        ticks_after = group_cpu_ticks(pg.pid)
        assert ticks_before is not None and ticks_after is not None
        assert ticks_after > ticks_before, "the document store's backends' CPU was not counted"
        # Every compose-post stores its post: the tables gained rows. A backend flushes its counts to the
        # statistics views at most once a second, or 10 s after it goes idle (PostgreSQL 15): poll.
        rows_before = sum(t.live_rows for t in before.tables.values())
        deadline = time.monotonic() + 20
        while True:
            after, why = read_mark(pg.address)
            assert after is not None, why
            grew = activity(before, after, 0.0, 1e12)
            if grew.live_rows > rows_before or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert grew.live_rows > rows_before, (rows_before, grew)
        assert {"posts", "user_timeline", "social_graph"} <= set(after.tables), sorted(after.tables)
        # The I/O beside the CPU: rows written and WAL grew with the posts; the sizes are the server's.
        assert grew.io is not None, grew.io_reason
        assert grew.io.rows_written > 0 and grew.io.wal_bytes > 0 and grew.io.blocks_hit > 0
        assert grew.io.shared_buffers_bytes == 64 << 20  # the store's memory_mib (64 by default)
        assert grew.io.database_bytes > 0 and grew.io.backend_writes >= 0 and grew.io.blocks_read >= 0
        rd = next(x for x in stores_of(ready).servers if x.system == "redis")
        mark, why = redis_stats.read_mark(rd.address)
        assert mark is not None, why
        assert mark.maxmemory_bytes == 64 << 20 and mark.used_memory_bytes > 0 and mark.keys > 0
    assert read_mark(pg.address)[0] is None  # the server is gone: a reason, not zeros


def test_the_soak_holds_the_document_stores_maintenance_to_chosen_moments(topo_json, tmp_path):
    """`tailscope soak --docstore-maintenance between` (lab/docstore_stats.py): autovacuum and timed
    checkpoints off on the running server, then a VACUUM (ANALYZE) + CHECKPOINT on request, timed."""
    from tailscope.lab.docstore_stats import _query, hold_maintenance, run_maintenance

    with graph(topo_json, "std-thread", tmp_path / "graph.json", stores="real") as (port, ready):
        pg = next(x for x in stores_of(ready).servers if x.system == "mongodb")
        rows, why = _query(pg.address, "SHOW autovacuum")
        assert rows == [["on"]], why  # PostgreSQL's own schedule until the soak holds it
        assert hold_maintenance(pg.address) == ""
        rows, why = _query(pg.address, "SHOW autovacuum")
        assert rows == [["off"]], why
        run_point(port, "/wrk2-api/post/compose", 4, 0, 1.0, 0.2, [], tmp_path / "p.hlog", {})
        done, why = run_maintenance(pg.address)
        assert done is not None, why
        assert done.seconds > 0 and done.dead_rows_before >= 0
        # VACUUM (ANALYZE) analysed every table: each one's last manual analyze is set.
        rows, why = _query(pg.address, "SELECT count(*) FROM pg_stat_user_tables WHERE last_analyze IS NULL")
        assert rows == [["0"]], why
    # the server is gone: a reason, never a pass
    done, why = run_maintenance(pg.address)
    assert done is None and why
    assert hold_maintenance(pg.address) != ""
