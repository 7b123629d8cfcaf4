"""Study `placement`, analysis: its values from small synthetic documents (no engines) — sizing,
slowdowns and scores, the placements compared, the report's verdicts and flags — and a few golden
tests of the wording the section gives them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tailscope.studies.placement.analysis import (
    BASIS_COUNTERS,
    BASIS_NO_COUNTERS,
    DEFAULT_WEIGHTS,
    GENERAL_POOL,
    NO_COUNTERS,
    PERFORMANCE_POOL,
    RANDOM_SEEDS,
    SERVICES,
    Heatmap,
    PlacedScenario,
    PlacementSummary,
    ScenarioOutcome,
    SensitivityPoint,
    SensitivityScore,
    derived_counters,
    has_measurements,
    percentile,
    relative_slowdowns,
    scenarios,
    sensitivity_scores,
    summarize,
    weight_millicores,
)
from tailscope.studies.placement.section import summary_notes

# ---- sizing ------------------------------------------------------------------------------------------


def test_weight_is_peak_cpu_times_ten_rounded_up_and_never_zero() -> None:
    assert weight_millicores(12.34) == 124
    assert weight_millicores(50.0) == 500
    assert weight_millicores(0.0) == 1
    assert weight_millicores(None) == 1


def test_percentile_is_nearest_rank_and_none_when_empty() -> None:
    assert percentile([], 95) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
    assert percentile([7.0], 99) == 7.0


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


def test_slowdown_is_relative_to_isolated_and_ipc_loss_is_inverted() -> None:
    base, hit = _pt("a", None, 0, 100, 10, ipc=2.0), _pt("a", "cpu", 1, 150, 5, ipc=0.5)
    slow = relative_slowdowns(base, hit)
    assert slow["exclusive_p99_ns"] == pytest.approx(0.5)
    assert slow["cpu_per_request_ns"] == pytest.approx(-0.5)  # faster: a negative slowdown
    assert slow["ipc"] == pytest.approx(3.0)  # 2.0 ÷ 0.5 − 1
    assert "exclusive_p50_ns" not in slow  # neither point has it


def test_slowdown_needs_a_positive_isolated_value() -> None:
    assert relative_slowdowns(_pt("a", None, 0, 0, 10), _pt("a", "cpu", 1, 100, 10)) == {"cpu_per_request_ns": 0.0}


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


def test_score_is_none_without_a_slowdown_and_absent_without_an_isolated_point() -> None:
    pts = [
        SensitivityPoint("a", None),  # isolated, but no metric to compare
        SensitivityPoint("a", "cpu", 1, "same-core", exclusive_p99_ns=100.0),
        _pt("b", "cpu", 1, 200, 10),  # no isolated point: b cannot be scored
    ]
    s = sensitivity_scores(pts, DEFAULT_WEIGHTS)
    assert list(s) == ["a"]
    assert s["a"].score is None and s["a"].cells == {}


def test_the_weights_decide_how_much_each_point_counts() -> None:
    pts = [_pt("a", None, 0, 100, 10), _pt("a", "cpu", 1, 200, 10), _pt("a", "l3", 1, 400, 10)]  # 0.5 and 1.5
    zero_l3 = {**DEFAULT_WEIGHTS, "kernel": {**DEFAULT_WEIGHTS["kernel"], "l3": 0.0}}
    assert sensitivity_scores(pts, DEFAULT_WEIGHTS)["a"].score == pytest.approx((0.5 + 1.5 * 1.5) / 2.5)
    assert sensitivity_scores(pts, zero_l3)["a"].score == pytest.approx(0.5)


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


def test_knapsack_takes_nothing_when_no_score_is_positive() -> None:
    sc = scenarios(["a", "b"], {"a": 100, "b": 100}, {"a": -0.2, "b": None}, {}, 1000)
    assert sc["knapsack"].performance == ()
    assert sc["random-1"].performance is not None and len(sc["random-1"].performance) == 2  # both fit


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


def test_counters_as_value_and_reason_and_none_at_all() -> None:
    values, reasons = derived_counters(
        {"counters": {"derived": {"ipc": {"value": 1.5}, "llc_mpki": {"value": None, "reason": "no LLC event"}}}}
    )
    assert values == {"ipc": 1.5}
    assert reasons == ["llc_mpki: no LLC event"]
    assert derived_counters({"counters": {"requests": 3}}) == ({}, [NO_COUNTERS])


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


def test_nothing_to_report_without_an_analysis_document_with_pools() -> None:
    assert not has_measurements(None)
    assert not has_measurements({"unavailable": [{"name": "placement"}]})  # fewer than 2 cores
    assert has_measurements(_analysis(["geo"]))


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


def test_with_counters_the_score_uses_ipc_and_the_bars_are_available() -> None:
    derived = {"ipc": 2.0, "llc_mpki": 1.0, "topdown": {"frontend_bound": 0.1, "backend_bound": 0.6, "retiring": 0.3}}
    docs = _sensitivity("geo", 100.0, 100.0, derived, hit_derived={**derived, "ipc": 1.0})
    docs += _sensitivity("rate", 100.0, None, {**derived, "ipc": 3.0})
    s = summarize(docs, _analysis(["geo"]))
    assert s.scores["geo"].uses_counters and s.scores["geo"].score == pytest.approx(0.5)  # IPC loss 1.0, p99 0.0
    assert s.scores["rate"].score is None  # isolated only
    assert s.score_bases == (BASIS_COUNTERS,) and not s.scored_without_counters
    assert s.ipc_bars_available and s.highest_ipc == "rate"
    assert s.topdown_available and s.topdown_dominant == {"geo": "backend_bound", "rate": "backend_bound"}
    assert s.counter_reasons == ()


def test_generator_limited_scenarios_are_flagged() -> None:
    docs = [_scenario("colocated", 3e6, bottleneck=True), _scenario("knapsack", 2e6), _scenario("random-1", 1e6)]
    s = summarize(docs, _analysis(["geo"], "random-1"))
    assert s.generator_limited == ("colocated",)
    assert not s.outcome("knapsack").generator_bottleneck
    assert s.lowest_p99 == "random-1"


def test_scenarios_without_a_p99_or_a_colocated_baseline_have_no_ratio() -> None:
    docs = [_scenario("knapsack", None), _scenario("random-1", 2e6)]
    s = summarize(docs, _analysis(["geo"], "random-1", "random-2"))
    assert [o.name for o in s.outcomes] == ["knapsack", "random-1"]  # random-2 was not measured
    assert list(s.placements) == ["colocated", "knapsack", "random-1", "random-2"]
    assert all(o.p99_vs_colocated is None for o in s.outcomes)
    assert s.lowest_p99 == "random-1"
    assert summarize([_scenario("knapsack", None)], _analysis(["geo"])).lowest_p99 is None


def test_an_empty_knapsack_is_a_flag() -> None:
    assert summarize([], _analysis([])).knapsack_placed_none
    assert not summarize([], _analysis(["geo"])).knapsack_placed_none


def test_placements_name_both_pools() -> None:
    s = summarize([], _analysis(["geo", "rate"]))
    assert s.placements["colocated"].performance is None and s.placements["colocated"].general is None
    knap = s.placements["knapsack"]
    assert knap.performance == ("geo", "rate")
    assert knap.general == tuple(x for x in SERVICES if x not in ("geo", "rate"))


def test_sizing_rows_carry_the_knapsacks_pool_and_the_score() -> None:
    s = summarize(_sensitivity("geo", 100.0, 300.0), _analysis(["geo"]))
    rows = {r.service: r for r in s.sizing}
    assert set(rows) == {"geo", "rate"}
    assert rows["geo"].pool == PERFORMANCE_POOL and rows["geo"].score == pytest.approx(1.0)
    assert rows["rate"].pool == GENERAL_POOL and rows["rate"].score is None  # not tested
    assert (rows["geo"].peak_pct, rows["geo"].p95_pct, rows["geo"].weight_millicores) == (10.0, 8.0, 100)


def test_the_heatmap_names_its_largest_slowdown() -> None:
    docs = _sensitivity("geo", 100.0, 300.0) + _sensitivity("rate", 100.0, 500.0)
    hm = summarize(docs, _analysis(["geo"])).heatmap
    assert hm.available
    assert hm.services == ("geo", "rate") and hm.columns == (("cpu", 8, "same-core"),)
    assert hm.cells == ((pytest.approx(1.0),), (pytest.approx(2.0),))
    assert hm.largest is not None
    assert (hm.largest.service, hm.largest.interference) == ("rate", ("cpu", 8, "same-core"))
    assert hm.largest.slowdown == pytest.approx(2.0)


def test_the_heatmap_is_unavailable_without_interference_points() -> None:
    hm = summarize(_sensitivity("geo", 100.0, None), _analysis(["geo"])).heatmap
    assert not hm.available and hm.largest is None


def test_a_heatmap_without_any_slowdown_has_no_largest() -> None:
    # An interference point whose isolated baseline has no metric to compare: a row of blanks (the
    # report once failed here, taking the largest of no cell).
    docs = [
        _load(
            "iso-geo", {"kind": "sensitivity", "service": "geo", "kernel": None, "instances": 0, "position": None}, 1e6
        ),
        _load(
            "geo-cpu",
            {"kind": "sensitivity", "service": "geo", "kernel": "cpu", "instances": 1, "position": "same-core"},
            2e6,
        ),
    ]
    hm = summarize(docs, _analysis(["geo"])).heatmap
    assert hm.available and hm.cells == ((None,),)
    assert hm.largest is None


def test_the_stored_weights_are_the_ones_the_score_uses() -> None:
    docs = _sensitivity("geo", 100.0, 300.0) + [
        _load(
            "geo-l3",
            {
                "kind": "sensitivity",
                "service": "geo",
                "kernel": "l3",
                "instances": 1,
                "position": "same-core",
                "exclusive": {"geo": {"p99_ns": 100.0}},
            },
            1e6,
        ),
        _graph("geo-l3", "geo", 1.0),
    ]  # cpu×8: slowdown 1.0 (weight 3); l3×1: 0.0 (weight 1.5, or 0 below)
    default = summarize(docs, _analysis(["geo"]))
    assert default.scores["geo"].score == pytest.approx(3.0 / 4.5)
    weights = {"intensity": {"1": 1.0, "8": 3.0}, "kernel": {"cpu": 1.0, "l3": 0.0}, "position": {"same-core": 1.0}}
    stored = summarize(docs, {**_analysis(["geo"]), "plan": {"weights": weights}})
    assert stored.scores["geo"].score == pytest.approx(1.0)


# ---- the wording (golden) ------------------------------------------------------------------------------------


def _summary(**values) -> PlacementSummary:
    """A synthetic summary: nothing measured unless `values` say so."""
    blank = PlacementSummary(
        pools_general=(0,),
        pools_performance=(1,),
        pools_how="quick form",
        same_core=None,
        rate_per_s=500.0,
        capacity_millicores=1000,
        points=(),
        scores={},
        sizing=(),
        heatmap=Heatmap((), (), (), None),
        placements={},
        outcomes=(),
        lowest_p99=None,
        generator_limited=(),
        knapsack_placed_none=False,
        most_sensitive=None,
        score_bases=(),
        scored_without_counters=False,
        counter_bars={},
        counter_reasons=(),
        ipc_bars_available=False,
        highest_ipc=None,
        topdown_dominant={},
    )
    return replace(blank, **values)


def _outcome(name: str, p99_ns: float, ratio: float | None, bottleneck: bool = False) -> ScenarioOutcome:
    return ScenarioOutcome(name, p99_ns / 2, p99_ns, False, 100.0, 0, bottleneck, ratio)


def test_golden_lowest_p99_note_names_the_ratios_and_the_flagged_scenarios() -> None:
    outcomes = (
        _outcome("colocated", 4e6, 1.0, bottleneck=True),
        _outcome("knapsack", 2e6, 0.5),
        _outcome("random-1", 3e6, 0.75),
    )
    placed = {o.name: PlacedScenario(o.name, None, None, "") for o in outcomes}
    s = _summary(outcomes=outcomes, placements=placed, lowest_p99="knapsack", generator_limited=("colocated",))
    assert summary_notes(s) == [
        "Lowest end-to-end p99: knapsack (2 ms, 0.5× of colocated); colocated 4 ms (1×), random-1 3 ms "
        "(0.75×). Flagged generator-limited (the generator's own lag, not the graph, may set the tail): colocated."
    ]


def test_golden_most_sensitive_note_says_when_counters_were_unavailable() -> None:
    scores = {
        "geo": SensitivityScore("geo", 0.25, BASIS_NO_COUNTERS, {}),
        "rate": SensitivityScore("rate", 1.5, BASIS_NO_COUNTERS, {}),
    }
    s = _summary(scores=scores, most_sensitive="rate", score_bases=(BASIS_NO_COUNTERS,), scored_without_counters=True)
    assert summary_notes(s) == [
        "Most sensitive service: rate (score 1.500); scores from exclusive p99 and CPU time per request — "
        "hardware counters were unavailable, so the score uses latency and CPU time."
    ]
    with_counters = replace(s, score_bases=(BASIS_COUNTERS,), scored_without_counters=False)
    assert summary_notes(with_counters) == [
        "Most sensitive service: rate (score 1.500); scores from IPC loss and exclusive p99."
    ]


def test_golden_empty_knapsack_note_lists_the_scores() -> None:
    scores = {
        "geo": SensitivityScore("geo", -0.125, BASIS_NO_COUNTERS, {}),
        "rate": SensitivityScore("rate", None, BASIS_NO_COUNTERS, {}),
    }
    assert summary_notes(_summary(scores=scores, knapsack_placed_none=True)) == [
        "The knapsack placed no service on the performance pool: no tested service had a score > 0 "
        "(scores: geo -0.125); its scenario is then the general pool for everything."
    ]
    assert summary_notes(_summary(knapsack_placed_none=True)) == [
        "The knapsack placed no service on the performance pool: no tested service had a score > 0 "
        "(scores: none); its scenario is then the general pool for everything."
    ]


# ---- real store servers placed like services (issue 27) ---------------------------------------------


def _store_graph(tag: str, system: str, cpu_s: float | None, requests: int = 1000) -> dict:
    """A merged graph document of a real-store run: the store server's CPU in its `stores` object."""
    return {
        "services": {},
        "totals": {"front": {"requests": requests}},
        "stores": {"mode": "real", "reason": "found", "servers": [{"system": system, "cpu_s": cpu_s}]},
        "placement_point": {"tag": tag},
    }


