"""Study `placement` and its workload: the hotel-reservation graph with its request mix through
tailscope-load --mix (a real HTTP front, every model), the pure parts of its run (pools, score
weights) and the study end to end in its tiny form. The analysis of its documents is tested on
small synthetic documents in tests/unit/test_placement_analysis.py."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, needs_engine, svc_models
from tailscope.lab import topology
from tailscope.lab.engines import run_engine, serve
from tailscope.lab.placement import make_pools
from tailscope.store import EngineDocument
from tailscope.studies import placement
from tailscope.studies.base import RunContext
from tailscope.studies.placement.analysis import ANALYSIS, SERVICES, summarize
from tailscope.studies.placement.run import HOTEL, MIX, plan_weights

SVC = BUILD / "bin" / "tailscope-svc"
LOAD = BUILD / "bin" / "tailscope-load"
MODELS = svc_models()


@pytest.fixture(scope="module")
def hotel_json(tmp_path_factory) -> Path:
    return topology.to_engine_json(HOTEL, tmp_path_factory.mktemp("topo") / "hotel.json")


# ---- the graph ---------------------------------------------------------------------------------


@needs_engine("tailscope-svc")
def test_hotel_topology_passes_the_engine_check_with_four_front_routes(hotel_json: Path) -> None:
    # The YAML went through tailscope.lab.topology, which validates with `tailscope-svc --check-topology -`.
    doc = json.loads(hotel_json.read_text())
    assert {s["name"] for s in doc["services"]} == set(SERVICES)
    routes = {doc["front"]["path"]} | {r["path"] for r in doc["front"]["routes"]}
    assert routes == {p for p, _ in MIX}
    assert subprocess.run([str(SVC), "--check-topology", str(hotel_json)], capture_output=True).returncode == 0


@needs_engine("tailscope-svc")
@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ([{"path": "/hotels", "endpoint": "login"}], "served twice"),
        ([{"path": "/x", "endpoint": "nope"}], "has no endpoint 'nope'"),
        ([{"path": "x", "endpoint": "login"}], "path must start with '/'"),
        ([{"path": "/x", "endpoint": "login", "extra": 1}], "extra"),
    ],
)
def test_bad_front_routes_are_refused_naming_them(hotel_json: Path, routes: list, message: str) -> None:
    doc = json.loads(hotel_json.read_text())
    doc["front"]["routes"] = routes
    with pytest.raises(topology.TopologyError, match=message):
        topology.validate(doc, "hotel")


def _mix_args() -> list[str]:
    return [a for path, w in MIX for a in ("--mix", f"{path}={w:g}")]


@needs_engine("tailscope-svc", "tailscope-load")
@pytest.mark.parametrize("model", MODELS)
def test_hotel_serves_the_mix_under_every_model(hotel_json: Path, tmp_path: Path, model: str) -> None:
    out = tmp_path / "graph.json"
    args = ["--topology", str(hotel_json), "--all", "--model", model, "--port", "0", "--out", str(out)]
    with serve("tailscope-svc", args, stop_timeout_s=30.0) as srv:
        doc = run_engine(
            "tailscope-load",
            ["-c", "4", "-d", "1", "--warmup", "0.2", "-R", "0", "--protocol", "http", "--port", str(srv.port)]
            + _mix_args(),
            timeout_s=120,
        ).document
    assert doc["load"]["errors_total"] == 0
    eps = {e["path"]: e for e in doc["endpoints"]["endpoints"]}
    assert set(eps) == {p for p, _ in MIX}
    assert eps["/hotels"]["requests_completed"] > 0 and eps["/recommendations"]["requests_completed"] > 0
    assert sum(e["requests_completed"] for e in eps.values()) == doc["load"]["requests_completed"]
    graph = json.loads(out.read_text())
    # Every route ran its own endpoint: search reached geo/rate, recommend reached recommendation.
    assert graph["services"]["geo"]["counters"]["requests"] > 0
    assert graph["services"]["recommendation"]["counters"]["requests"] > 0


@needs_engine("tailscope-svc", "tailscope-load")
def test_mix_proportions_against_a_real_front(hotel_json: Path, tmp_path: Path) -> None:
    """Weighted mix through a real HTTP front: the shares sent are binomial around the weights
    (5 σ), per-endpoint histograms are in the document and tagged in the .hlog."""
    args = ["--topology", str(hotel_json), "--all", "--model", "coroutine", "--port", "0"]
    hlog = tmp_path / "load.hlog"
    with serve("tailscope-svc", args + ["--out", str(tmp_path / "g.json")], stop_timeout_s=30.0) as srv:
        doc = run_engine(
            "tailscope-load",
            ["-c", "8", "-d", "2", "--warmup", "0.2", "-R", "0", "--protocol", "http", "--port", str(srv.port)]
            + ["--mix", "/hotels=1", "--mix", "/recommendations=1", "--mix", "/user=2", "--hlog", str(hlog)],
            timeout_s=120,
        ).document
    eps = doc["endpoints"]["endpoints"]
    n = sum(e["requests_sent"] for e in eps)
    assert n > 200
    for e in eps:
        p = e["share_intended"]
        assert abs(e["requests_sent"] - n * p) <= 5 * math.sqrt(n * p * (1 - p)), e
        assert e["latency_intended"]["latency"]["count"] == e["requests_completed"]
    assert doc["config"]["mix"] == [
        {"path": "/hotels", "weight": 1.0},
        {"path": "/recommendations", "weight": 1.0},
        {"path": "/user", "weight": 2.0},
    ]
    tags = {line.split(",", 1)[0] for line in hlog.read_text().splitlines() if line.startswith("Tag=")}
    assert {"Tag=latency_intended", "Tag=latency_intended@/user", "Tag=latency_actual@/hotels"} <= tags


@needs_engine("tailscope-load")
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--mix", "/a=0"], "must be > 0"),
        (["--mix", "a=1"], "must start with '/'"),
        (["--mix", "/a=1", "--path", "/b"], "drop --path"),
        (["--mix", "/a=1", "--protocol", "echo"], "only to --protocol http"),
        (["--mix", "/a=1", "--mix-file", "/nonexistent"], "not both"),
        (["--mix-file", "/nonexistent"], "cannot open"),
    ],
)
def test_bad_mix_is_refused_before_connecting(extra: list[str], message: str) -> None:
    args = [str(LOAD), "--port", "9", "-d", "1", "--protocol", "http", *extra]
    if "--protocol" in extra[2:]:
        args = [str(LOAD), "--port", "9", "-d", "1", *extra]
    r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert message in r.stderr
    assert r.stdout == ""


# ---- pure parts of the run ------------------------------------------------------------------------


def test_pools_on_two_cores_follow_the_quick_form() -> None:
    p = make_pools([0, 1], full=False)
    assert p is not None and p.general == [0] and p.performance == [1]
    assert make_pools([0], full=False) is None


def test_score_weights_are_range_checked() -> None:
    with pytest.raises(ValueError, match="unknown group"):
        plan_weights({"colour": {"red": 1}})
    with pytest.raises(ValueError, match="finite number"):
        plan_weights({"kernel": {"membw": -1}})
    assert plan_weights({"intensity": {"8": 5}})["intensity"][8] == 5.0


# ---- the study end to end (tiny form) --------------------------------------------------------------


@needs_engine("tailscope-svc", "tailscope-load", "tailscope-stress")
def test_study_end_to_end_tiny(tmp_path: Path) -> None:
    ctx = RunContext(form="quick", artifacts_dir=tmp_path, progress=lambda *_: None, options={"placement_tiny": True})
    docs = placement.STUDY.run(ctx)
    analysis = next(d.document for d in docs if d.engine == ANALYSIS)
    assert set(analysis["scenarios"]) == {"colocated", "knapsack", "random-1", "random-2", "latency-driven"}
    assert all(isinstance(d, EngineDocument) for d in docs)
    scen = [d for d in docs if d.engine == "tailscope-load" and d.document["placement_point"]["kind"] == "scenario"]
    assert len(scen) == 5
    s = summarize([d.document for d in docs], analysis)
    assert {o.name for o in s.outcomes} == set(analysis["scenarios"]) == set(s.placements)
    assert s.lowest_p99 in s.placements
    assert analysis["tested"] and s.scores[analysis["tested"][0]].score is not None
    # The tiny form tests one service, and on real stores (the coroutine model has clients for them,
    # so `auto` picks them when the servers are installed) every store server too; any may rank first.
    assert len([t for t in analysis["tested"] if not t.startswith("store:")]) == 1, analysis["tested"]
    assert s.most_sensitive in analysis["tested"]
