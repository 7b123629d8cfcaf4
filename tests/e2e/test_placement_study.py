"""Study `placement` and its workload: the hotel-reservation graph with its request mix through
tailscope-load --mix (a real HTTP front, every model), the study's pure parts (pools, scores,
placements, the report's analysis) and the study end to end in its tiny form.

The end-to-end study needs h-prof's pieces (tailscope-stress, tailscope-svc --placement): it is
skipped, saying which is missing, until they are built."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD
from tailscope.lab import topology
from tailscope.lab.engines import run_engine, serve
from tailscope.store import EngineDocument
from tailscope.studies import placement
from tailscope.studies.base import RunContext

SVC = BUILD / "bin" / "tailscope-svc"
LOAD = BUILD / "bin" / "tailscope-load"
MODELS = ["std-async", "std-thread", "pool-blocking", "pool-callback", "coroutine"]
needs_engines = pytest.mark.skipif(
    not (SVC.exists() and LOAD.exists()), reason="tailscope-svc / tailscope-load not built; run `make build`"
)


@pytest.fixture(scope="module")
def hotel_json(tmp_path_factory) -> Path:
    if not SVC.exists():
        pytest.skip("tailscope-svc not built")
    return topology.to_engine_json(placement.HOTEL, tmp_path_factory.mktemp("topo") / "hotel.json")


# ---- the graph ---------------------------------------------------------------------------------


@needs_engines
def test_hotel_topology_passes_the_engine_check_with_four_front_routes(hotel_json: Path) -> None:
    # The YAML went through tailscope.lab.topology, which validates with `tailscope-svc --check-topology -`.
    doc = json.loads(hotel_json.read_text())
    assert {s["name"] for s in doc["services"]} == set(placement.SERVICES)
    routes = {doc["front"]["path"]} | {r["path"] for r in doc["front"]["routes"]}
    assert routes == {p for p, _ in placement.MIX}
    assert subprocess.run([str(SVC), "--check-topology", str(hotel_json)], capture_output=True).returncode == 0


@needs_engines
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
    return [a for path, w in placement.MIX for a in ("--mix", f"{path}={w:g}")]


@needs_engines
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
    assert set(eps) == {p for p, _ in placement.MIX}
    assert eps["/hotels"]["requests_completed"] > 0 and eps["/recommendations"]["requests_completed"] > 0
    assert sum(e["requests_completed"] for e in eps.values()) == doc["load"]["requests_completed"]
    graph = json.loads(out.read_text())
    # Every route ran its own endpoint: search reached geo/rate, recommend reached recommendation.
    assert graph["services"]["geo"]["counters"]["requests"] > 0
    assert graph["services"]["recommendation"]["counters"]["requests"] > 0


@needs_engines
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


@needs_engines
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


# ---- pure parts ---------------------------------------------------------------------------------


def test_pools_on_two_cores_follow_the_quick_form() -> None:
    p = placement.make_pools([0, 1], full=False)
    assert p is not None and p.general == [0] and p.performance == [1]
    assert placement.make_pools([0], full=False) is None


def _pt(service: str, kernel: str | None, n: int, excl: float, cpu: float, ipc: float | None = None) -> dict:
    return {
        "service": service,
        "kernel": kernel,
        "instances": n,
        "position": None if kernel is None else "same-core",
        "exclusive_p99_ns": excl,
        "cpu_per_request_ns": cpu,
        "ipc": ipc,
    }


def test_score_is_the_weighted_mean_of_slowdowns_and_says_its_basis() -> None:
    pts = [
        _pt("a", None, 0, 100, 10),
        _pt("a", "cpu", 1, 200, 10),  # slowdowns 1.0 and 0.0 → 0.5, weight 1
        _pt("a", "membw", 8, 300, 20),  # 2.0 and 1.0 → 1.5, weight 3 × 2
        _pt("b", None, 0, 100, 10, ipc=2.0),
        _pt("b", "cpu", 1, 100, 10, ipc=1.0),  # IPC loss 1.0, exclusive 0.0 → 0.5
    ]
    s = placement.sensitivity_scores(pts, placement.DEFAULT_WEIGHTS)
    assert s["a"]["score"] == pytest.approx((0.5 * 1 + 1.5 * 6) / 7)
    assert "CPU time" in s["a"]["basis"]
    assert s["b"]["score"] == pytest.approx(0.5)
    assert "IPC" in s["b"]["basis"]


def test_score_weights_are_range_checked() -> None:
    with pytest.raises(ValueError, match="unknown group"):
        placement._weights({"colour": {"red": 1}})
    with pytest.raises(ValueError, match="finite number"):
        placement._weights({"kernel": {"membw": -1}})
    assert placement._weights({"intensity": {"8": 5}})["intensity"][8] == 5.0


def test_scenarios_fit_the_budget_and_record_their_seeds() -> None:
    services = ["a", "b", "c", "d"]
    weights = {"a": 600, "b": 500, "c": 300, "d": 200}
    scores = {"a": 1.0, "b": 0.9, "c": 0.8, "d": -0.1}
    p99 = {"a": 1.0, "b": 5.0, "c": 2.0, "d": 9.0}
    sc = placement.scenarios(services, weights, scores, p99, 1000)
    assert sc["colocated"]["performance"] is None
    assert sc["knapsack"]["performance"] == ["a", "c"]  # 1.8 in 900 millicores beats b+c (1.7)
    for name in ("knapsack", "random-1", "random-2", "latency-driven"):
        assert sum(weights[s] for s in sc[name]["performance"]) <= 1000
    assert sc["latency-driven"]["performance"] == ["d", "b", "c"]
    assert (sc["random-1"]["seed"], sc["random-2"]["seed"]) == placement.RANDOM_SEEDS
    again = placement.scenarios(services, weights, scores, p99, 1000)
    assert again["random-1"] == sc["random-1"]


def test_summary_without_counters_says_the_score_uses_latency_and_cpu_time() -> None:
    def load(tag: str, meta: dict, p99: float) -> dict:
        return {
            "load": {"achieved_per_s": 100.0, "errors_total": 0, "generator_bottleneck": False},
            "measurements": [
                {"name": "latency_intended", "latency": {"count": 500, "percentiles": {"50": p99 / 2, "99": p99}}}
            ],
            "placement_point": {"tag": tag, **meta},
        }

    def graph(tag: str, cpu_s: float) -> dict:
        return {
            "services": {"geo": {"cpu": {"user_s": cpu_s, "sys_s": 0}, "counters": {"requests": 1000}}},
            "placement_point": {"tag": tag},
        }

    base = {"kind": "sensitivity", "service": "geo", "position": None}
    docs = [
        load("iso", {**base, "kernel": None, "instances": 0, "exclusive": {"geo": {"p99_ns": 100.0}}}, 1e6),
        graph("iso", 1.0),
        load(
            "k",
            {**base, "kernel": "cpu", "instances": 8, "position": "same-core", "exclusive": {"geo": {"p99_ns": 300.0}}},
            2e6,
        ),
        graph("k", 1.0),
        load("s1", {"kind": "scenario", "scenario": "colocated"}, 4e6),
        load("s2", {"kind": "scenario", "scenario": "knapsack"}, 2e6),
    ]
    analysis = {"scenarios": {"colocated": {"performance": None}, "knapsack": {"performance": ["geo"]}}}
    s = placement.summarize(docs, analysis)
    assert s["scores"]["geo"]["score"] == pytest.approx(1.0)  # exclusive ×3 → 2.0, CPU time ×1 → 0.0
    assert any("hardware counters were unavailable" in n for n in s["notes"])
    assert s["scenarios"]["knapsack"]["p99_vs_colocated"] == pytest.approx(0.5)
    assert any(n.startswith("Lowest end-to-end p99: knapsack") for n in s["notes"])
    assert "no per-service hardware counters" in s["counter_reasons"][0]


# ---- the study end to end (tiny form) --------------------------------------------------------------


def _prof_missing() -> str | None:
    if not (BUILD / "bin" / "tailscope-stress").exists():
        return "tailscope-stress is not built (h-prof's native/prof not merged yet)"
    if (
        not SVC.exists()
        or "--placement" not in subprocess.run([str(SVC), "--help"], capture_output=True, text=True).stdout
    ):
        return "tailscope-svc has no --placement (h-prof's svc hooks not merged yet)"
    return None


def test_study_end_to_end_tiny(tmp_path: Path) -> None:
    missing = _prof_missing()
    if missing:
        pytest.skip(missing)
    ctx = RunContext(form="quick", artifacts_dir=tmp_path, progress=lambda *_: None, options={"placement_tiny": True})
    docs = placement.STUDY.run(ctx)
    analysis = next(d.document for d in docs if d.engine == placement.ANALYSIS)
    assert set(analysis["scenarios"]) == {"colocated", "knapsack", "random-1", "random-2", "latency-driven"}
    assert all(isinstance(d, EngineDocument) for d in docs)
    scen = [d for d in docs if d.engine == "tailscope-load" and d.document["placement_point"]["kind"] == "scenario"]
    assert len(scen) == 5
    s = placement.summarize([d.document for d in docs], analysis)
    assert set(s["scenarios"]) == set(analysis["scenarios"])
    assert analysis["tested"] and s["scores"][analysis["tested"][0]]["score"] is not None


def test_topdown_without_a_pmu_is_unavailable_not_its_pipeline_width():
    # Regression: the pipeline width (a parameter) was read as a top-down share, so a VM
    # without a PMU got a top-down figure saying every service was "mostly pipeline_width".
    from tailscope.studies.placement import _derived

    sv = {
        "counters": {
            "derived": {
                "ipc": None,
                "topdown": {
                    "frontend_bound": None,
                    "bad_speculation": None,
                    "backend_bound": None,
                    "retiring": None,
                    "pipeline_width": 4,
                    "reason": "no top-down events on this CPU's PMU",
                },
                "reasons": {"ipc": "cycles: ENOENT"},
            }
        }
    }
    values, reasons = _derived(sv)
    assert not any(k.startswith("topdown.") for k in values)
    assert any(r.startswith("topdown:") for r in reasons)
    sv["counters"]["derived"]["topdown"] |= {"frontend_bound": 0.25, "retiring": 0.5}
    values, _ = _derived(sv)
    assert values == {"topdown.frontend_bound": 0.25, "topdown.retiring": 0.5}
