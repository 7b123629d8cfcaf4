"""Issue 27's driver side: the ready line's `stores` object (lab/stores.py), how graph() passes
`--stores` and normalises what it reads, the `--stores` option of the run commands, the record every
study document keeps, and the wording of a section and of the socialnet CPU split for real stores,
simulated stores and a store whose CPU could not be read. No engines: recorded ready lines and
documents, and a stand-in for `serve`."""

from __future__ import annotations

import copy
from contextlib import contextmanager

import pytest
from click.testing import CliRunner

from tailscope.cli import main
from tailscope.cli import run as cli_run
from tailscope.lab import graph as graph_mod
from tailscope.lab.engines import EngineError, Server
from tailscope.lab.stores import (
    NO_STORES_REASON,
    GraphStores,
    StoreServer,
    StoresRecordError,
    stores_args,
    stores_of,
)
from tailscope.store import EngineDocument
from tailscope.studies.common import record_stores, stores_line, study_section
from tailscope.studies.socialnet import analysis
from tailscope.studies.socialnet.section import cpu_split_table

# A ready line as the interface fixes it (docs/stores.md), recorded from the shape the supervisor prints.
REAL_READY = {
    "listening": 40100,
    "pids": {"nginx-web-server": 501, "compose-post-service": 502},
    "stores": {
        "mode": "real",
        "reason": "memcached, redis-server and postgres found",
        "servers": [
            {
                "system": "memcached",
                "server": "memcached 1.6.18",
                "pid": 601,
                "address": "127.0.0.1:40001",
                "cpus": "1",
                "memory_mib": 64,
            },
            {
                "system": "redis",
                "server": "redis 7.0.15",
                "pid": 602,
                "address": "127.0.0.1:40002",
                "cpus": None,
                "memory_mib": 64,
            },
            {"system": "mongodb", "server": "postgresql 15", "pid": 603, "address": "127.0.0.1:40003", "cpus": "0"},
        ],
    },
}
SIMULATED_READY = {
    "listening": 40100,
    "pids": {"nginx-web-server": 501},
    "stores": {"mode": "simulated", "reason": "auto: redis-server not found (Debian package redis-server)"},
}


# ---- the ready line --------------------------------------------------------------------------------


def test_a_real_ready_line_gives_every_server_and_its_pid():
    s = stores_of(REAL_READY)
    assert s.mode == "real" and s.reason == "memcached, redis-server and postgres found"
    assert [x.system for x in s.servers] == ["memcached", "redis", "mongodb"]
    assert s.servers[0] == StoreServer("memcached", 601, "127.0.0.1:40001", "1", "memcached 1.6.18", 64)
    assert s.servers[1].cpus is None and s.servers[2].memory_mib is None
    assert s.pids() == {"store:memcached": 601, "store:redis": 602, "store:mongodb": 603}


def test_the_record_reads_back_as_the_same_value():
    s = stores_of(REAL_READY)
    assert stores_of({"stores": s.record()}) == s


def test_a_simulated_ready_line_has_its_reason_and_no_process():
    s = stores_of(SIMULATED_READY)
    assert s == GraphStores("simulated", "auto: redis-server not found (Debian package redis-server)")
    assert s.pids() == {}


def test_a_ready_line_without_stores_is_an_engine_from_before_real_stores():
    s = stores_of({"listening": 1, "pids": {}})
    assert s.mode == "simulated" and s.reason == NO_STORES_REASON and s.servers == ()


def test_a_second_server_of_one_system_is_sampled_too_not_overwritten():
    s = GraphStores(
        "real", "", (StoreServer("redis", 7, "127.0.0.1:1", None), StoreServer("redis", 8, "127.0.0.1:2", None))
    )
    assert s.pids() == {"store:redis": 7, "store:redis#2": 8}


def _with(path: str, value: object) -> dict:
    """REAL_READY with one field of its stores object replaced ("servers.0.pid" style paths)."""
    ready = copy.deepcopy(REAL_READY)
    node: dict | list = ready["stores"]
    *parents, last = path.split(".")
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return ready


