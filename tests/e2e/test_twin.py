"""From traces to a runnable twin (docs/twin.md): inference, fits, bad input, validation figures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from conftest import REPO, engine_path, needs_engine
from tailscope.cli import main
from tailscope.lab import topology
from tailscope.traces.spans import cache_hit_ratios, read_traces
from tailscope.twin.fit import fit_durations
from tailscope.twin.infer import MAX_GROUP_CALLS, InferOptions, infer, insertions
from tailscope.twin.structure import differences
from tailscope.twin.validate import compare

# ---- synthetic Jaeger traces ---------------------------------------------------------------------


def jaeger(traces: list[list[tuple]]) -> dict:
    """traces: [[(span_id, parent_id|None, service, operation, start_us, duration_us, kind), ...], ...]."""
    data = []
    for n, spans in enumerate(traces):
        tid = f"{n + 1:016x}"
        services = sorted({s[2] for s in spans})
        pid = {svc: f"p{i}" for i, svc in enumerate(services)}
        data.append(
            {
                "traceID": tid,
                "spans": [
                    {
                        "traceID": tid,
                        "spanID": sid,
                        "operationName": op,
                        "references": []
                        if parent is None
                        else [{"refType": "CHILD_OF", "traceID": tid, "spanID": parent}],
                        "startTime": start,
                        "duration": dur,
                        "tags": [{"key": "span.kind", "type": "string", "value": kind}],
                        "processID": pid[svc],
                    }
                    for sid, parent, svc, op, start, dur, kind in spans
                ],
                "processes": {p: {"serviceName": s, "tags": []} for s, p in pid.items()},
            }
        )
    return {"data": data}


def rpc(sid: str, parent: str, caller: str, callee: str, op: str, start: int, dur: int) -> list[tuple]:
    """A client span in `caller` and its server span in `callee` (1 µs scheduling/join delay)."""
    return [
        (sid + "c", parent, caller, f"{op}_client", start, dur, "client"),
        (sid + "s", sid + "c", callee, f"{op}_server", start + 1, dur - 2, "server"),
    ]


def write(tmp_path: Path, doc: dict, name: str = "traces.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def infer_file(path: Path, **kw):
    return infer(read_traces([path]), InferOptions(**kw))


# ---- fits ------------------------------------------------------------------------------------------


def test_fit_picks_lognormal_for_lognormal_samples_and_records_ks():
    rng = np.random.default_rng(1)
    ns = rng.lognormal(np.log(300e3), 0.6, 4000)  # median 300 µs in ns
    f = fit_durations(ns)
    assert f.kind == "lognormal"
    assert f.dist["median_us"] == pytest.approx(300, rel=0.05)
    assert f.dist["sigma"] == pytest.approx(0.6, rel=0.05)
    assert f.ks_statistic is not None and f.ks_statistic < f.ks_by_kind["exponential"]


def test_fit_of_one_sample_is_a_constant_without_goodness_of_fit():
    f = fit_durations([42_000])
    assert f.dist == {"kind": "constant", "us": 42.0}
    assert f.ks_statistic is None and f.samples == 1


def test_fit_keeps_an_observed_tail_beyond_the_engines_default_cap():
    rng = np.random.default_rng(2)
    ns = np.append(rng.lognormal(np.log(100e3), 0.3, 995), [10e6] * 5)  # median 100 µs, five 10 ms stalls
    f = fit_durations(ns)
    assert f.kind == "lognormal"
    assert f.dist["cap_us"] == 10_000  # not the engine's default 20 × median (~2 ms)
    assert fit_durations(rng.lognormal(np.log(100e3), 0.3, 1000)).dist.get("cap_us") is None


# ---- structure rules on synthetic traces -----------------------------------------------------------


@needs_engine("tailscope-critpath")
def test_overlapping_calls_are_one_async_group_and_back_to_back_calls_are_sequential(tmp_path):
    traces = []
    for n in range(30):
        t0 = n * 10_000
        spans = [("r", None, "front", "/api", t0, 1000, "server")]
        spans += rpc("a", "r", "front", "svc-a", "get_a", t0 + 10, 200)  # a ∥ b
        spans += rpc("b", "r", "front", "svc-b", "get_b", t0 + 12, 300)
        spans += rpc("c", "r", "front", "svc-c", "put_c", t0 + 400, 100)  # own time, then c
        spans += rpc("d", "r", "front", "svc-d", "put_d", t0 + 505, 100)  # right after c: sequential
        traces.append(spans)
    topo, report = infer_file(write(tmp_path, jaeger(traces)))
    stages = topo["services"][0]["endpoints"][0]["stages"]
    groups = [s["group"] for s in stages if "group" in s]
    # Without probe tags, back-to-back calls are sequential calls (deferred needs the probe's launch)
    assert [[c["launch"] for c in g["calls"]] for g in groups] == [["async", "async"]]
    assert [s["call"]["service"] for s in stages if "call" in s] == ["svc-c", "svc-d"]
    assert groups[0]["join"] == ["get_a", "get_b"]  # consumed in the order they ended
    assert topo["front"] == {"service": "front", "path": "/api", "endpoint": "api"}
    assert report["recorded_rate"]["rate_per_s"] == pytest.approx(100, rel=0.01)  # one trace per 10 ms
    topology.validate(topo)  # what tailscope-svc --check-topology accepts


def test_store_misses_become_hit_ratio_and_on_miss():
    base = (("store", "cache_get"), ("call", "x", "s", "op"))
    miss = (("store", "cache_get"), ("store", "db_find"), ("store", "cache_set"), ("call", "x", "s", "op"))
    assert insertions(base, miss) == {0: (("store", "db_find"), ("store", "cache_set"))}
    assert insertions(miss, base) is None
    assert insertions(base, (("call", "x", "s", "op"),)) is None


@needs_engine("tailscope-critpath")
def test_no_cross_service_span_is_a_clear_error(tmp_path):
    path = write(
        tmp_path, jaeger([[("r", None, "mono", "/x", 0, 100, "server"), ("q", "r", "mono", "sql", 5, 50, "client")]])
    )
    r = CliRunner().invoke(main, ["topology", "from-traces", str(path), "-o", str(tmp_path / "t.yaml")])
    assert r.exit_code == 1
    assert "no cross-service span" in r.output
    assert "error: " in r.output and "[red]" not in r.output  # the prefix styled, not printed as markup
    assert not (tmp_path / "t.yaml").exists() and not (tmp_path / "t.yaml.inference.json").exists()


@needs_engine("tailscope-critpath")
def test_conflicting_versions_keep_the_most_frequent_and_report_the_rest(tmp_path):
    traces = []
    for n in range(10):
        t0 = n * 5000
        callee = "svc-b" if n < 7 else "svc-c"  # a second version of front calls svc-c instead
        traces.append(
            [("r", None, "front", "/api", t0, 500, "server"), *rpc("a", "r", "front", callee, "work", t0 + 10, 100)]
        )
    topo, report = infer_file(write(tmp_path, jaeger(traces)), min_traces=5)
    front = next(e for e in report["endpoints"] if e["service"] == "front")
    assert front["structure"] == ["call svc-b:work_server"]
    assert front["variants_left_out"][0]["count"] == 3
    assert front["structure_share"] == pytest.approx(0.7)
    rare = {e["service"]: e["rare"] for e in report["endpoints"]}
    assert rare == {"front": False, "svc-b": False, "svc-c": True}  # 3 traces < --min-traces 5
    topology.validate(topo)


@needs_engine("tailscope-critpath")
def test_recursion_is_dropped_with_a_report(tmp_path):
    traces = []
    for n in range(5):
        t0 = n * 5000
        spans = [("r", None, "front", "/api", t0, 900, "server"), *rpc("a", "r", "front", "tree", "walk", t0 + 10, 800)]
        spans += rpc("b", "as", "tree", "tree", "walk", t0 + 50, 500)  # tree.walk calls itself
        traces.append(spans)
    topo, report = infer_file(write(tmp_path, jaeger(traces)))
    assert report["cycles_dropped"] == ["tree:walk_server → tree:walk_server"]
    topology.validate(topo)  # no cycle left for the engine to reject


@needs_engine("tailscope-critpath")
def test_fanout_of_thousands_is_bounded_and_reported(tmp_path):
    n = 3000
    spans = [("r", None, "front", "/api", 0, 10_000, "server")]
    for i in range(n):
        spans += rpc(f"f{i}", "r", "front", "shard", "get", 10 + i % 7, 5000)
    topo, report = infer_file(write(tmp_path, jaeger([spans])))
    group = next(s["group"] for s in topo["services"][0]["endpoints"][0]["stages"] if "group" in s)
    assert len(group["calls"]) == MAX_GROUP_CALLS
    assert report["fanout_truncated"] == [f"front:/api: {n} calls kept as {MAX_GROUP_CALLS}"]
    shard = next(e for e in report["endpoints"] if e["service"] == "shard")
    assert shard["instances"] == n and shard["rare"]  # one trace
    topology.validate(topo)


@needs_engine("tailscope-critpath")
def test_span_dump_needs_an_artifacts_folder_and_writes_one_line_per_trace(tmp_path):
    import subprocess

    critpath = engine_path("tailscope-critpath")
    p = write(tmp_path, jaeger([[("r", None, "a", "/x", 0, 100, "server"), *rpc("c", "r", "a", "b", "op", 5, 50)]] * 3))
    r = subprocess.run([critpath, "--span-dump", str(p)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--span-dump: needs --artifacts" in r.stderr
    r = subprocess.run(
        [critpath, "--span-dump", "--artifacts", str(tmp_path / "a"), "--out", str(tmp_path / "o.json"), str(p)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    lines = (tmp_path / "a" / "spans.ndjson").read_text().splitlines()
    assert len(lines) == 3
    first = json.loads(lines[0])
    assert [s["operation"] for s in first["spans"]] == ["/x", "op_client", "op_server"]
    assert first["analysis"]["delays"]["rpc"][0]["server_span_id"] == "cs"
    assert json.loads((tmp_path / "o.json").read_text())["artifacts"]["span_dump_traces"] == 3


def test_bad_numbers_are_usage_errors(tmp_path):
    p = write(tmp_path, {"data": []})
    for flag, value in (("--cpu-fraction", "1.5"), ("--min-traces", "0"), ("--sampling", "0")):
        r = CliRunner().invoke(main, ["topology", "from-traces", str(p), "-o", str(tmp_path / "t.yaml"), flag, value])
        assert r.exit_code == 2, (flag, r.output)
        assert flag in r.output


def test_a_distribution_one_side_lacks_is_unavailable_not_zero():
    row = compare("svc", np.array([1.0, 2.0]), None)
    assert row["ratios"] is None and row["ks"] is None
    assert "not on the critical path" in row["unavailable"]
    ok = compare("svc", np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0]))
    assert ok["ratios"]["p50"] == pytest.approx(2.0) and 0 <= ok["ks"]["statistic"] <= 1


def test_ratio_intervals_cover_the_truth_and_narrow_with_samples():
    from tailscope.measure.verdict import MET, NOT_MET, UNDECIDED
    from tailscope.twin.validate import contract_verdict

    rng = np.random.default_rng(1)
    # The twin is the original × 1.1 exactly in distribution: every interval should hold 1.1.
    small = compare("svc", rng.lognormal(0, 0.5, 300), 1.1 * rng.lognormal(0, 0.5, 300))
    large = compare("svc", rng.lognormal(0, 0.5, 20000), 1.1 * rng.lognormal(0, 0.5, 20000))
    for row in (small, large):
        for k in ("p50", "p99"):
            lo, hi = row["ratio_ci95"][k]
            assert lo < 1.1 < hi
    width = {n: r["ratio_ci95"]["p99"][1] - r["ratio_ci95"]["p99"][0] for n, r in (("s", small), ("l", large))}
    assert width["l"] < width["s"] / 3  # 66× the samples: the interval about 8× narrower
    # 20 000 samples at 1.1× decide the ±15 % band (inside: met); 300 samples do not, and say how long would.
    assert contract_verdict(large).verdict == MET
    open_ = contract_verdict(small)
    assert open_.verdict == UNDECIDED and open_.length_factor is not None and open_.length_factor > 1
    assert open_.samples_to_decide is not None and open_.samples_to_decide > 300
    far = compare("svc", rng.lognormal(0, 0.5, 20000), 2.0 * rng.lognormal(0, 0.5, 20000))
    assert contract_verdict(far).verdict == NOT_MET  # wholly outside
    assert compare("svc", rng.lognormal(0, 0.5, 50), None).get("ratio_ci95") is None


# ---- the closed loop: tailscope's own socialnet traces --------------------------------------------


@pytest.fixture(scope="module")
def socialnet_traces(tmp_path_factory) -> Path:
    """A small traced run of the socialnet graph (std-async, 60 requests/s, 8 s, every request traced).

    The join order of results that were all there before the parent asked cannot be read from one
    trace; it comes from the instances that can tell, so the run is long enough to hold many (5 s
    once left too few: the inferred topology differed in 1 of ~20 clean-clone runs)."""
    return _socialnet_run(tmp_path_factory, "simulated")


def _socialnet_run(tmp_path_factory, stores: str) -> Path:
    """The traced socialnet run of the fixtures, on `stores`. The structure test reads simulated
    stores: it checks that inference recovers socialnet.yaml's declared structure, hit ratios
    included, and on real stores a cache's hit ratio is what the real data gives (a cache that no
    on_miss fills always misses, so its miss path is in every trace: docs/stores.md)."""
    from tailscope.lab.engines import run_engine
    from tailscope.lab.graph import LOAD, PATH, graph
    from tailscope.lab.load import http_load_args

    d = tmp_path_factory.mktemp(f"socialnet-{stores}")
    topo = topology.to_engine_json(topology.SOCIALNET, d / "socialnet.json")
    with graph(topo, "std-async", d / "graph.json", 1.0, d / "traces", stores=stores) as (port, _):
        run_engine(LOAD, http_load_args(port, PATH, 8, 60, 8.0, 0.2, timeout="2s"), timeout_s=120)
    return d / "traces" / "traces.otlp.json"


def _skip_without_store_servers() -> None:
    missing = [n for n in ("memcached", "redis-server") if shutil.which(n) is None]
    if missing or not list(Path("/usr/lib/postgresql").glob("*/bin/postgres")):
        pytest.skip(f"store servers not installed: {', '.join(missing) or 'postgres'} (scripts/bootstrap)")


@pytest.fixture(scope="module")
def real_socialnet_traces(tmp_path_factory) -> Path:
    _skip_without_store_servers()
    return _socialnet_run(tmp_path_factory, "real")


@pytest.mark.serial
@needs_engine("tailscope-critpath", "tailscope-svc", "tailscope-load")
def test_a_twin_inferred_from_a_real_store_graph_runs_and_names_every_store(real_socialnet_traces, tmp_path):
    """The twin study's source traces come from the real-store graph: what is inferred from them is a
    topology the engine runs (its stores simulated waits: no op), with every store span of the graph."""
    out = tmp_path / "inferred.yaml"
    r = CliRunner().invoke(main, ["topology", "from-traces", str(real_socialnet_traces), "-o", str(out)])
    assert r.exit_code == 0, r.output
    topology.load(out)  # tailscope-svc --check-topology accepts the file as written

    def stores(stages: list) -> list[dict]:
        found = []
        for st in stages:
            if "store" in st and st["store"]["system"] != "own-time":  # own time inferred as waiting is no store
                found += [st["store"], *stores(st["store"].get("on_miss") or [])]
        return found

    def all_stores(doc: dict) -> list[dict]:
        return [
            s for svc in doc["services"] for ep in svc.get("endpoints") or [] for s in stores(ep.get("stages") or [])
        ]

    inferred, graph_doc = yaml.safe_load(out.read_text()), yaml.safe_load(topology.SOCIALNET.read_text())
    assert not [s["span"] for s in all_stores(inferred) if "op" in s], "a twin's store is a simulated wait"
    assert {s["span"] for s in all_stores(inferred)} == {s["span"] for s in all_stores(graph_doc)}


@pytest.mark.serial  # the join order is read from timing: a busy machine leaves fewer instances that tell
@needs_engine("tailscope-critpath", "tailscope-svc", "tailscope-load")
def test_real_store_reads_carry_their_answer_and_a_miss_path_is_on_miss_though_it_always_ran(
    real_socialnet_traces, tmp_path
):
    """The twin study's source is the real-store graph: compose_user_mentions' memcached read misses every
    time (no on_miss of it writes the cache), so no trace shows its hit form; its span's answer (tag
    tailscope.cache) makes the document-store read its on_miss, not a sibling stage (docs/twin.md)."""
    ratios = cache_hit_ratios(read_traces([real_socialnet_traces]).traces)
    assert set(ratios) == {"compose_user_mentions_memcached_get_client", "social_graph_redis_get_client"}
    assert ratios["compose_user_mentions_memcached_get_client"] == 0.0
    out = tmp_path / "inferred.yaml"
    r = CliRunner().invoke(main, ["topology", "from-traces", str(real_socialnet_traces), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert differences(yaml.safe_load(topology.SOCIALNET.read_text()), yaml.safe_load(out.read_text())) == []
    report = json.loads((tmp_path / "inferred.yaml.inference.json").read_text())
    hits = {h["store"]: h["hit_ratio"] for e in report["endpoints"] for h in e["hit_ratios"]}
    assert hits["compose_user_mentions_memcached_get_client"] == 0.0


@pytest.mark.serial  # the join order is read from timing: a busy machine leaves fewer instances that tell
@needs_engine("tailscope-critpath", "tailscope-svc", "tailscope-load")
def test_topology_inferred_from_socialnet_traces_matches_socialnet_yaml(socialnet_traces, tmp_path):
    out = tmp_path / "inferred.yaml"
    r = CliRunner().invoke(main, ["topology", "from-traces", str(socialnet_traces), "-o", str(out)])
    assert r.exit_code == 0, r.output
    inferred = yaml.safe_load(out.read_text())
    expected = yaml.safe_load(topology.SOCIALNET.read_text())
    assert differences(expected, inferred) == []
    report = json.loads((tmp_path / "inferred.yaml.inference.json").read_text())
    hits = {h["store"]: h["hit_ratio"] for e in report["endpoints"] for h in e["hit_ratios"]}
    assert set(hits) == {"compose_user_mentions_memcached_get_client", "social_graph_redis_get_client"}
    assert all(0 < h < 1 for h in hits.values())
    topology.load(out)  # tailscope-svc --check-topology accepts the file as written


def test_jaeger_outside_loopback_and_the_lab_is_refused_before_any_connection(tmp_path):
    # Regression: from-traces had its own Jaeger fetch without the allow-list that
    # `analyze --jaeger` applies; both now go through jaeger_query.
    out = tmp_path / "t.yaml"
    r = CliRunner().invoke(main, ["topology", "from-traces", "--jaeger", "http://192.0.2.7:16686", "-o", str(out)])
    assert r.exit_code == 1 and "neither loopback nor in the lab subnet" in " ".join(r.output.split())
    assert not out.exists()


@needs_engine("tailscope-critpath")
def test_an_operation_seen_once_is_kept_as_a_constant_and_flagged_rare(tmp_path):
    traces = []
    for n in range(25):
        t0 = n * 5000
        spans = [
            ("r", None, "front", "/api", t0, 900, "server"),
            *rpc("a", "r", "front", "svc-a", "work", t0 + 10, 300),
        ]
        if n == 3:  # one trace only: svc-a calls svc-b once
            spans += rpc("b", "as", "svc-a", "svc-b", "once", t0 + 50, 100)
        traces.append(spans)
    topo, report = infer_file(write(tmp_path, jaeger(traces)))
    once = next(e for e in report["endpoints"] if e["service"] == "svc-b")
    assert once["rare"] and once["instances"] == 1
    assert once["fits"], "no fit for the operation seen once"
    assert all(f["kind"] == "constant" and f["ks_statistic"] is None for f in once["fits"])
    svc_a = next(e for e in report["endpoints"] if e["service"] == "svc-a")
    assert svc_a["structure"] == []  # the 24 instances without a call win the vote
    assert svc_a["variants_left_out"][0]["count"] == 1
    topology.validate(topo)


def test_the_original_against_itself_is_the_twins_noise_floor():
    from tailscope.traces.spans import Span, Trace, TraceSet
    from tailscope.twin.validate import comparison

    def trace(i: int, ns: int) -> Trace:
        root = Span(str(i), None, "front", "/x", "server", i, i + ns)
        return Trace(str(i), root, i * 1000, ns, {"front": ns}, 1, 0, 0)

    # a burst in the second half: its p99 is 5× the first half's
    original = TraceSet([trace(i, 1000 if i < 100 or i % 10 else 5000) for i in range(200)], [], {}, 200)
    twin = TraceSet([trace(i, 1000) for i in range(200)], [], {}, 200)
    c = comparison(original, twin)
    assert c["original_halves"]["ratios"]["p99"] == pytest.approx(5.0)
    assert c["within_original_noise"] is True and c["within_target"] is False


@pytest.fixture(scope="module")
def hotel_traces(tmp_path_factory) -> Path:
    """A tiny traced run of the hotel graph through /hotels (std-async, 60 requests/s, 2 s)."""
    # Simulated stores: the structure test reads the YAML's declared hit ratios (see _socialnet_run).
    return _hotel_run(tmp_path_factory, "simulated")


@pytest.fixture(scope="module")
def real_hotel_traces(tmp_path_factory) -> Path:
    _skip_without_store_servers()
    return _hotel_run(tmp_path_factory, "real")


def _hotel_run(tmp_path_factory, stores: str) -> Path:
    from tailscope.lab.engines import run_engine
    from tailscope.lab.graph import LOAD, graph
    from tailscope.lab.load import http_load_args
    from tailscope.studies.twin import HOTEL

    d = tmp_path_factory.mktemp(f"hotel-{stores}")
    topo = topology.to_engine_json(HOTEL, d / "hotel.json")
    with graph(topo, "std-async", d / "graph.json", 1.0, d / "traces", stores=stores) as (port, _):
        run_engine(LOAD, http_load_args(port, "/hotels", 8, 60, 2.0, 0.2, timeout="2s"), timeout_s=120)
    return d / "traces" / "traces.otlp.json"


@needs_engine("tailscope-critpath", "tailscope-svc", "tailscope-load")
def test_topology_inferred_from_hotel_traces_matches_what_hotels_path_reaches(hotel_traces, tmp_path):
    from tailscope.studies.twin import HOTEL

    out = tmp_path / "hotel-inferred.yaml"
    r = CliRunner().invoke(main, ["topology", "from-traces", str(hotel_traces), "-o", str(out)])
    assert r.exit_code == 0, r.output
    expected = yaml.safe_load(HOTEL.read_text())
    assert differences(expected, yaml.safe_load(out.read_text()), driven_only=True) == []
    # what /hotels does not reach is not claimed: the full comparison names it
    assert any("recommendation" in d for d in differences(expected, yaml.safe_load(out.read_text())))


@pytest.mark.serial
@needs_engine("tailscope-critpath", "tailscope-svc", "tailscope-load")
def test_topology_inferred_from_real_store_hotel_traces_matches_what_hotels_path_reaches(real_hotel_traces, tmp_path):
    """check_availability's memcached read misses every time on real stores (its on_miss writes no cache):
    its span's answer keeps the document-store read its on_miss."""
    from tailscope.studies.twin import HOTEL

    out = tmp_path / "hotel-inferred.yaml"
    r = CliRunner().invoke(main, ["topology", "from-traces", str(real_hotel_traces), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert differences(yaml.safe_load(HOTEL.read_text()), yaml.safe_load(out.read_text()), driven_only=True) == []


@needs_engine("tailscope-critpath", "tailscope-svc")
def test_validate_refuses_a_topology_that_models_none_of_the_traced_services(tmp_path):
    """A twin compared with traces of another system would be called "within the traced run's own
    variation" by a comparison of two unrelated latency sets: refused before anything runs."""
    spans = [
        [("a", None, "shop-front", "GET /", 0, 900, "server"), *rpc("b", "a", "shop-front", "stock", "get", 100, 500)]
    ]
    traces = write(tmp_path, jaeger(spans * 20))
    out = tmp_path / "validation.json"
    r = CliRunner().invoke(
        main,
        [
            "twin",
            "validate",
            "--topology",
            str(REPO / "topologies" / "passthrough.yaml"),
            "--traces",
            str(traces),
            "--out",
            str(out),
        ],
    )
    text = " ".join(r.output.split())  # the console wraps long lines
    assert r.exit_code == 1, r.output  # the twin commands' "could not validate" exit
    assert "none of which appears in the traces" in text and "shop-front" in text
    assert not out.exists()