def _store_sensitivity(unit: str, iso_cpu_s: float | None, hit_cpu_s: float | None) -> list[dict]:
    """A store server's isolated point and one cpu×8 same-core point: end-to-end latency only (a store
    has no exclusive critical-path time of its own), its CPU from the merged document."""
    system = unit.removeprefix("store:")
    base = {"kind": "sensitivity", "service": unit, "position": None}
    return [
        _load(f"iso-{system}", {**base, "kernel": None, "instances": 0, "exclusive": {}}, 1e6),
        _store_graph(f"iso-{system}", system, iso_cpu_s),
        _load(
            f"{system}-cpu", {**base, "kernel": "cpu", "instances": 8, "position": "same-core", "exclusive": {}}, 2e6
        ),
        _store_graph(f"{system}-cpu", system, hit_cpu_s),
    ]


def test_a_store_server_is_scored_from_its_own_cpu_per_request() -> None:
    docs = _store_sensitivity("store:redis", 0.5, 1.0) + _sensitivity("geo", 100.0, 300.0)
    analysis = _analysis(["geo", "store:redis"]) | {"units": [*SERVICES, "store:redis"]}
    s = summarize(docs, analysis)
    redis = s.scores["store:redis"]
    assert redis.score == pytest.approx(1.0)  # CPU per request 500 µs → 1 ms; no exclusive time to weigh
    assert redis.basis == BASIS_NO_COUNTERS
    # The knapsack's general pool lists the store servers it did not take, beside the services.
    s2 = summarize([], _analysis(["geo"]) | {"units": [*SERVICES, "store:redis", "store:memcached"]})
    assert s2.placements["knapsack"].general == (*(x for x in SERVICES if x != "geo"), "store:redis", "store:memcached")


def test_a_store_whose_cpu_was_not_read_has_no_score() -> None:
    s = summarize(_store_sensitivity("store:memcached", None, 1.0), _analysis([]))
    assert s.scores["store:memcached"].score is None