@pytest.mark.parametrize(
    ("ready", "names"),
    [
        ({"stores": "real"}, "'stores' is str"),
        (_with("mode", "auto"), "stores.mode is 'auto'"),
        (_with("reason", None), "stores.reason is None"),
        (_with("servers", {"system": "redis"}), "stores.servers is dict"),
        (_with("servers.0", 601), "stores.servers[0] is int"),
        (_with("servers.1.system", "mongo"), "stores.servers[1].system is 'mongo'"),
        (_with("servers.0.pid", "601"), "stores.servers[0].pid is '601'"),
        (_with("servers.0.pid", True), "stores.servers[0].pid is True"),
        (_with("servers.0.pid", 0), "stores.servers[0].pid is 0"),
        (_with("servers.2.address", ""), "stores.servers[2].address is ''"),
        (_with("servers.0.cpus", 1), "stores.servers[0].cpus is 1"),
        (_with("servers.0.memory_mib", -1), "stores.servers[0].memory_mib is -1"),
        (_with("mode", "simulated"), "'simulated' but 3 store server(s)"),
    ],
)
def test_a_malformed_stores_object_is_refused_naming_the_field(ready, names):
    with pytest.raises(StoresRecordError) as e:
        stores_of(ready)
    assert names in str(e.value)


# ---- graph(): the option passed, the ready line normalised ----------------------------------------


def test_stores_args_pass_only_what_differs_from_the_engines_default():
    assert stores_args(None) == [] and stores_args("auto") == []
    assert stores_args("real") == ["--stores", "real"]
    assert stores_args("simulated") == ["--stores", "simulated"]
    with pytest.raises(ValueError, match="'memcached' is not one of real, simulated, auto"):
        stores_args("memcached")


def _fake_serve(ready: dict, seen: list):
    @contextmanager
    def serve(name, args, **_kw):
        seen.append(list(args))
        yield Server(proc=None, ready=copy.deepcopy(ready))  # type: ignore[arg-type]

    return serve


@pytest.mark.parametrize(("mode", "passed"), [(None, []), ("auto", []), ("real", ["--stores", "real"])])
def test_graph_passes_stores_and_normalises_the_ready_line(monkeypatch, tmp_path, mode, passed):
    seen: list = []
    monkeypatch.setattr(graph_mod, "serve", _fake_serve(REAL_READY, seen))
    with graph_mod.graph(tmp_path / "t.json", "coroutine", tmp_path / "o.json", stores=mode) as (port, ready):
        assert port == 40100
        assert ready["stores"] == stores_of(REAL_READY).record()
        assert graph_mod.store_pids(ready) == {"store:memcached": 601, "store:redis": 602, "store:mongodb": 603}
    args = seen[0]
    got = args[args.index("--stores") : args.index("--stores") + 2] if "--stores" in args else []
    assert got == passed


def test_graph_gives_an_old_engines_ready_line_a_simulated_record(monkeypatch, tmp_path):
    monkeypatch.setattr(graph_mod, "serve", _fake_serve({"listening": 1, "pids": {}}, []))
    with graph_mod.graph(tmp_path / "t.json", "coroutine", tmp_path / "o.json") as (_, ready):
        assert ready["stores"] == {"mode": "simulated", "reason": NO_STORES_REASON, "servers": []}
        assert graph_mod.store_pids(ready) == {}


def test_graph_refuses_a_malformed_stores_object_as_an_engine_error(monkeypatch, tmp_path):
    monkeypatch.setattr(graph_mod, "serve", _fake_serve(_with("servers.0.pid", -3), []))
    with pytest.raises(EngineError, match=r"malformed stores object: stores.servers\[0\].pid is -3"):
        with graph_mod.graph(tmp_path / "t.json", "coroutine", tmp_path / "o.json"):
            pass


