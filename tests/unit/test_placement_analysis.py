"""Study `placement`, analysis: its values from small synthetic documents (no engines) — scores,
the placements compared, the report's verdicts and flags."""

from __future__ import annotations

import pytest

from tailscope.studies.placement.analysis import (
    BASIS_COUNTERS,
    BASIS_NO_COUNTERS,
    DEFAULT_WEIGHTS,
    NO_COUNTERS,
    RANDOM_SEEDS,
    SensitivityPoint,
    derived_counters,
    scenarios,
    sensitivity_scores,
    summarize,
)

# ---- slowdowns and scores ------------------------------------------------------------------------------


def _pt(
    service: str, kernel: str | None, n: int, excl: float, cpu: float, ipc: float | None = None
) -> SensitivityPoint:
    return SensitivityPoint(
        service=service,
        kernel=kernel,
        instances=n,
        position=None if kernel is None else "same-core",
        exclusive_p99_ns=excl,
        cpu_per_request_ns=cpu,
        ipc=ipc,
    )


def test_score_is_the_weighted_mean_of_slowdowns_and_says_its_basis() -> None:
    pts = [
        _pt("a", None, 0, 100, 10),
        _pt("a", "cpu", 1, 200, 10),  # slowdowns 1.0 and 0.0 → 0.5, weight 1
        _pt("a", "membw", 8, 300, 20),  # 2.0 and 1.0 → 1.5, weight 3 × 2
        _pt("b", None, 0, 100, 10, ipc=2.0),
        _pt("b", "cpu", 1, 100, 10, ipc=1.0),  # IPC loss 1.0, exclusive 0.0 → 0.5
    ]
    s = sensitivity_scores(pts, DEFAULT_WEIGHTS)
    assert s["a"].score == pytest.approx((0.5 * 1 + 1.5 * 6) / 7)
    assert s["a"].basis == BASIS_NO_COUNTERS and not s["a"].uses_counters
    assert s["a"].cells == {("cpu", 1, "same-core"): pytest.approx(0.5), ("membw", 8, "same-core"): pytest.approx(1.5)}
    assert s["b"].score == pytest.approx(0.5)
    assert s["b"].basis == BASIS_COUNTERS and s["b"].uses_counters


# ---- placements ------------------------------------------------------------------------------------------


def test_scenarios_fit_the_budget_and_record_their_seeds() -> None:
    services = ["a", "b", "c", "d"]
    weights = {"a": 600, "b": 500, "c": 300, "d": 200}
    scores = {"a": 1.0, "b": 0.9, "c": 0.8, "d": -0.1}
    p99 = {"a": 1.0, "b": 5.0, "c": 2.0, "d": 9.0}
    sc = scenarios(services, weights, scores, p99, 1000)
    assert list(sc) == ["colocated", "knapsack", "random-1", "random-2", "latency-driven"]
    assert sc["colocated"].performance is None
    assert sc["knapsack"].performance == ("a", "c")  # 1.8 in 900 millicores beats b+c (1.7)
    assert sc["knapsack"].total_score == pytest.approx(1.8) and sc["knapsack"].total_weight_millicores == 900
    for name in ("knapsack", "random-1", "random-2", "latency-driven"):
        perf = sc[name].performance
        assert perf is not None and sum(weights[s] for s in perf) <= 1000
    assert sc["latency-driven"].performance == ("d", "b", "c")
    assert (sc["random-1"].seed, sc["random-2"].seed) == RANDOM_SEEDS
    assert scenarios(services, weights, scores, p99, 1000)["random-1"] == sc["random-1"]


# ---- counters --------------------------------------------------------------------------------------------


def test_topdown_without_a_pmu_is_unavailable_not_its_pipeline_width() -> None:
    # Regression: the pipeline width (a parameter) was read as a top-down share, so a VM
    # without a PMU got a top-down figure saying every service was "mostly pipeline_width".
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
    values, reasons = derived_counters(sv)
    assert values == {}
    assert reasons == ["ipc: cycles: ENOENT", "topdown: no top-down events on this CPU's PMU"]
    sv["counters"]["derived"]["topdown"] |= {"frontend_bound": 0.25, "retiring": 0.5}
    values, _ = derived_counters(sv)
    assert values == {"topdown.frontend_bound": 0.25, "topdown.retiring": 0.5}