# ---- the option ------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["run"], ["bench", "socialnet"], ["bench", "placement"], ["bench", "twin"]])
@pytest.mark.parametrize("mode", ["real", "simulated", "auto", None])
def test_the_stores_option_reaches_every_study_and_defaults_to_auto(monkeypatch, command, mode):
    got: list[dict] = []
    monkeypatch.setattr(cli_run, "run_and_report", lambda names, full, results, options, **kw: got.append(options))
    r = CliRunner().invoke(main, [*command, *(["--stores", mode] if mode else [])])
    assert r.exit_code == 0, r.output
    assert got[0]["stores"] == (mode or "auto")


@pytest.mark.parametrize("value", ["mongodb", "REAL ", ""])
def test_a_stores_mode_outside_the_choices_is_refused_naming_the_option(monkeypatch, value):
    monkeypatch.setattr(cli_run, "run_and_report", lambda *a, **kw: pytest.fail("ran with a bad --stores"))
    r = CliRunner().invoke(main, ["run", "--stores", value])
    assert r.exit_code == 2
    assert "--stores" in r.output and "real" in r.output and "simulated" in r.output and "auto" in r.output


# ---- the record in every document, the section's wording --------------------------------------------


def test_a_document_records_its_graphs_stores_and_keeps_the_engines_own():
    ready = {"stores": stores_of(SIMULATED_READY).record()}
    load = record_stores({"load": {}}, ready)
    assert load["stores"] == {"mode": "simulated", "reason": SIMULATED_READY["stores"]["reason"], "servers": []}
    merged = {
        "stores": {"mode": "real", "reason": "r", "servers": [{"system": "redis", "cpu_s": 1.5}]},
        "work": {"mode": "simulated"},
    }
    assert record_stores(copy.deepcopy(merged), ready) == merged


def test_the_section_line_for_real_simulated_none_and_mixed():
    real = {"stores": stores_of(REAL_READY).record()}
    sim = {"stores": SIMULATED_READY["stores"]}
    assert stores_line([real, {"baseline": 1}, real]) == "stores: real"
    assert stores_line([sim]) == "stores: simulated (auto: redis-server not found (Debian package redis-server))"
    assert stores_line([{"baseline": 1}]) == f"stores: simulated ({NO_STORES_REASON})"
    assert stores_line([real, sim]).startswith("stores: real; simulated (auto: redis-server")
    assert stores_line([{"stores": {"mode": "auto"}}]) == "stores: unreadable (a document records stores.mode 'auto')"
    flagged = {"mode": "real", "reason": "r", "flagged": "a store server died during the run"}
    assert stores_line([{"stores": flagged}]) == "stores: real (a store server died during the run)"
    mixed = {"mode": "real", "reason": "r", "services_simulated": ["a", "b"]}
    assert stores_line([{"stores": mixed}]) == "stores: real (services on simulated stores: a, b)"
    # a per-service document's plain string
    assert stores_line([{"stores": "real"}]) == "stores: real"


# ---- the socialnet CPU split ---------------------------------------------------------------------


def _graph(stores: dict | None, cpu_s: float = 4.0, requests: int = 1000) -> dict:
    g: dict = {
        "services": {"s0": {"counters": {"calls": 5000, "async_threads": 0}}},
        "totals": {"cpu_s": cpu_s, "threads_max_sum": 40, "front": {"requests": requests}, "ctx_switches": 9},
    }
    if stores is not None:
        g["stores"] = stores
    return g


def _merged_real(memcached_cpu_s: float | None = 0.5, why: str | None = None) -> dict:
    mc: dict = {"system": "memcached", "cpu_s": memcached_cpu_s, "max_rss_kib": 9000}
    if why:
        mc["cpu_s_reason"] = why
    return {
        "mode": "real",
        "reason": "found",
        "servers": [mc, {"system": "redis", "cpu_s": 1.0}, {"system": "mongodb", "cpu_s": 2.0}],
    }


def test_the_split_of_a_real_graph_gives_services_and_each_store():
    split = analysis.decompose(_graph(_merged_real()), None, None).split
    assert split.stores_mode == "real" and split.stores_unavailable is None
    assert split.services_cpu_per_request_ns == pytest.approx(4e6)
    assert [(s.system, s.cpu_per_request_ns) for s in split.stores] == [
        ("memcached", pytest.approx(0.5e6)),
        ("redis", pytest.approx(1e6)),
        ("mongodb", pytest.approx(2e6)),
    ]
    assert split.total_cpu_per_request_ns == pytest.approx(7.5e6)


def test_a_store_whose_cpu_was_unreadable_is_none_with_the_engines_reason_and_no_total():
    split = analysis.decompose(_graph(_merged_real(None, "/proc/601/stat unreadable")), None, None).split
    mc = split.stores[0]
    assert mc.cpu_per_request_ns is None and mc.unavailable == "/proc/601/stat unreadable"
    assert split.total_cpu_per_request_ns is None


def test_simulated_stores_have_no_store_cpu_and_say_why():
    split = analysis.decompose(_graph({"mode": "simulated", "reason": "asked: --stores simulated"}), None, None).split
    assert split.stores == () and split.stores_mode == "simulated"
    assert split.stores_unavailable == "stores simulated (asked: --stores simulated): no store process ran"
    old = analysis.decompose(_graph(None), None, None).split
    assert old.stores_unavailable == f"stores simulated ({NO_STORES_REASON}): no store process ran"


def _summary(graphs: dict[str, dict]) -> analysis.SocialnetSummary:
    loads = []
    for m in graphs:
        loads.append({"socialnet_point": {"model": m, "kind": "rate", "rate_per_s": 100}, "load": {}})
    return analysis.summarize(loads, {f"{m}/graph": g for m, g in graphs.items()})


def test_the_split_table_wording_for_real_unavailable_and_simulated():
    table = cpu_split_table(
        _summary(
            {
                "coroutine": _graph(_merged_real()),
                "std-async": _graph(_merged_real(None, "/proc/601/stat unreadable")),
                "std-thread": _graph({"mode": "simulated", "reason": "auto: memcached not found"}),
            }
        )
    )
    assert table.columns == [
        "model",
        "stores",
        "services",
        "memcached process",
        "redis process",
        "mongodb process",
        "services + stores",
    ]
    rows = {r[0]: r for r in table.rows}
    assert rows["coroutine"][1:] == ["real", "4 ms", "500 µs", "1 ms", "2 ms", "7.5 ms"]
    assert rows["std-async"][3] == "unavailable (/proc/601/stat unreadable)"
    assert rows["std-async"][6] == "unavailable (a part is unavailable)"
    why = "stores simulated (auto: memcached not found): no store process ran"
    assert rows["std-thread"][1] == "simulated (auto: memcached not found)"
    assert rows["std-thread"][3:] == [f"unavailable ({why})"] * 4


def test_a_graph_that_served_nothing_has_no_store_cpu_per_request():
    split = analysis.decompose(_graph(_merged_real(), requests=0), None, None).split
    assert all(s.cpu_per_request_ns is None and s.unavailable == "the front served no request" for s in split.stores)


class _Store:
    """The two reads study_section makes."""

    def __init__(self, docs: list[dict]):
        self.docs = docs

    def documents(self, run_id: str, study: str | None = None) -> list[EngineDocument]:
        return [EngineDocument("s", "tailscope-load", d) for d in self.docs]

    def unavailable(self, run_id: str) -> list[tuple]:
        return [("s", "ceiling", "", "the graph did not start")]


class _Study:
    name, title = "s", "A study"


def test_a_graph_studys_section_opens_with_its_stores_then_its_unavailable_figures():
    store = _Store([{"stores": SIMULATED_READY["stores"]}])
    sec = study_section(_Study(), store, "r", "intro", graphs=True)  # type: ignore[arg-type]
    assert sec.notes == [
        "stores: simulated (auto: redis-server not found (Debian package redis-server))",
        "ceiling unavailable: the graph did not start",
    ]
    assert study_section(_Study(), store, "r", "intro").notes == ["ceiling unavailable: the graph did not start"]  # type: ignore[arg-type]