# ---- the report's values from stored documents -------------------------------------------------------------


def _load(tag: str, meta: dict, p99: float | None, *, low: tuple[str, ...] = (), bottleneck: bool = False) -> dict:
    lat = {"count": 500, "low_confidence": list(low), "percentiles": {} if p99 is None else {"50": p99 / 2, "99": p99}}
    return {
        "load": {"achieved_per_s": 100.0, "errors_total": 2, "generator_bottleneck": bottleneck},
        "measurements": [{"name": "latency_intended", "latency": lat}],
        "placement_point": {"tag": tag, **meta},
    }


def _graph(tag: str, service: str, cpu_s: float, derived: dict | None = None) -> dict:
    counters: dict = {"requests": 1000}
    if derived is not None:
        counters["derived"] = derived
    return {
        "services": {service: {"cpu": {"user_s": cpu_s, "sys_s": 0}, "counters": counters}},
        "placement_point": {"tag": tag},
    }


def _sensitivity(
    service: str, iso_p99: float, hit_p99: float | None, derived: dict | None = None, hit_derived: dict | None = None
) -> list[dict]:
    """An isolated point and (unless hit_p99 is None) one cpu×8 same-core point of `service`, with
    these exclusive p99s and counter figures (`hit_derived`: the interfered point's, if they differ)."""
    base = {"kind": "sensitivity", "service": service, "position": None}
    docs = [
        _load(
            f"iso-{service}", {**base, "kernel": None, "instances": 0, "exclusive": {service: {"p99_ns": iso_p99}}}, 1e6
        ),
        _graph(f"iso-{service}", service, 1.0, derived),
    ]
    if hit_p99 is not None:
        meta = {**base, "kernel": "cpu", "instances": 8, "position": "same-core"}
        docs += [
            _load(f"{service}-cpu", {**meta, "exclusive": {service: {"p99_ns": hit_p99}}}, 2e6),
            _graph(f"{service}-cpu", service, 1.0, hit_derived or derived),
        ]
    return docs


def _scenario(name: str, p99: float | None, **kw) -> dict:
    return _load(f"scenario-{name}", {"kind": "scenario", "scenario": name}, p99, **kw)


def _analysis(knapsack: list[str], *names: str) -> dict:
    plans = {
        "colocated": {"performance": None, "how": "nothing pinned"},
        "knapsack": {"performance": knapsack, "how": "k"},
    }
    plans |= {n: {"performance": ["geo"], "how": n} for n in names}
    sizing = {s: {"peak_pct": 10.0, "p95_pct": 8.0, "weight_millicores": 100} for s in ("geo", "rate")}
    return {
        "pools": {"general": [0], "performance": [1], "smt": False, "how": "quick form"},
        "same_core": "same CPU, time-shared (no SMT)",
        "rate_per_s": 500.0,
        "capacity_millicores": 1000,
        "sizing": sizing,
        "scenarios": plans,
    }


def test_scores_ratios_and_the_lowest_p99_without_counters() -> None:
    docs = _sensitivity("geo", 100.0, 300.0) + [_scenario("colocated", 4e6), _scenario("knapsack", 2e6, low=("99",))]
    s = summarize(docs, _analysis(["geo"]))
    assert s.scores["geo"].score == pytest.approx(1.0)  # exclusive ×3 → 2.0, CPU time ×1 → 0.0
    assert s.most_sensitive == "geo"
    assert s.score_bases == (BASIS_NO_COUNTERS,) and s.scored_without_counters
    assert [o.name for o in s.outcomes] == ["colocated", "knapsack"]
    assert s.outcome("knapsack").p99_vs_colocated == pytest.approx(0.5)
    assert s.outcome("colocated").p99_vs_colocated == pytest.approx(1.0)
    assert s.lowest_p99 == "knapsack"
    assert s.outcome("knapsack").p99_low_confidence and not s.outcome("colocated").p99_low_confidence
    assert s.generator_limited == ()
    assert not s.knapsack_placed_none
    assert s.counter_reasons == (NO_COUNTERS,)
    assert not s.ipc_bars_available and s.highest_ipc is None and not s.topdown_available
